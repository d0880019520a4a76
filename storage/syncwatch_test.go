package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// lockedBuffer is a log sink safe for the watchdog's timer goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSyncStallReported: an fsync of a segment that blocks (the fault
// injector holds it) past the threshold is logged at error level naming
// the partition, the file and the wait, counted in StalledSyncs and
// SyncsStalledNow, logged again as the wait doubles, and reported
// completed when the disk answers; the flush then succeeds. A prompt
// fsync is never reported.
func TestSyncStallReported(t *testing.T) {
	release := make(chan struct{})
	var blocking sync.Map // file name → true while its fsync is held
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			if _, hold := blocking.Load("on"); hold {
				<-release
			}
		}
		return nil
	})
	var out lockedBuffer
	m, err := OpenManager(ManagerConfig{
		FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger:             slog.New(slog.NewTextHandler(&out, nil)),
		SyncStallThreshold: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(2, 1, 100), 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := m.StalledSyncs(); n != 0 {
		t.Fatalf("a prompt fsync counted as stalled (%d)", n)
	}

	mustAppend(t, l, batchOf(2, 1, 100), 0)
	blocking.Store("on", true)
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	deadline := time.Now().Add(5 * time.Second)
	for m.SyncsStalledNow() != 1 || strings.Count(out.String(), "fsync stalled") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("stall not reported: now %d, total %d, log:\n%s", m.SyncsStalledNow(), m.StalledSyncs(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := out.String()
	for _, want := range []string{"level=ERROR", "partition=orders-0", "00000000000000000000.log", "waited=", "threshold=50ms"} {
		if !strings.Contains(first, want) {
			t.Fatalf("stall log line lacks %q:\n%s", want, first)
		}
	}
	select {
	case err := <-flushed:
		t.Fatalf("flush returned (%v) while its fsync was held", err)
	default:
	}

	blocking.Delete("on")
	close(release)
	if err := <-flushed; err != nil {
		t.Fatalf("flush after the fsync completed: %v", err)
	}
	if m.SyncsStalledNow() != 0 || m.StalledSyncs() != 1 {
		t.Fatalf("after completion: stalled now %d, total %d; want 0 and 1", m.SyncsStalledNow(), m.StalledSyncs())
	}
	if !strings.Contains(out.String(), "stalled fsync completed") {
		t.Fatalf("completion not logged:\n%s", out.String())
	}
}

// TestFlushSyncsSegmentFilesSideBySide: a flush fsyncs a segment's .log
// and its index files at the same time, so it waits for the slowest
// rather than their sum (flush.messages=1 pays it on every produce). The
// injector holds the .log's fsync until the .index's has started, which
// one fsync after the other never does; the recovery point moves only
// after both.
func TestFlushSyncsSegmentFilesSideBySide(t *testing.T) {
	var armed sync.Map
	indexStarted := make(chan struct{})
	var once sync.Once
	var waitedOut sync.Map
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if _, on := armed.Load("on"); !on || op != vfs.OpSync {
			return nil
		}
		switch {
		case strings.HasSuffix(path, indexSuffix):
			once.Do(func() { close(indexStarted) })
		case strings.HasSuffix(path, logSuffix):
			select {
			case <-indexStarted:
			case <-time.After(3 * time.Second):
				waitedOut.Store("yes", true)
			}
		}
		return nil
	})
	m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	// Past index.interval.bytes (4 KiB), so the segment has index entries
	// and open index files to sync.
	for range 8 {
		mustAppend(t, l, batchOf(1, 1, 1000), 0)
	}
	armed.Store("on", true)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-indexStarted:
	default:
		t.Fatal("the flush synced no .index file")
	}
	if _, ok := waitedOut.Load("yes"); ok {
		t.Error("the .log's fsync finished before the .index's started: the segment's files were synced one after another")
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Errorf("recovery point %d after the flush, want the log end %d", rp, leo)
	}
}
