package broker

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/vfs"
)

// TestCreateTopicsLogCreationFails: while opening files fails with
// EMFILE for some partitions, CreateTopics answers success once the topic
// is committed (the logs are made afterwards, as Kafka's brokers make
// them), the partitions left without a log are known as such (and a
// CreateTopics answer made then says KAFKA_STORAGE_ERROR, naming them),
// and produce to those partitions answers KAFKA_STORAGE_ERROR, not
// NOT_LEADER_OR_FOLLOWER; no half-made partition directory is left; once
// files open again the broker creates the logs on its own (no restart, no
// metadata change) and every partition takes produce.
func TestCreateTopicsLogCreationFails(t *testing.T) {
	dir := t.TempDir()
	var exhausted atomic.Bool
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		// Partitions 3..5 of the topic: their segment files cannot open.
		if exhausted.Load() && (op == vfs.OpOpenFile || op == vfs.OpCreate) &&
			(strings.Contains(path, "/many-3/") || strings.Contains(path, "/many-4/") || strings.Contains(path, "/many-5/")) {
			return syscall.EMFILE
		}
		return nil
	})
	s, err := New(testConfig(t, dir), Options{Logger: testLogger(), FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := &testServer{Server: s, dir: dir, addr: s.Addr().String()}
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0))
	ctx := testContext(t)

	exhausted.Store(true)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "many", 8, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// The answer comes once the topic is committed, before this broker
	// makes its logs (as Kafka's): the topic is created.
	if got := resp.Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("CreateTopics answered code %d (%v), want success", got.ErrorCode, kerr.ErrorForCode(got.ErrorCode))
	}
	// The metadata watcher makes the logs and fails for partitions 3-5,
	// which stay without a log and are retried in the background.
	deadline := time.Now().Add(15 * time.Second)
	for s.parts.get("many", 0) == nil || s.parts.createFailed("many", 4) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not try the topic's logs")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tp := s.parts.topic("many"); len(tp.failed) != 3 {
		t.Fatalf("%d partitions without a log, want 3", len(tp.failed))
	}
	// A CreateTopics answered while the logs cannot be made says so.
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic, st.TopicID = "many", s.parts.topic("many").id
	s.failUncreatedPartitions(&st)
	if st.ErrorCode != kerr.KafkaStorageError.Code || st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, "3 of its partitions") {
		t.Fatalf("failUncreatedPartitions: code %d, message %v", st.ErrorCode, st.ErrorMessage)
	}
	// The background retry (every 200 ms at first) makes and removes the
	// directory while it tries, so one stat may catch a try in progress;
	// a directory left behind stays.
	for _, p := range []string{"many-3", "many-4", "many-5"} {
		var err error
		for try := 0; try < 20; try++ {
			if _, err = os.Stat(dir + "/" + p); os.IsNotExist(err) {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if !os.IsNotExist(err) {
			t.Fatalf("half-made directory %s left behind: %v", p, err)
		}
	}
	produce := func(p int32) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "many", Partition: p, Value: []byte("v")}).FirstErr()
	}
	if err := produce(0); err != nil {
		t.Fatalf("produce to a partition that was created: %v", err)
	}
	if err := produce(4); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to a partition without a log: %v, want KAFKA_STORAGE_ERROR", err)
	}

	exhausted.Store(false)
	deadline = time.Now().Add(15 * time.Second)
	for s.parts.anyCreateFailed() {
		if time.Now().After(deadline) {
			t.Fatal("the logs were not created after files could open again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for p := range int32(8) {
		if err := produce(p); err != nil {
			t.Fatalf("produce to partition %d after recovery: %v", p, err)
		}
	}
}
