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

// TestFlushSyncsSegmentFilesSideBySide: a flush that syncs a segment's
// .log and its index files (Close's final flush; a roll) fsyncs them at
// the same time, so it waits for the slowest rather than their sum. The
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
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-indexStarted:
	default:
		t.Fatal("the closing flush synced no .index file")
	}
	if _, ok := waitedOut.Load("yes"); ok {
		t.Error("the .log's fsync finished before the .index's started: the segment's files were synced one after another")
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Errorf("recovery point %d after the flush, want the log end %d", rp, leo)
	}
}

// TestDurableFlushSyncsOnlyTheLog: with flush.messages=1 a flush fsyncs
// the active segment's .log every time and its .index and .timeindex
// never (with 1 KiB records a produce wrote an index entry most times, and
// waited for three fsyncs instead of one). That is safe because the
// indexes of the segment holding the checkpointed recovery point, and of
// every later one, are rebuilt by the recovery after an unclean shutdown,
// while a roll and the closing flush sync them for the segments that are
// not recovered. For each way the log can end (a power loss with the
// recovery point checkpointed inside the active segment, after rolls, and
// after a clean close), the test checks what the disk holds afterwards:
// every acknowledged batch, and indexes with every entry.
func TestDurableFlushSyncsOnlyTheLog(t *testing.T) {
	const appends = 40
	type run struct {
		mem          *vfs.MemFS
		syncs        map[string]int
		acked        []appended
		idx, timeIdx []int // entries per segment before the end, by segment
		paths        [][2]string
		cfg          LogConfig
		m            *Manager
	}
	start := func(t *testing.T, segmentBytes int64) *run {
		r := &run{mem: vfs.NewMem(), syncs: map[string]int{}}
		var mu sync.Mutex
		fsys := vfs.NewFaulty(r.mem, func(op vfs.Op, path string) error {
			if op == vfs.OpSync {
				mu.Lock()
				r.syncs[path[strings.LastIndex(path, "."):]]++
				mu.Unlock()
			}
			return nil
		})
		r.cfg = smallConfig(segmentBytes, 4096)
		r.cfg.FlushMessages = 1
		r.m = openTestManager(t, fsys, r.cfg)
		l := createTestLog(t, r.m, r.cfg)
		mu.Lock()
		clear(r.syncs)
		mu.Unlock()
		for i := range appends {
			r.acked = append(r.acked, mustAppend(t, l, batchOf(1, int64(1000+i), 1000), 0))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range l.segments() {
			s.mu.RLock()
			r.idx, r.timeIdx = append(r.idx, len(s.offIdx)), append(r.timeIdx, len(s.timeIdx))
			s.mu.RUnlock()
			r.paths = append(r.paths, [2]string{s.path(indexSuffix), s.path(timeIndexSuffix)})
		}
		return r
	}
	// onDisk is the size of each segment's index files as a power loss
	// now would leave them.
	onDisk := func(t *testing.T, r *run) (idx, timeIdx []int64) {
		t.Helper()
		r.mem.Crash()
		for _, p := range r.paths {
			var sz [2]int64
			for i, name := range p {
				if st, err := r.mem.Stat(name); err == nil {
					sz[i] = st.Size()
				}
			}
			idx, timeIdx = append(idx, sz[0]), append(timeIdx, sz[1])
		}
		return idx, timeIdx
	}
	// reopen loads the log after the power loss and checks that every
	// acknowledged batch reads back, by its offset, through the index.
	reopen := func(t *testing.T, r *run) *Manager {
		t.Helper()
		m2 := openTestManager(t, r.mem, r.cfg)
		l2, ok := m2.Log("orders", 0)
		if !ok {
			t.Fatal("log lost")
		}
		if l2.LogEndOffset() != appends {
			t.Fatalf("log end %d after the power loss, want %d (every append was acknowledged)", l2.LogEndOffset(), appends)
		}
		for _, a := range r.acked {
			rd, err := l2.Read(a.base, 1, appends, true)
			if err != nil {
				t.Fatalf("read at %d: %v", a.base, err)
			}
			if hs := parseAll(t, rd.Data); len(hs) == 0 || hs[0].BaseOffset != a.base || !bytes.Equal(rd.Data[:len(a.data)], withBaseOffset(a.data, a.base)) {
				t.Fatalf("read at %d returned other data", a.base)
			}
		}
		return m2
	}

	t.Run("power loss in the active segment", func(t *testing.T) {
		r := start(t, 1<<30)
		// Batches of about 1.1 KiB against index.interval.bytes of 4
		// KiB: an entry every fourth append or so.
		if len(r.idx) != 1 || r.idx[0] < appends/5 || r.idx[0] > appends/2 {
			t.Fatalf("index entries per segment %v for %d appends; the test expects one segment with an entry every few appends", r.idx, appends)
		}
		if r.syncs[logSuffix] != appends {
			t.Errorf(".log synced %d times for %d appends with flush.messages=1, want every time", r.syncs[logSuffix], appends)
		}
		if n := r.syncs[indexSuffix] + r.syncs[timeIndexSuffix]; n != 0 {
			t.Errorf("the active segment's index files synced %d times in %d flushes, want none", n, appends)
		}
		// The recovery point goes to disk inside the active segment.
		if err := r.m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if idx, _ := onDisk(t, r); idx[0] >= int64(r.idx[0])*offsetEntrySize {
			t.Fatalf(".index of %d bytes after the power loss: the test means the entries to be lost", idx[0])
		}
		m2 := reopen(t, r)
		defer m2.Close()
		if n := m2.recoveredSegments.Load(); n != 1 {
			t.Fatalf("%d segments recovered, want the active one, which holds the checkpointed recovery point", n)
		}
		// Recovery rebuilt the indexes and synced them.
		idx, timeIdx := onDisk(t, r)
		// (The rebuilt .timeindex may end in an entry for the largest
		// timestamp, as a rolled segment's does.)
		if idx[0] != int64(r.idx[0])*offsetEntrySize || timeIdx[0] < int64(r.timeIdx[0])*timeEntrySize {
			t.Fatalf("after recovery and a second power loss: .index %d bytes, .timeindex %d, want %d and at least %d entries",
				idx[0], timeIdx[0], r.idx[0], r.timeIdx[0])
		}
	})

	t.Run("power loss after rolls", func(t *testing.T) {
		r := start(t, 16<<10)
		if len(r.idx) < 3 {
			t.Fatalf("%d segments, the test expects rolls", len(r.idx))
		}
		if err := r.m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		idx, timeIdx := onDisk(t, r)
		// A rolled segment below the recovery point's is not recovered:
		// the roll must have synced its indexes.
		for i := range len(r.idx) - 1 {
			if idx[i] != int64(r.idx[i])*offsetEntrySize || timeIdx[i] < int64(r.timeIdx[i])*timeEntrySize {
				t.Errorf("rolled segment %d after the power loss: .index %d bytes, .timeindex %d, want %d and at least %d entries",
					i, idx[i], timeIdx[i], r.idx[i], r.timeIdx[i])
			}
		}
		m2 := reopen(t, r)
		defer m2.Close()
		if n := m2.recoveredSegments.Load(); n != 1 {
			t.Fatalf("%d segments recovered, want the active one only", n)
		}
	})

	t.Run("clean close", func(t *testing.T) {
		r := start(t, 1<<30)
		if err := r.m.Close(); err != nil {
			t.Fatal(err)
		}
		// The clean-shutdown marker lets the next start trust the
		// active segment's indexes: the closing flush synced them.
		idx, timeIdx := onDisk(t, r)
		if idx[0] != int64(r.idx[0])*offsetEntrySize || timeIdx[0] < int64(r.timeIdx[0])*timeEntrySize {
			t.Fatalf("after a clean close and a power loss: .index %d bytes, .timeindex %d, want %d and at least %d entries",
				idx[0], timeIdx[0], r.idx[0], r.timeIdx[0])
		}
		m2 := reopen(t, r)
		defer m2.Close()
		if n := m2.recoveredSegments.Load(); n != 0 {
			t.Fatalf("%d segments recovered after a clean close, want none", n)
		}
	})
}
