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
	d0, d1 := filepath.Dir(p0.log.Dir()), filepath.Dir(p1.log.Dir())
	if d0 == d1 {
		t.Fatalf("both partitions in %s; the test needs one per dir", d0)
	}
	failing.Store(d0)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	ctx := testContext(t)
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "disks", Partition: 0, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to the failing dir: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "disks", Partition: 1, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce to the healthy dir: %v", err)
	}
	r := doFetch(t, cl, fetchReq("disks", topicID(t, ts, "disks"), []int64{0, 0}, 0, -1))
	for _, p := range r.Topics[0].Partitions {
		want := int16(0)
		if p.Partition == 0 {
			want = kerr.KafkaStorageError.Code
		}
		if p.ErrorCode != want {
			t.Fatalf("fetch partition %d: code %d, want %d", p.Partition, p.ErrorCode, want)
		}
	}
}
