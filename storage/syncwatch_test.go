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

// TestFlushSyncsOnlyWrittenIndexFiles: with flush.messages=1 a flush
// fsyncs the .log every time but an index file only when the flush wrote
// or trimmed it, since an fsync of an unchanged file still costs the disk
// a cache flush (about 1 ms on the benchmark machine) and most appends add
// no index entry. After a power loss, the indexes must still hold every
// entry the last flush persisted, and every acknowledged batch must read
// back by offset.
func TestFlushSyncsOnlyWrittenIndexFiles(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	syncs := map[string]int{}
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			mu.Lock()
			syncs[path[strings.LastIndex(path, "."):]]++
			mu.Unlock()
		}
		return nil
	})
	cfg := smallConfig(1<<30, 4096)
	cfg.FlushMessages = 1
	m := openTestManager(t, fsys, cfg)
	l := createTestLog(t, m, cfg)
	mu.Lock()
	clear(syncs)
	mu.Unlock()
	const appends = 40
	var acked []appended
	for i := range appends {
		acked = append(acked, mustAppend(t, l, batchOf(1, int64(1000+i), 1000), 0))
	}
	seg := l.active()
	seg.mu.RLock()
	entries := len(seg.offIdx)
	seg.mu.RUnlock()
	mu.Lock()
	logSyncs, idxSyncs, timeSyncs := syncs[logSuffix], syncs[indexSuffix], syncs[timeIndexSuffix]
	mu.Unlock()
	// Batches of about 1.1 KiB against index.interval.bytes of 4 KiB: an
	// entry every fourth append or so.
	if entries < appends/5 || entries > appends/2 {
		t.Fatalf("%d index entries for %d appends; the test expects one every few appends", entries, appends)
	}
	if logSyncs != appends {
		t.Errorf(".log synced %d times for %d appends with flush.messages=1, want every time", logSyncs, appends)
	}
	if idxSyncs < entries || idxSyncs > entries+1 {
		t.Errorf(".index synced %d times for %d entries written (%d flushes): want once per flush that wrote one", idxSyncs, entries, appends)
	}
	if timeSyncs > appends/2 {
		t.Errorf(".timeindex synced %d times in %d flushes: unchanged files synced", timeSyncs, appends)
	}
	idxPath := seg.path(indexSuffix)
	before, err := mem.Stat(idxPath)
	if err != nil {
		t.Fatal(err)
	}

	mem.Crash()
	after, err := mem.Stat(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || before.Size() != int64(entries)*offsetEntrySize {
		t.Fatalf(".index of %d bytes after the power loss, %d before, want %d entries of %d", after.Size(), before.Size(), entries, offsetEntrySize)
	}
	m2 := openTestManager(t, mem, cfg)
	defer m2.Close()
	l2, ok := m2.Log("orders", 0)
	if !ok {
		t.Fatal("log lost")
	}
	if l2.LogEndOffset() != appends {
		t.Fatalf("log end %d after the power loss, want %d (every append was acknowledged)", l2.LogEndOffset(), appends)
	}
	for _, a := range acked {
		r, err := l2.Read(a.base, 1, appends, true)
		if err != nil {
			t.Fatalf("read at %d: %v", a.base, err)
		}
		if hs := parseAll(t, r.Data); len(hs) == 0 || hs[0].BaseOffset != a.base || !bytes.Equal(r.Data[:len(a.data)], withBaseOffset(a.data, a.base)) {
			t.Fatalf("read at %d returned other data", a.base)
		}
	}
}
