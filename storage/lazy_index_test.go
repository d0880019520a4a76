package storage

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// warnRecorder is a slog handler that keeps the messages of warnings.
type warnRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	return nil
}
func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler      { return w }

func (w *warnRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// openWarnManager is openTestManager with warnings recorded in w.
func openWarnManager(t *testing.T, fsys vfs.FS, w *warnRecorder, cfg LogConfig) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerConfig{
		FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: slog.New(w), Decompress: gunzip,
		Now:         func() time.Time { return time.UnixMilli(0) },
		TopicConfig: func(string) LogConfig { return cfg },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// segmentFiles lists the names in a log's directory that end in one of a
// segment's suffixes, and the rest.
func segmentFiles(t *testing.T, fsys vfs.FS, dir string) (segs, other []string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if name := e.Name(); len(name) > 20 && slices.Contains(segmentExts, name[20:]) {
			segs = append(segs, e.Name())
		} else {
			other = append(other, e.Name())
		}
	}
	slices.Sort(segs)
	return segs, other
}

// indexEntries is what a segment holds in memory, loaded if need be.
func indexEntries(t *testing.T, l *Log, s *segment) ([]offsetEntry, []timeEntry) {
	t.Helper()
	if err := s.ensureLoaded(l.cfg.Load(), l.logger); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.offIdx), slices.Clone(s.timeIdx)
}

