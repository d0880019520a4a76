package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// truncConfig rolls every two 202-byte batches of batchOf(3, ts, 40), so
// ten batches make segments at 0, 6, 12, 18 and 24, with index entries.
func truncConfig() LogConfig {
	cfg := smallConfig(600, 100)
	cfg.FileDeleteDelayMs = 1000
	return cfg
}

// tenBatches appends ten batches of three records; batch i holds offsets
// 3i..3i+2 with timestamps 1000+10i..1002+10i.
func tenBatches(t testing.TB, l *Log) []appended {
	t.Helper()
	var out []appended
	for i := range 10 {
		out = append(out, mustAppend(t, l, batchOf(3, 1000+10*int64(i), 40), 0))
	}
	return out
}

// prefixBelow is the bytes of the appended batches that end below end.
func prefixBelow(as []appended, end int64) []byte {
	var out []byte
	for _, a := range as {
		if a.last < end {
			out = append(out, a.data...)
		}
	}
	return out
}

// checkIndexes checks that every index entry, in memory and, after a
// flush, on disk, points below the log end offset and inside its segment.
func checkIndexes(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	for _, s := range l.segments() {
		if err := s.ensureLoaded(l.cfg.Load(), l.logger); err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		off, tim := slices.Clone(s.offIdx), slices.Clone(s.timeIdx)
		s.mu.RUnlock()
		size := s.size.Load()
		for _, e := range off {
			if s.base+int64(e.rel) >= leo || int64(e.pos) >= size {
				t.Fatalf("segment %d: index entry (%d, %d) past log end %d or size %d", s.base, e.rel, e.pos, leo, size)
			}
		}
		for _, e := range tim {
			if s.base+int64(e.rel) >= leo {
				t.Fatalf("segment %d: time index entry (%d, %d) past log end %d", s.base, e.ts, e.rel, leo)
			}
		}
		// A segment whose indexes have no entry may have no files.
		b, err := vfs.ReadFile(l.fsys, s.path(indexSuffix))
		if errors.Is(err, fs.ErrNotExist) && len(off) == 0 && len(tim) == 0 {
			if _, err := l.fsys.Stat(s.path(timeIndexSuffix)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("segment %d: a .timeindex (%v) without an .index", s.base, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		disk, err := decodeOffsetIndex(b, size)
		if err != nil || !slices.Equal(disk, off) {
			t.Fatalf("segment %d: .index on disk %v (%v), in memory %v", s.base, disk, err, off)
		}
		b, err = vfs.ReadFile(l.fsys, s.path(timeIndexSuffix))
		if err != nil {
			t.Fatal(err)
		}
		diskTime, err := decodeTimeIndex(b)
		if err != nil || !slices.Equal(diskTime, tim) {
			t.Fatalf("segment %d: .timeindex on disk %v (%v), in memory %v", s.base, diskTime, err, tim)
		}
	}
}

func TestTruncateTo(t *testing.T) {
	tests := []struct {
		name      string
		prepare   func(t *testing.T, l *Log)
		offset    int64
		wantLEO   int64
		wantBases []int64
		wantLSO   int64
	}{
		{name: "batch boundary mid segment", offset: 9, wantLEO: 9, wantBases: []int64{0, 6}},
		{name: "inside a batch cuts the whole batch", offset: 10, wantLEO: 9, wantBases: []int64{0, 6}},
		{name: "segment base keeps it empty", offset: 12, wantLEO: 12, wantBases: []int64{0, 6, 12}},
		{name: "inside the active segment", offset: 27, wantLEO: 27, wantBases: []int64{0, 6, 12, 18, 24}},
		{name: "last record of the log", offset: 29, wantLEO: 27, wantBases: []int64{0, 6, 12, 18, 24}},
		{name: "first batch", offset: 1, wantLEO: 0, wantBases: []int64{0}},
		{name: "zero", offset: 0, wantLEO: 0, wantBases: []int64{0}},
		{name: "log end is a no-op", offset: 30, wantLEO: 30, wantBases: []int64{0, 6, 12, 18, 24}},
		{name: "beyond the log end is a no-op", offset: 1 << 40, wantLEO: 30, wantBases: []int64{0, 6, 12, 18, 24}},
		{
			name: "below the log start offset lowers it",
			prepare: func(t *testing.T, l *Log) {
				if err := l.IncrementLogStartOffset(8); err != nil {
					t.Fatal(err)
				}
			},
			offset: 7, wantLEO: 6, wantBases: []int64{0, 6}, wantLSO: 6,
		},
		{
			name: "below the first segment starts over there",
			prepare: func(t *testing.T, l *Log) {
				if err := l.IncrementLogStartOffset(13); err != nil {
					t.Fatal(err)
				}
				if n, err := l.DeleteOldSegments(time.UnixMilli(0)); n != 2 || err != nil {
					t.Fatalf("retention deleted %d: %v", n, err)
				}
			},
			offset: 4, wantLEO: 4, wantBases: []int64{4}, wantLSO: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			m := openTestManager(t, mem, truncConfig())
			l := createTestLog(t, m, truncConfig())
			as := tenBatches(t, l)
			if got := segmentBases(l); !slices.Equal(got, []int64{0, 6, 12, 18, 24}) {
				t.Fatalf("setup made segments %v", got)
			}
			if tt.prepare != nil {
				tt.prepare(t, l)
			}
			lsoBefore := l.LogStartOffset()
			l.SetHighWatermark(25)
			if err := l.TruncateTo(tt.offset); err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != tt.wantLEO || !slices.Equal(segmentBases(l), tt.wantBases) {
				t.Fatalf("log end %d, segments %v; want %d, %v", l.LogEndOffset(), segmentBases(l), tt.wantLEO, tt.wantBases)
			}
			wantLSO := lsoBefore
			if tt.wantLSO != 0 {
				wantLSO = tt.wantLSO
			}
			if l.LogStartOffset() != wantLSO || l.RecoveryPoint() > tt.wantLEO || l.highWatermark() != min(25, tt.wantLEO) {
				t.Fatalf("start %d (want %d), recovery point %d, high watermark %d", l.LogStartOffset(), wantLSO, l.RecoveryPoint(), l.highWatermark())
			}
			// What a reader from the log start offset gets back.
			wantFrom := func(lso int64) []byte {
				var out []byte
				for _, a := range as {
					if a.base >= lso && a.last < tt.wantLEO {
						out = append(out, a.data...)
					}
				}
				return out
			}
			want := wantFrom(l.LogStartOffset())
			if got := readAll(t, l); !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes after truncation, want %d", len(got), len(want))
			}
			wantTs, wantTsOff := int64(-1), int64(-1)
			if tt.wantLEO >= 3 && tt.wantLEO > l.segments()[0].base {
				last := as[tt.wantLEO/3-1]
				wantTs, wantTsOff = 1002+10*(last.base/3), last.last
			}
			if ts, off := l.MaxTimestamp(); ts != wantTs || off != wantTsOff {
				t.Fatalf("max timestamp %d at %d, want %d at %d", ts, off, wantTs, wantTsOff)
			}
			if r, err := l.Read(tt.wantLEO, 1<<20, 1<<40, true); err != nil || len(r.Data) != 0 {
				t.Fatalf("read at the log end: %d bytes, %v", len(r.Data), err)
			}
			if _, err := l.Read(tt.wantLEO+1, 1<<20, 1<<40, true); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read past the log end: %v", err)
			}
			checkIndexes(t, l)

			// The truncation is durable: a power loss right after it
			// changes nothing. (The log start offset was never
			// checkpointed, so it comes back as the first segment's.)
			mem.Crash()
			m2 := openTestManager(t, mem, truncConfig())
			l2, _ := m2.Log("orders", 0)
			want = wantFrom(l2.LogStartOffset())
			if got := readAll(t, l2); !bytes.Equal(got, want) || l2.LogEndOffset() != tt.wantLEO {
				t.Fatalf("after a crash: %d bytes to %d, want %d bytes to %d", len(got), l2.LogEndOffset(), len(want), tt.wantLEO)
			}

			// Appends continue at the new log end, through rolls, and
			// survive a clean restart.
			for i := range 3 {
				a := mustAppend(t, l2, batchOf(3, 5000+int64(i), 40), 0)
				if a.base != tt.wantLEO+int64(3*i) {
					t.Fatalf("appended at %d after truncating to %d", a.base, tt.wantLEO)
				}
				want = append(want, a.data...)
			}
			if got := readAll(t, l2); !bytes.Equal(got, want) {
				t.Fatal("appended batches do not read back after the truncated ones")
			}
			if off, ts, ok, err := l2.FindOffsetByTimestamp(2000); !ok || err != nil || off != tt.wantLEO || ts != 5000 {
				t.Fatalf("timestamp search found %d at %d (%v, %v), want %d", ts, off, ok, err, tt.wantLEO)
			}
			checkIndexes(t, l2)
			if err := m2.Close(); err != nil {
				t.Fatal(err)
			}
			m3 := openTestManager(t, mem, truncConfig())
			l3, _ := m3.Log("orders", 0)
			if got := readAll(t, l3); !bytes.Equal(got, want) || l3.LogEndOffset() != tt.wantLEO+9 {
				t.Fatalf("after a clean restart: %d bytes to %d", len(got), l3.LogEndOffset())
			}
			m3.Close()
		})
	}
}

