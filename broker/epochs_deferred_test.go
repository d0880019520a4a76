package broker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/vfs"
)

// syncGateFS holds the fsync of a leader-epoch-checkpoint's temporary
// file until gate is closed, telling held when one is held.
type syncGateFS struct {
	vfs.FS
	held chan struct{}
	gate chan struct{}
}

func (g syncGateFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, partition.EpochCheckpointFile+".tmp") {
		return f, err
	}
	return syncGateFile{f, g}, nil
}

type syncGateFile struct {
	vfs.File
	g syncGateFS
}

func (f syncGateFile) Sync() error {
	select {
	case f.g.held <- struct{}{}:
	default:
	}
	<-f.g.gate
	return f.File.Sync()
}

// TestDeferredEpochCheckpointFsyncOutsideLock: the background write of a
// first leader-epoch-checkpoint fsyncs without the partition's lock: while
// its fsync is held, appends to the partition go on, and once it is let
// go the file holds the cache. (A partition made as the leader has its
// checkpoint from its creation: it is removed here, as a log made as a
// follower that then leads has none.)
func TestDeferredEpochCheckpointFsyncOutsideLock(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "epoch-gate", 1, nil)
	removeEpochCheckpoints(t, ts, "epoch-gate", 1)
	p := ts.parts.get("epoch-gate", 0)
	if p == nil {
		t.Fatal("partition epoch-gate-0 not hosted")
	}
	gate := syncGateFS{FS: p.Env.FS, held: make(chan struct{}, 1), gate: make(chan struct{})}
	env := *p.Env
	env.FS = gate
	p.Env = &env // this partition's alone, before its first append
	released := false
	release := func() {
		if !released {
			released = true
			close(gate.gate)
		}
	}
	t.Cleanup(release)

	cl := ts.client(t, kgo.DefaultProduceTopic("epoch-gate"))
	produceAll(t, cl, keyedRecords("epoch-gate", 10, "a"))
	select {
	case <-gate.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the deferred leader-epoch-checkpoint was not written within 10 s")
	}
	// The fsync is held: the partition's lock is free, and appends go on.
	if !p.Mu.TryLock() {
		t.Fatal("the partition's lock is held during the checkpoint's fsync")
	}
	p.Mu.Unlock()
	produced := make(chan error, 1)
	go func() {
		produced <- cl.ProduceSync(testContext(t), keyedRecords("epoch-gate", 5, "b")...).FirstErr()
	}()
	select {
	case err := <-produced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a produce waited for the checkpoint's fsync")
	}
	if p.EpochsUnwritten() == false {
		t.Fatal("the checkpoint counts as written before its fsync ended")
	}
	release()
	waitEpochCheckpoint(t, filepath.Join(ts.dir, "epoch-gate-0"), "0\n1\n0 0\n")
	for deadline := time.Now().Add(5 * time.Second); p.EpochsUnwritten(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint still counts as unwritten after its write")
		}
	}
}