// TestIndexFilesComeWithFirstEntry: a new log is one file, the .log (and
// partition.metadata): its .index and .timeindex are made together with
// their first entry, as Kafka's LazyIndex makes them on first use, since
// creating them cost CreateTopics an inode each for indexes most
// partitions never fill. A log without entries restarts, cleanly or after
// a power loss, without making them and without a warning; one with
// entries has both files, matching its entries, and the flush that made
// them synced the directory, so a power loss keeps them.
func TestIndexFilesComeWithFirstEntry(t *testing.T) {
	mem := vfs.NewMem()
	var w warnRecorder
	cfg := smallConfig(1<<30, 4096)
	m := openWarnManager(t, mem, &w, cfg)
	l := createTestLog(t, m, cfg)
	dir := l.Dir()
	var want []byte
	check := func(l *Log, what string, wantSegs ...string) {
		t.Helper()
		if segs, _ := segmentFiles(t, mem, dir); !slices.Equal(segs, wantSegs) {
			t.Fatalf("%s: segment files %v, want %v", what, segs, wantSegs)
		}
		if got := readAll(t, l); !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes, want %d", what, len(got), len(want))
		}
		if len(want) > 0 {
			if off, ts, ok, err := l.FindOffsetByTimestamp(1001); !ok || err != nil || off != 1 || ts != 1001 {
				t.Fatalf("%s: timestamp 1001 found at %d (%d, %v, %v), want offset 1", what, off, ts, ok, err)
			}
		}
		if msgs := w.take(); len(msgs) > 0 {
			t.Fatalf("%s: warnings %q", what, msgs)
		}
	}
	reopen := func(crash bool) *Log {
		t.Helper()
		if crash {
			mem.Crash() // m is left as the power loss found it
		} else if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m = openWarnManager(t, mem, &w, cfg)
		l, ok := m.Log("orders", 0)
		if !ok {
			t.Fatal("log lost")
		}
		return l
	}
	onlyLog := segmentName(0) + logSuffix
	withIndexes := []string{segmentName(0) + indexSuffix, onlyLog, segmentName(0) + timeIndexSuffix}
	check(l, "a new log", onlyLog)
	l = reopen(false)
	check(l, "a new log after a clean restart", onlyLog)
	l = reopen(true)
	check(l, "a new log after a power loss", onlyLog)

	// Under index.interval.bytes: no entry, no index file, even flushed.
	for i := range 3 {
		want = append(want, mustAppend(t, l, batchOf(1, 1000+int64(i), 100), 0).data...)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	check(l, "flushed under index.interval.bytes", onlyLog)
	// Recovery after a power loss records the segment's largest
	// timestamp in its time index, as Kafka's LogSegment.recover: both
	// files come.
	l = reopen(true)
	check(l, "after a power loss", withIndexes...)
	if off, tim := indexEntries(t, l, l.active()); len(off) != 0 || !slices.Equal(tim, []timeEntry{{ts: 1002, rel: 2}}) {
		t.Fatalf("after a power loss: entries %v %v, want only the final time entry (1002 at 2)", off, tim)
	}

	// Past index.interval.bytes the flush writes offset entries, synced
	// with the directory.
	for i := range 6 {
		want = append(want, mustAppend(t, l, batchOf(1, 2000+int64(i), 1000), 0).data...)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	check(l, "flushed past index.interval.bytes", withIndexes...)
	off, tim := indexEntries(t, l, l.active())
	if len(off) == 0 || len(tim) < 2 {
		t.Fatalf("%d offset and %d time entries, want some of each", len(off), len(tim))
	}
	checkIndexes(t, l)

	// A roll makes only the new segment's .log.
	forceRoll(t, l)
	rolled := append(withIndexes, segmentName(9)+logSuffix)
	check(l, "rolled", rolled...)
	off, tim = indexEntries(t, l, l.segments()[0])
	l = reopen(true)
	check(l, "rolled, after a power loss", rolled...)
	// Recovery rebuilds the entries from the .log: the final time entry
	// the earlier recovery added inside the segment is not among them.
	if off2, tim2 := indexEntries(t, l, l.segments()[0]); !slices.Equal(off, off2) || len(tim2) == 0 || tim2[len(tim2)-1] != tim[len(tim)-1] {
		t.Fatalf("after a power loss: entries %v %v, want %v %v", off2, tim2, off, tim)
	}
	checkIndexes(t, l)
	l = reopen(false)
	check(l, "rolled, after a clean restart", rolled...)
	checkIndexes(t, l)
	m.Close()
}

// TestLostIndexFilesRebuilt: a segment with entries whose index files are
// gone, both or one, is rebuilt from its .log at the next start, with a
// warning, as Kafka's LogLoader recovers a segment without its offset
// index; reads by offset and by timestamp then find what they found
// before, and the files hold the same entries again.
func TestLostIndexFilesRebuilt(t *testing.T) {
	for _, lose := range [][]string{{indexSuffix, timeIndexSuffix}, {indexSuffix}, {timeIndexSuffix}} {
		t.Run(strings.Join(lose, "+"), func(t *testing.T) {
			mem := vfs.NewMem()
			var w warnRecorder
			cfg := smallConfig(8000, 1000)
			m := openWarnManager(t, mem, &w, cfg)
			l := createTestLog(t, m, cfg)
			var want []byte
			for i := range 20 {
				want = append(want, mustAppend(t, l, batchOf(2, 1000+10*int64(i), 500), 0).data...)
			}
			if n := len(l.segments()); n < 3 {
				t.Fatalf("%d segments, want at least 3", n)
			}
			first := l.segments()[0]
			off, tim := indexEntries(t, l, first)
			if len(off) == 0 || len(tim) == 0 {
				t.Fatalf("first segment: %d offset and %d time entries, want some of each", len(off), len(tim))
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			for _, ext := range lose {
				if err := mem.Remove(first.path(ext)); err != nil {
					t.Fatal(err)
				}
			}
			w.take()

			m = openWarnManager(t, mem, &w, cfg)
			defer m.Close()
			l, _ = m.Log("orders", 0)
			if msgs := w.take(); len(msgs) != 1 || !strings.Contains(msgs[0], "rebuilt") {
				t.Errorf("warnings %q, want one about the rebuild", msgs)
			}
			first = l.segments()[0]
			off2, tim2 := indexEntries(t, l, first)
			if !slices.Equal(off, off2) || !slices.Equal(tim, tim2) {
				t.Fatalf("rebuilt entries %v %v, want %v %v", off2, tim2, off, tim)
			}
			for _, ext := range []string{indexSuffix, timeIndexSuffix} {
				if _, err := mem.Stat(first.path(ext)); err != nil {
					t.Errorf("%s not rebuilt: %v", ext, err)
				}
			}
			checkIndexes(t, l)
			if got := readAll(t, l); !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes, want %d", len(got), len(want))
			}
			if o, ts, ok, err := l.FindOffsetByTimestamp(1030); !ok || err != nil || o != 6 || ts != 1030 {
				t.Fatalf("timestamp 1030 found at %d (%d, %v, %v), want offset 6", o, ts, ok, err)
			}
		})
	}
}

// TestTruncateSegmentWithoutIndexFiles: truncating inside a segment that
// has no index files makes none, and truncating one with entries to below
// its first keeps its (now empty) files, which load as no entries.
func TestTruncateSegmentWithoutIndexFiles(t *testing.T) {
	mem := vfs.NewMem()
	cfg := smallConfig(1<<30, 4096)
	m := openTestManager(t, mem, cfg)
	l := createTestLog(t, m, cfg)
	for i := range 4 {
		mustAppend(t, l, batchOf(1, 1000+int64(i), 100), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if segs, _ := segmentFiles(t, mem, l.Dir()); len(segs) != 1 {
		t.Fatalf("after truncating a segment without entries: %v", segs)
	}
	for i := range 8 {
		mustAppend(t, l, batchOf(1, 2000+int64(i), 1000), 0)
	}
	checkIndexes(t, l)
	if off, _ := indexEntries(t, l, l.active()); len(off) == 0 {
		t.Fatal("no index entries after 8 KB of appends")
	}
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, l)
	if off, tim := indexEntries(t, l, l.active()); len(off) != 0 || len(tim) != 0 {
		t.Fatalf("entries %v %v after truncating below the first", off, tim)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, mem, cfg)
	defer m.Close()
	l, _ = m.Log("orders", 0)
	if l.LogEndOffset() != 1 {
		t.Fatalf("log end %d after truncating to 1 and a restart", l.LogEndOffset())
	}
	// The clean shutdown recorded the largest timestamp kept.
	off, tim := indexEntries(t, l, l.active())
	if len(off) != 0 || !slices.Equal(tim, []timeEntry{{ts: 1000, rel: 0}}) {
		t.Fatalf("entries %v %v after a restart, want only the final time entry", off, tim)
	}
}