// TestTruncateDeletesSegmentsLater checks that truncated segments wait as
// .deleted files for file.delete.delay.ms, readable by reads that hold
// them, and go when it has passed.
func TestTruncateDeletesSegmentsLater(t *testing.T) {
	mem := vfs.NewMem()
	m := openTestManager(t, mem, truncConfig())
	l := createTestLog(t, m, truncConfig())
	tenBatches(t, l)
	held := l.segments()[4]
	if !held.acquire() {
		t.Fatal("segment gone")
	}
	if err := l.TruncateTo(9); err != nil {
		t.Fatal(err)
	}
	for _, base := range []int64{12, 18, 24} {
		if _, err := mem.Stat(segFile(base, logSuffix+deletedFileSuffix)); err != nil {
			t.Fatalf("segment %d not waiting as .deleted: %v", base, err)
		}
		if _, err := mem.Stat(segFile(base, logSuffix)); err == nil {
			t.Fatalf("segment %d still live", base)
		}
	}
	buf := make([]byte, protocol.BatchHeaderSize)
	if err := held.readFull(buf, 0); err != nil {
		t.Fatalf("a read holding a truncated segment failed: %v", err)
	}
	held.release()
	if n, err := m.RunFileDeletions(time.UnixMilli(999)); n != 0 || err != nil {
		t.Fatalf("deleted %d before the delay: %v", n, err)
	}
	if n, err := m.RunFileDeletions(time.UnixMilli(1000)); n != 3 || err != nil {
		t.Fatalf("deleted %d after the delay: %v", n, err)
	}
	ents, err := mem.ReadDir(partDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{
		"00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
		"00000000000000000006.index", "00000000000000000006.log", "00000000000000000006.timeindex",
		"partition.metadata",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("partition dir holds %v", names)
	}
	m.Close()
}

// TestTruncateCrashAtEveryStep loses power after each disk operation of a
// truncation: the restarted log must be a prefix of the old one at least
// as long as the truncated log, never with a hole, and take appends.
func TestTruncateCrashAtEveryStep(t *testing.T) {
	var as []appended
	setup := func(l *Log) {
		as = nil
		for i := range 10 {
			as = append(as, mustAppend(t, l, batchOf(3, 1000+10*int64(i), 40), 0))
			if i%2 == 1 {
				forceRoll(t, l)
			}
		}
	}
	truncate := func(m *Manager, l *Log) error { return l.TruncateTo(10) }
	intermediate := 0
	for n := 0; ; n++ {
		l, done, m := crashScenario(t, n, setup, truncate)
		leo := l.LogEndOffset()
		if got := readAll(t, l); !bytes.Equal(got, prefixBelow(as, leo)) || leo < 9 {
			t.Fatalf("crash after %d ops: %d bytes to offset %d, not a prefix of the old log", n, len(got), leo)
		}
		if done != (leo == 9) {
			t.Fatalf("crash after %d ops: done %v but log end %d", n, done, leo)
		}
		if leo != 9 && leo != 30 {
			intermediate++
		}
		if a := mustAppend(t, l, batchOf(1, 9000, 10), 0); a.base != leo {
			t.Fatalf("crash after %d ops: appended at %d, log end was %d", n, a.base, leo)
		}
		assertNoTempFiles(t, m)
		m.Close()
		if done {
			if intermediate == 0 {
				t.Fatal("no crash point left the later segments deleted and the cut undone")
			}
			t.Logf("truncation takes %d disk operations", n)
			return
		}
		if n > 200 {
			t.Fatal("truncation never completes")
		}
	}
}

// TestTruncateFullyCrashAtEveryStep does the same for
// TruncateFullyAndStartAt: the restarted log is the old one or the new.
func TestTruncateFullyCrashAtEveryStep(t *testing.T) {
	var as []appended
	setup := func(l *Log) {
		as = nil
		for i := range 6 {
			as = append(as, mustAppend(t, l, batchOf(3, 1000+10*int64(i), 40), 0))
			if i%2 == 1 {
				forceRoll(t, l)
			}
		}
	}
	for _, start := range []int64{0, 7, 100} {
		for n := 0; ; n++ {
			l, done, m := crashScenario(t, n, setup, func(m *Manager, l *Log) error { return l.TruncateFullyAndStartAt(start) })
			got := readAll(t, l)
			fresh := l.LogStartOffset() == start && l.LogEndOffset() == start && len(got) == 0
			old := l.LogStartOffset() == 0 && l.LogEndOffset() == 18 && bytes.Equal(got, prefixBelow(as, 18))
			if !fresh && !old || done && !fresh {
				t.Fatalf("start %d, crash after %d ops (done %v): log %d..%d with %d bytes", start, n, done, l.LogStartOffset(), l.LogEndOffset(), len(got))
			}
			assertNoTempFiles(t, m)
			m.Close()
			if done {
				break
			}
			if n > 100 {
				t.Fatal("truncation never completes")
			}
		}
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	tests := []struct {
		name  string
		start int64
	}{
		{name: "above the log end", start: 1000},
		{name: "at the first segment's base", start: 0},
		{name: "inside the log", start: 7},
		{name: "at an existing segment's base", start: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			m := openTestManager(t, mem, truncConfig())
			l := createTestLog(t, m, truncConfig())
			tenBatches(t, l)
			l.SetHighWatermark(20)
			if err := l.TruncateFullyAndStartAt(tt.start); err != nil {
				t.Fatal(err)
			}
			if l.LogStartOffset() != tt.start || l.LogEndOffset() != tt.start || l.RecoveryPoint() != tt.start ||
				l.highWatermark() != tt.start || !slices.Equal(segmentBases(l), []int64{tt.start}) || l.Size() != 0 {
				t.Fatalf("log %d..%d, recovery point %d, high watermark %d, segments %v, %d bytes",
					l.LogStartOffset(), l.LogEndOffset(), l.RecoveryPoint(), l.highWatermark(), segmentBases(l), l.Size())
			}
			if tt.start > 0 {
				if _, err := l.Read(tt.start-1, 1<<20, 1<<40, true); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read below the new start: %v", err)
				}
			}
			if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
				t.Fatalf("max timestamp %d at %d in an empty log", ts, off)
			}
			// The follower goes on from the leader's batches at start.
			batch := stamp(batchOf(2, 7000, 30), tt.start, 9)
			res, err := l.AppendAsFollower(slices.Clone(batch))
			if err != nil || res.FirstOffset != tt.start || res.LastOffset != tt.start+1 {
				t.Fatalf("append as follower: %+v, %v", res, err)
			}
			if got := readAll(t, l); !bytes.Equal(got, batch) {
				t.Fatal("follower batch does not read back")
			}
			if _, err := m.RunFileDeletions(time.UnixMilli(1000)); err != nil {
				t.Fatal(err)
			}
			ents, err := mem.ReadDir(partDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 2 { // the .log and partition.metadata: the indexes have no entry
				t.Fatalf("partition dir holds %d entries", len(ents))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := m.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			mem.Crash()
			m2 := openTestManager(t, mem, truncConfig())
			l2, _ := m2.Log("orders", 0)
			if got := readAll(t, l2); !bytes.Equal(got, batch) || l2.LogStartOffset() != tt.start || l2.LogEndOffset() != tt.start+2 {
				t.Fatalf("after a crash: log %d..%d, %d bytes", l2.LogStartOffset(), l2.LogEndOffset(), len(got))
			}
			m2.Close()
		})
	}
}

func TestTruncateArguments(t *testing.T) {
	m := openTestManager(t, vfs.NewMem(), truncConfig())
	l := createTestLog(t, m, truncConfig())
	tenBatches(t, l)
	if err := l.TruncateTo(-1); err == nil {
		t.Fatal("negative truncation offset accepted")
	}
	if err := l.TruncateFullyAndStartAt(-1); err == nil {
		t.Fatal("negative start offset accepted")
	}
	if l.LogEndOffset() != 30 {
		t.Fatalf("a refused truncation changed the log end to %d", l.LogEndOffset())
	}
	m.Close()
	if err := l.TruncateTo(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("truncating a closed log: %v", err)
	}
	if err := l.TruncateFullyAndStartAt(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("truncating a closed log fully: %v", err)
	}
}

// TestTruncateDiskFailureIsSticky fails the fsync of the cut .log: the
// error sticks, as after a failed append, and a restart finds a prefix.
func TestTruncateDiskFailureIsSticky(t *testing.T) {
	mem := vfs.NewMem()
	m := openTestManager(t, mem, truncConfig())
	l := createTestLog(t, m, truncConfig())
	as := tenBatches(t, l)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var armed bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if armed && op == vfs.OpSync && filepath.Base(path) == "00000000000000000006.log" {
			return vfs.ErrInjected
		}
		return nil
	})
	m = openTestManager(t, fsys, truncConfig())
	l, _ = m.Log("orders", 0)
	armed = true
	if err := l.TruncateTo(9); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("truncate with a failing fsync: %v", err)
	}
	if _, err := l.Append(batchOf(1, 1, 1), 0, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append after a failed truncation: %v", err)
	}
	if err := l.TruncateTo(3); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("truncate after a failed truncation: %v", err)
	}
	mem.Crash()
	m2 := openTestManager(t, mem, truncConfig())
	l2, _ := m2.Log("orders", 0)
	if leo := l2.LogEndOffset(); !bytes.Equal(readAll(t, l2), prefixBelow(as, leo)) || leo < 9 {
		t.Fatalf("after the failure and a crash: log end %d", leo)
	}
	m2.Close()
}
