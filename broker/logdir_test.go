package broker

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/vfs"
)

// TestFailedDiskTakesLogDirOffline: with two log dirs, writes to one start
// failing (EIO); produce to its partitions answers KAFKA_STORAGE_ERROR, and
// so do fetches, while the partitions of the other dir keep serving.
func TestFailedDiskTakesLogDirOffline(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	var failing atomic.Value
	failing.Store("")
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		if d := failing.Load().(string); d != "" && op == vfs.OpWrite && strings.HasPrefix(path, d) {
			return errors.New("input/output error")
		}
		return nil
	})
	cfg := testConfig(t, dirA)
	cfg.LogDirs = []string{dirA, dirB}
	s, err := New(cfg, Options{Logger: testLogger(), FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := &testServer{Server: s, dir: dirA, addr: s.Addr().String()}
	createTopic(t, ts.admin(t), "disks", 2, nil)
	p0, p1 := s.parts.get("disks", 0), s.parts.get("disks", 1)
	d0, d1 := filepath.Dir(p0.Log.Dir()), filepath.Dir(p1.Log.Dir())
	if d0 == d1 {
		t.Fatalf("both partitions in %s; the test needs one per dir", d0)
	}
	// The metadata log lives in the first dir, which holds partition 0:
	// fail the other one (a failed metadata dir stops the node, as in
	// Kafka).
	failing.Store(d1)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	ctx := testContext(t)
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "disks", Partition: 1, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to the failing dir: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "disks", Partition: 0, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce to the healthy dir: %v", err)
	}
	r := doFetch(t, cl, fetchReq("disks", topicID(t, ts, "disks"), []int64{0, 0}, 0, -1))
	for _, p := range r.Topics[0].Partitions {
		want := int16(0)
		if p.Partition == 1 {
			want = kerr.KafkaStorageError.Code
		}
		if p.ErrorCode != want {
			t.Fatalf("fetch partition %d: code %d, want %d", p.Partition, p.ErrorCode, want)
		}
	}

	// DescribeLogDirs lists the offline dir with KAFKA_STORAGE_ERROR and
	// without partitions, the healthy one with its partition.
	// Straight to the broker: franz-go's sharded form of this request
	// retries a dir's retriable error away.
	raw, err := cl.Broker(int(cfg.NodeID)).Request(ctx, kmsg.NewPtrDescribeLogDirsRequest())
	if err != nil {
		t.Fatal(err)
	}
	dresp := raw.(*kmsg.DescribeLogDirsResponse)
	for _, d := range dresp.Dirs {
		offline := filepath.Clean(d.Dir) == filepath.Clean(d1)
		switch {
		case offline && (d.ErrorCode != kerr.KafkaStorageError.Code || len(d.Topics) != 0):
			t.Fatalf("offline dir %s: code %d, %d topics", d.Dir, d.ErrorCode, len(d.Topics))
		case !offline && (d.ErrorCode != 0 || len(d.Topics) != 1 || d.Topics[0].Partitions[0].Partition != 0):
			t.Fatalf("healthy dir %s: code %d, topics %+v", d.Dir, d.ErrorCode, d.Topics)
		}
	}
	// New partitions go to the healthy dir only, fewest-partitions rule
	// notwithstanding.
	createTopic(t, ts.admin(t), "after", 3, nil)
	for i := range int32(3) {
		if d := filepath.Dir(s.parts.get("after", i).Log.Dir()); d != d0 {
			t.Fatalf("new partition after-%d placed in %s, not the healthy %s", i, d, d0)
		}
	}
}
