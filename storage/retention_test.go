package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// oneBatchPerSegment is a config where every 3-record batch of 40-byte
// values (about 230 bytes) fills a segment.
func oneBatchPerSegment() LogConfig {
	cfg := smallConfig(300, 100)
	cfg.FileDeleteDelayMs = 1000
	return cfg
}

func segmentBases(l *Log) []int64 {
	var out []int64
	for _, s := range l.segments() {
		out = append(out, s.base)
	}
	return out
}

func TestDeleteOldSegments(t *testing.T) {
	const minute = 60_000
	tests := []struct {
		name   string
		cfg    func(*LogConfig)
		hw     int64 // -1: not set
		lso    int64 // IncrementLogStartOffset to this first, if > 0
		nowMs  int64
		wantN  int
		wantSB []int64 // segment bases left
		wantLS int64   // log start offset after
	}{
		// Five batches of 202 bytes with timestamps 0, 1, 2, 3, 4 minutes,
		// offsets 0-14, one segment each.
		{name: "time retention keeps younger segments", cfg: func(c *LogConfig) { c.RetentionMs = 2 * minute },
			hw: -1, nowMs: 4*minute + 1, wantN: 3, wantSB: []int64{9, 12}, wantLS: 9},
		{name: "time retention at the boundary keeps the segment", cfg: func(c *LogConfig) { c.RetentionMs = 2 * minute },
			hw: -1, nowMs: 4 * minute, wantN: 2, wantSB: []int64{6, 9, 12}, wantLS: 6},
		{name: "expired active segment is rolled and deleted", cfg: func(c *LogConfig) { c.RetentionMs = minute },
			hw: -1, nowMs: 10 * minute, wantN: 5, wantSB: []int64{15}, wantLS: 15},
		{name: "no time limit", cfg: func(c *LogConfig) { c.RetentionMs = -1 },
			hw: -1, nowMs: 100 * minute, wantN: 0, wantSB: []int64{0, 3, 6, 9, 12}, wantLS: 0},
		{name: "size retention", cfg: func(c *LogConfig) { c.RetentionMs = -1; c.RetentionBytes = 2 * 202 },
			hw: -1, nowMs: 0, wantN: 3, wantSB: []int64{9, 12}, wantLS: 9},
		{name: "size retention below one segment's worth deletes nothing", cfg: func(c *LogConfig) { c.RetentionMs = -1; c.RetentionBytes = 5*202 - 100 },
			hw: -1, nowMs: 0, wantN: 0, wantSB: []int64{0, 3, 6, 9, 12}, wantLS: 0},
		{name: "high watermark bounds deletion", cfg: func(c *LogConfig) { c.RetentionMs = minute },
			hw: 7, nowMs: 10 * minute, wantN: 2, wantSB: []int64{6, 9, 12}, wantLS: 6},
		{name: "log start offset breach without delete policy", cfg: func(c *LogConfig) { c.Delete = false; c.Compact = true; c.RetentionMs = 0 },
			hw: -1, lso: 10, nowMs: 100 * minute, wantN: 3, wantSB: []int64{9, 12}, wantLS: 10},
		{name: "log start offset on a segment boundary", cfg: func(c *LogConfig) { c.RetentionMs = -1 },
			hw: -1, lso: 9, nowMs: 0, wantN: 3, wantSB: []int64{9, 12}, wantLS: 9},
		{name: "neither policy deletes only below the start offset", cfg: func(c *LogConfig) { c.Delete = false; c.RetentionMs = 0; c.RetentionBytes = 0 },
			hw: -1, nowMs: 100 * minute, wantN: 0, wantSB: []int64{0, 3, 6, 9, 12}, wantLS: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTestManager(t, fsys)
			cfg := oneBatchPerSegment()
			tt.cfg(&cfg)
			l := createTestLog(t, m, cfg)
			var want []appended
			for i := range 5 {
				want = append(want, mustAppend(t, l, testBatch{timestamps: []int64{int64(i) * minute, int64(i) * minute, int64(i) * minute}, valueSize: 40}.build(), 0))
			}
			if got := segmentBases(l); !slices.Equal(got, []int64{0, 3, 6, 9, 12}) {
				t.Fatalf("setup: segments %v", got)
			}
			if tt.hw >= 0 {
				l.SetHighWatermark(tt.hw)
			}
			if tt.lso > 0 {
				if err := l.IncrementLogStartOffset(tt.lso); err != nil {
					t.Fatal(err)
				}
			}
			n, err := l.DeleteOldSegments(time.UnixMilli(tt.nowMs))
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantN {
				t.Errorf("deleted %d segments, want %d", n, tt.wantN)
			}
			if got := segmentBases(l); !slices.Equal(got, tt.wantSB) {
				t.Errorf("segments %v, want %v", got, tt.wantSB)
			}
			if l.LogStartOffset() != tt.wantLS {
				t.Errorf("log start offset %d, want %d", l.LogStartOffset(), tt.wantLS)
			}
			if l.LogEndOffset() != 15 {
				t.Errorf("log end offset %d", l.LogEndOffset())
			}
			// Below the start offset is out of range; from it on, the
			// batches read back as appended.
			if tt.wantLS > 0 {
				if _, err := l.Read(tt.wantLS-1, 1<<20, 15, true); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Errorf("read below start: %v", err)
				}
			}
			var rest []byte
			for _, a := range want {
				if a.last >= tt.wantLS {
					rest = append(rest, a.data...)
				}
			}
			if got := readAll(t, l); !bytes.Equal(got, rest) {
				t.Errorf("read %d bytes from the start, want %d", len(got), len(rest))
			}
			// Deleted files wait as .deleted for file.delete.delay.ms.
			deleted := deletedFiles(t, fsys)
			if len(deleted) != 3*tt.wantN {
				t.Errorf(".deleted files %v, want 3 per deleted segment", deleted)
			}
			if n, err := m.RunFileDeletions(time.UnixMilli(tt.nowMs + 999)); n != 0 || err != nil {
				t.Errorf("removed %d before the delay: %v", n, err)
			}
			if n, err := m.RunFileDeletions(time.UnixMilli(tt.nowMs + 1000)); n != tt.wantN || err != nil {
				t.Errorf("removed %d after the delay, want %d: %v", n, tt.wantN, err)
			}
			if d := deletedFiles(t, fsys); len(d) != 0 {
				t.Errorf("left %v", d)
			}
			// The state survives a restart: the checkpoint keeps a start
			// offset inside a segment, the first segment gives the rest.
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			m2 := openTestManager(t, fsys, cfg)
			defer m2.Close()
			l2, _ := m2.Log("orders", 0)
			if l2.LogStartOffset() != tt.wantLS || !slices.Equal(segmentBases(l2), tt.wantSB) {
				t.Errorf("after restart: start %d, segments %v", l2.LogStartOffset(), segmentBases(l2))
			}
		})
	}
}

func deletedFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	ents, err := fsys.ReadDir(partDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == deletedFileSuffix {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeleteOldSegmentsAgain: a second pass deletes nothing more, and the
// empty active segment left by deleting everything is never deleted.
func TestDeleteOldSegmentsAgain(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	cfg := oneBatchPerSegment()
	cfg.RetentionMs = 0
	l := createTestLog(t, m, cfg)
	for range 3 {
		mustAppend(t, l, batchOf(3, 1, 40), 0)
	}
	for i, want := range []int{3, 0, 0} {
		n, err := l.DeleteOldSegments(time.UnixMilli(1000))
		if err != nil || n != want {
			t.Fatalf("pass %d: deleted %d, want %d (%v)", i, n, want, err)
		}
	}
	if got := segmentBases(l); !slices.Equal(got, []int64{9}) || l.LogStartOffset() != 9 {
		t.Fatalf("segments %v, start %d", got, l.LogStartOffset())
	}
	// Appends continue at the log end.
	if a := mustAppend(t, l, batchOf(1, 2, 10), 0); a.base != 9 {
		t.Fatalf("appended at %d", a.base)
	}
}

// TestDeletedSegmentServesReadsInFlight: a read that took the segment
// before its deletion keeps reading its bytes; the files are removed only
// once the read is done and the delay has passed.
func TestDeletedSegmentServesReadsInFlight(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	cfg := oneBatchPerSegment()
	cfg.RetentionMs = -1
	cfg.FileDeleteDelayMs = 0
	l := createTestLog(t, m, cfg)
	first := mustAppend(t, l, batchOf(3, 1, 40), 0)
	mustAppend(t, l, batchOf(3, 2, 40), 0)
	old := l.segments()[0]
	if !old.acquire() {
		t.Fatal("live segment not acquired")
	}
	if err := l.IncrementLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(0)); n != 1 || err != nil {
		t.Fatalf("deleted %d: %v", n, err)
	}
	done := make(chan int)
	go func() {
		n, _ := m.RunFileDeletions(time.UnixMilli(0))
		done <- n
	}()
	// The deletion waits for the read; the renamed file still reads.
	time.Sleep(20 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("deletion did not wait for the read in flight")
	default:
	}
	data, found, err := old.read(0, 1<<20, 3, true, l.cfg.Load(), l.logger)
	if err != nil || !found || !bytes.Equal(data, first.data) {
		t.Fatalf("read of the deleted segment: found %v, err %v", found, err)
	}
	old.release()
	if n := <-done; n != 1 {
		t.Fatalf("removed %d", n)
	}
	if old.acquire() {
		t.Fatal("removed segment still acquirable")
	}
	if _, err := fsys.Stat(segFile(0, logSuffix+deletedFileSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted file still there: %v", err)
	}
	// Reads now go to the remaining segment.
	if _, err := l.Read(0, 1<<20, 6, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if r, err := l.Read(3, 1<<20, 6, true); err != nil || len(parseAll(t, r.Data)) != 1 {
		t.Fatalf("read at start: %v", err)
	}
}

// TestManagerDeleteOldSegmentsSkipsCompacted: the manager's pass leaves
// compacted logs to the cleaner, as Kafka's LogManager.cleanupLogs.
func TestManagerDeleteOldSegmentsSkipsCompacted(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	cfg := oneBatchPerSegment()
	cfg.RetentionMs = 0
	compacted := cfg
	compacted.Compact = true
	a, _ := m.GetOrCreateLog("plain", 0, [16]byte{}, cfg)
	b, _ := m.GetOrCreateLog("compacted", 0, [16]byte{}, compacted)
	for range 3 {
		mustAppend(t, a, batchOf(3, 1, 40), 0)
		mustAppend(t, b, batchOf(3, 1, 40), 0)
	}
	n, err := m.DeleteOldSegments(time.UnixMilli(1000))
	if err != nil || n != 3 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if a.LogStartOffset() != 9 || b.LogStartOffset() != 0 || len(b.segments()) != 3 {
		t.Fatalf("plain start %d, compacted start %d with %d segments", a.LogStartOffset(), b.LogStartOffset(), len(b.segments()))
	}
	if next, ok := m.NextFileDeletion(); !ok || next.UnixMilli() != 1000+cfg.FileDeleteDelayMs {
		t.Fatalf("next deletion %v %v", next, ok)
	}
	// The cleaner's pass applies retention to the compacted log
	// (compact,delete).
	compacted.Delete, compacted.RetentionBytes = true, 0
	b.SetConfig(compacted)
	c := NewCleaner(m, DefaultCleanerConfig())
	if _, err := c.CleanOnce(); err != nil {
		t.Fatal(err)
	}
	if b.LogStartOffset() != 9 {
		t.Fatalf("compacted start %d after the cleaner's pass", b.LogStartOffset())
	}
}

// TestDeleteLogDropsPendingDeletions: deleting a log closes its segments
// waiting for deletion; a later RunFileDeletions has nothing to do.
func TestDeleteLogDropsPendingDeletions(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	cfg := oneBatchPerSegment()
	cfg.RetentionMs = 0
	l := createTestLog(t, m, cfg)
	mustAppend(t, l, batchOf(3, 1, 40), 0)
	mustAppend(t, l, batchOf(3, 1, 40), 0)
	if n, err := l.DeleteOldSegments(time.UnixMilli(10)); n != 2 || err != nil {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if err := m.DeleteLog("orders", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.NextFileDeletion(); ok {
		t.Fatal("deletions still pending for a deleted log")
	}
	if n, err := m.RunFileDeletions(time.UnixMilli(math.MaxInt64 / 2)); n != 0 || err != nil {
		t.Fatalf("removed %d: %v", n, err)
	}
}

func TestSegmentJitter(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.SegmentMs = 1000
	cfg.SegmentJitterMs = 5000
	for range 1000 {
		if j := cfg.randomSegmentJitter(); j < 0 || j >= 1000 {
			t.Fatalf("jitter %d outside [0, min(jitter, segment.ms))", j)
		}
	}
	cfg.SegmentJitterMs = 0
	if j := cfg.randomSegmentJitter(); j != 0 {
		t.Fatalf("jitter %d without segment.jitter.ms", j)
	}
	// A compacted log rolls by max.compaction.lag.ms too.
	cfg.Compact, cfg.MaxCompactionLagMs = true, 300
	if cfg.maxSegmentMs() != 300 {
		t.Fatalf("maxSegmentMs %d", cfg.maxSegmentMs())
	}

	tests := []struct {
		jitter   int64
		ts       []int64
		segments int
	}{
		{jitter: 0, ts: []int64{0, 600, 1000, 1001}, segments: 2},
		{jitter: 400, ts: []int64{0, 600, 601, 1300}, segments: 3}, // rolls once 600 ms passed
	}
	for _, tt := range tests {
		m := openTestManager(t, vfs.NewMem())
		c := DefaultLogConfig()
		c.SegmentMs = 1000
		l := createTestLog(t, m, c)
		l.active().rollJitterMs = tt.jitter
		for _, ts := range tt.ts {
			mustAppend(t, l, batchOf(1, ts, 10), 0)
			l.active().rollJitterMs = tt.jitter
		}
		if got := len(l.segments()); got != tt.segments {
			t.Errorf("jitter %d: %d segments %v, want %d", tt.jitter, got, segmentBases(l), tt.segments)
		}
		m.Close()
	}
}
