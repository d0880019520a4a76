package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/vfs"
)

// TestOffsetForLeaderEpoch: after appends in epoch 0, the partition's
// checkpoint holds (0, 0) and OffsetForLeaderEpoch answers the log end.
// The first epoch's checkpoint is written in the background, within a
// second or two of the append (partition.WriteDeferredEpochs).
func TestOffsetForLeaderEpoch(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "epochs", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("epochs"))
	produceAll(t, cl, keyedRecords("epochs", 10, "e"))
	if got := offsetForLeaderEpoch(t, cl, "epochs", 0); got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 10 {
		t.Fatalf("offset for epoch 0: %+v", got)
	}
	waitEpochCheckpoint(t, filepath.Join(ts.dir, "epochs-0"), "0\n1\n0 0\n")
}

// TestFirstEpochCheckpointDeferred: a new partition's first append does
// not wait for its leader-epoch-checkpoint. A crash before the deferred
// write (the copy, with the file removed) restarts with the same epoch
// cache, rebuilt from the batches' leader epochs and written then; a
// clean shutdown right after the append writes the file before it ends.
func TestFirstEpochCheckpointDeferred(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "epd", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("epd"))
	produceAll(t, cl, keyedRecords("epd", 10, "e"))
	cl.Close()

	crashed := crashCopy(t, ts.dir)
	if err := os.Remove(filepath.Join(crashed, "epd-0", partition.EpochCheckpointFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The clean shutdown wrote the file, whether or not the background
	// writer had.
	data, err := os.ReadFile(filepath.Join(ts.dir, "epd-0", partition.EpochCheckpointFile))
	if err != nil || string(data) != "0\n1\n0 0\n" {
		t.Fatalf("leader-epoch-checkpoint after a clean shutdown %q %v", data, err)
	}

	rs := startServer(t, crashed)
	rc := rs.client(t, kgo.DefaultProduceTopic("epd"))
	produceAll(t, rc, keyedRecords("epd", 5, "f"))
	got := offsetForLeaderEpoch(t, rc, "epd", 0)
	if got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 15 {
		t.Fatalf("offset for epoch 0 after the crash: %+v", got)
	}
	waitEpochCheckpoint(t, filepath.Join(crashed, "epd-0"), "0\n1\n0 0\n")
}

// offsetForLeaderEpoch asks for the end of epoch in partition 0 of topic.
func offsetForLeaderEpoch(t *testing.T, cl *kgo.Client, topic string, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch = -1
	rp.LeaderEpoch = epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// waitEpochCheckpoint waits up to 10 s for the leader-epoch-checkpoint in
// the partition directory dir to read want.
func waitEpochCheckpoint(t *testing.T, dir, want string) {
	t.Helper()
	var data []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, err = os.ReadFile(filepath.Join(dir, partition.EpochCheckpointFile))
		if err == nil && string(data) == want {
			return
		}
	}
	t.Fatalf("leader-epoch-checkpoint %q %v, want %q", data, err, want)
}

// removeEpochCheckpoints removes the leader-epoch-checkpoint a new topic's
// partitions were made with (partition.NewLeaderLogFiles), and forgets
// the epoch cache it started, before their first append, so that it
// writes the first one as for a log made as a follower that then leads.
func removeEpochCheckpoints(t *testing.T, ts *testServer, topic string, parts int) {
	t.Helper()
	for i := range parts {
		if err := os.Remove(filepath.Join(ts.dir, fmt.Sprintf("%s-%d", topic, i), partition.EpochCheckpointFile)); err != nil {
			t.Fatal(err)
		}
		p := ts.parts.get(topic, int32(i))
		p.Mu.Lock()
		p.Epochs = nil
		p.Mu.Unlock()
	}
}

// TestDeferredEpochCheckpointsSideBySide: the background writer writes
// the deferred leader-epoch-checkpoints of a new topic's partitions side
// by side, not one after another: each write holds its partition's lock
// for its fsyncs, and a producer to all of the topic's partitions waited
// for each in turn. The filesystem holds each checkpoint fsync 300 ms and
// counts how many run at once.
func TestDeferredEpochCheckpointsSideBySide(t *testing.T) {
	const parts = 8
	var (
		mu             sync.Mutex
		inFlight, most int
	)
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		if op != vfs.OpSync || !strings.Contains(path, partition.EpochCheckpointFile) {
			return nil
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	})
	dir := t.TempDir()
	s, err := New(testConfig(t, dir), Options{Logger: testLogger(), FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := &testServer{Server: s, dir: dir, addr: s.Addr().String()}
	createTopic(t, ts.admin(t), "epw", parts, nil)
	removeEpochCheckpoints(t, ts, "epw", parts)
	cl := ts.client(t, kgo.DefaultProduceTopic("epw"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range int32(parts) {
		recs = append(recs, &kgo.Record{Topic: "epw", Partition: i, Value: []byte("v")})
	}
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		waitEpochCheckpoint(t, filepath.Join(dir, fmt.Sprintf("epw-%d", i)), "0\n1\n0 0\n")
	}
	mu.Lock()
	defer mu.Unlock()
	if most < 2 {
		t.Errorf("at most %d checkpoint fsync ran at once for %d new partitions: written one after another", most, parts)
	}
}

// TestNewLeaderEpochCheckpointAtCreation: a partition made with this node
// as its leader has its leader-epoch-checkpoint from its creation, epoch 0
// from offset 0, as Kafka's makeLeader records it; its first produce
// leaves it as it is and defers no write. A crash that leaves it torn (it
// is not synced until the log's first flush) restarts with the cache
// rebuilt from the batches.
func TestNewLeaderEpochCheckpointAtCreation(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "epc", 1, nil)
	dir := filepath.Join(ts.dir, "epc-0")
	data, err := os.ReadFile(filepath.Join(dir, partition.EpochCheckpointFile))
	if err != nil || string(data) != "0\n1\n0 0\n" {
		t.Fatalf("leader-epoch-checkpoint of a new partition %q %v", data, err)
	}
	before, err := os.Stat(filepath.Join(dir, partition.EpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	// The cache is the file's from the start: the first append need not
	// read it back.
	p := ts.parts.get("epc", 0)
	p.Mu.Lock()
	eps := slices.Clone(p.Epochs)
	p.Mu.Unlock()
	if !slices.Equal(eps, []partition.EpochEntry{{Epoch: 0, StartOffset: 0}}) {
		t.Errorf("epoch cache of a new partition %v, want epoch 0 from offset 0", eps)
	}
	cl := ts.client(t, kgo.DefaultProduceTopic("epc"))
	produceAll(t, cl, keyedRecords("epc", 10, "e"))
	if p.EpochsUnwritten() {
		t.Error("the first produce deferred a checkpoint write")
	}
	after, err := os.Stat(filepath.Join(dir, partition.EpochCheckpointFile))
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the first produce rewrote the leader-epoch-checkpoint (%v)", err)
	}
	if got := offsetForLeaderEpoch(t, cl, "epc", 0); got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 10 {
		t.Fatalf("offset for epoch 0: %+v", got)
	}
	cl.Close()

	crashed := crashCopy(t, ts.dir)
	if err := os.WriteFile(filepath.Join(crashed, "epc-0", partition.EpochCheckpointFile), []byte("0\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := startServer(t, crashed)
	rc := rs.client(t, kgo.DefaultProduceTopic("epc"))
	produceAll(t, rc, keyedRecords("epc", 5, "f"))
	if got := offsetForLeaderEpoch(t, rc, "epc", 0); got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 15 {
		t.Fatalf("offset for epoch 0 after a crash with a torn checkpoint: %+v", got)
	}
	waitEpochCheckpoint(t, filepath.Join(crashed, "epc-0"), "0\n1\n0 0\n")
}
