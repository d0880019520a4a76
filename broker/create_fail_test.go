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
// EMFILE for some partitions, CreateTopics answers KAFKA_STORAGE_ERROR
// (naming the partitions left without a log) instead of success, and
// produce to those partitions answers KAFKA_STORAGE_ERROR, not
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
	got := resp.Topics[0]
	if got.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("CreateTopics answered code %d (%v), want KAFKA_STORAGE_ERROR", got.ErrorCode, kerr.ErrorForCode(got.ErrorCode))
	}
	if got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "3 of its partitions") {
		t.Fatalf("error message %v does not count the 3 partitions", got.ErrorMessage)
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
	deadline := time.Now().Add(15 * time.Second)
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
