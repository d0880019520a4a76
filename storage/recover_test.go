package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

var partDir = filepath.Join(testDir, "orders-0")

func segFile(base int64, suffix string) string { return segmentPath(partDir, base, suffix) }

// TestCrashKeepsExactlyWhatWasSynced appends, flushes at a chosen point,
// appends more, loses power, and checks that exactly the synced batches
// come back and that offsets continue from them.
func TestCrashKeepsExactlyWhatWasSynced(t *testing.T) {
	tests := []struct {
		name         string
		segmentBytes int64
		batches      int
		flushAfter   int // batches appended before the Flush; 0: never
		checkpoint   bool
		wantBatches  int // batches that survive
	}{
		{name: "nothing flushed", segmentBytes: 1 << 20, batches: 10, wantBatches: 0},
		{name: "flush half", segmentBytes: 1 << 20, batches: 10, flushAfter: 5, wantBatches: 5},
		{name: "flush half with checkpoint", segmentBytes: 1 << 20, batches: 10, flushAfter: 5, checkpoint: true, wantBatches: 5},
		{name: "flush all", segmentBytes: 1 << 20, batches: 10, flushAfter: 10, checkpoint: true, wantBatches: 10},
		// Each roll fsyncs the segment it closes: 4 batches of ~190
		// bytes fill a 800-byte segment, so 8 survive without a Flush.
		{name: "rolled segments survive", segmentBytes: 800, batches: 10, wantBatches: 8},
		{name: "rolled then flushed", segmentBytes: 800, batches: 10, flushAfter: 9, checkpoint: true, wantBatches: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTestManager(t, fsys)
			l := createTestLog(t, m, smallConfig(tt.segmentBytes, 100))
			var as []appended
			for i := range tt.batches {
				as = append(as, mustAppend(t, l, batchOf(2, int64(i), 50), 0))
				if i+1 == tt.flushAfter {
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					if l.RecoveryPoint() != int64(2*(i+1)) {
						t.Fatalf("recovery point %d after flush", l.RecoveryPoint())
					}
					if tt.checkpoint {
						if err := m.Checkpoint(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			fsys.Crash()

			m2 := openTestManager(t, fsys)
			defer m2.Close()
			l2, ok := m2.Log("orders", 0)
			if !ok && tt.wantBatches == 0 {
				// Nothing was synced, not even the log's creation
				// (CreateLogs): the broker makes it again from the
				// metadata when it starts.
				return
			}
			if !ok {
				t.Fatal("log lost")
			}
			var want []byte
			for _, a := range as[:tt.wantBatches] {
				want = append(want, a.data...)
			}
			if got := readAll(t, l2); !bytes.Equal(got, want) {
				t.Fatalf("read back %d batches, want %d", len(parseAll(t, got)), tt.wantBatches)
			}
			leo := int64(2 * tt.wantBatches)
			if l2.LogEndOffset() != leo || l2.RecoveryPoint() != leo {
				t.Fatalf("LEO %d, recovery point %d, want %d", l2.LogEndOffset(), l2.RecoveryPoint(), leo)
			}
			if a := mustAppend(t, l2, batchOf(1, 99, 10), 0); a.base != leo {
				t.Fatalf("next append at %d, want %d", a.base, leo)
			}
			if m2.recoveredSegments.Load() == 0 {
				t.Fatal("a crash did not lead to recovery")
			}
		})
	}
}

// TestCrashAfterCleanCloseNoMarker: without the clean-shutdown marker a
// start recovers from the checkpointed recovery point and not before.
func TestRecoveryStartsAtRecoveryPoint(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, smallConfig(1000, 100))
	for i := range 30 {
		mustAppend(t, l, batchOf(2, int64(i), 50), 0)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	nsegs := len(l.segments())
	if err := fsys.Remove(filepath.Join(testDir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	// The recovery point is the log end, in the last segment: only that
	// segment is scanned.
	if got := m2.recoveredSegments.Load(); got != 1 {
		t.Fatalf("recovered %d of %d segments, want 1", got, nsegs)
	}
	if _, err := fsys.Stat(filepath.Join(testDir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("marker present after start")
	}
}

// corruptions damage the tail of the active segment's .log after a clean
// close; the next start must find them and cut the log before them.
func TestTornOrCorruptTailTruncated(t *testing.T) {
	tests := []struct {
		name   string
		damage func(data []byte, lastStart int) []byte
	}{
		{name: "torn mid-batch", damage: func(d []byte, last int) []byte { return d[:last+30] }},
		{name: "torn in header", damage: func(d []byte, last int) []byte { return d[:last+5] }},
		{name: "flipped payload byte", damage: func(d []byte, last int) []byte { d[len(d)-3] ^= 0x40; return d }},
		{name: "flipped crc", damage: func(d []byte, last int) []byte { d[last+17] ^= 1; return d }},
		{name: "garbage length", damage: func(d []byte, last int) []byte { d[last+8] = 0x7f; return d }},
		{name: "zeroed tail", damage: func(d []byte, last int) []byte {
			return append(d[:last], make([]byte, len(d)-last)...)
		}},
		{name: "offset going back", damage: func(d []byte, last int) []byte { d[last+7] = 0; return d }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTestManager(t, fsys)
			l := createTestLog(t, m, smallConfig(1<<20, 100))
			var as []appended
			for i := range 6 {
				as = append(as, mustAppend(t, l, batchOf(3, int64(i), 40), 0))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := m.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			lastStart := 0
			for _, a := range as[:5] {
				lastStart += len(a.data)
			}
			name := segFile(0, logSuffix)
			data, err := vfs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			data = tt.damage(data, lastStart)
			rewrite(t, fsys, name, data)
			fsys.Crash()

			m2 := openTestManager(t, fsys)
			defer m2.Close()
			l2, _ := m2.Log("orders", 0)
			var want []byte
			for _, a := range as[:5] {
				want = append(want, a.data...)
			}
			if got := readAll(t, l2); !bytes.Equal(got, want) {
				t.Fatalf("read back %d batches, want 5", len(parseAll(t, got)))
			}
			if l2.LogEndOffset() != 15 {
				t.Fatalf("LEO %d, want 15", l2.LogEndOffset())
			}
			st, err := fsys.Stat(name)
			if err != nil || st.Size() != int64(lastStart) {
				t.Fatalf(".log is %d bytes, want %d (%v)", st.Size(), lastStart, err)
			}
			if a := mustAppend(t, l2, batchOf(1, 9, 9), 0); a.base != 15 {
				t.Fatalf("append after recovery at %d", a.base)
			}
		})
	}
}

// rewrite replaces a file's contents durably, as damage already on disk.
func rewrite(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestTruncationDropsLaterSegments: a corrupt batch in a recovered segment
// makes everything after it untrustworthy, later segments included.
func TestTruncationDropsLaterSegments(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, smallConfig(1000, 100))
	for i := range 20 {
		mustAppend(t, l, batchOf(2, int64(i), 50), 0)
	}
	segs := l.segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	victim := segs[1]
	// Nothing is checkpointed, so recovery starts at offset 0.
	fsys.Crash()
	data, _ := vfs.ReadFile(fsys, segFile(victim.base, logSuffix))
	data[len(data)-1] ^= 0xff
	rewrite(t, fsys, segFile(victim.base, logSuffix), data)

	m2 := openTestManager(t, fsys)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	if n := len(l2.segments()); n != 2 {
		t.Fatalf("%d segments after recovery, want 2", n)
	}
	for _, s := range segs[2:] {
		if _, err := fsys.Stat(segFile(s.base, logSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment %d survived: %v", s.base, err)
		}
	}
	got := parseAll(t, readAll(t, l2))
	if last := got[len(got)-1].LastOffset(); l2.LogEndOffset() != last+1 || last+1 >= segs[2].base {
		t.Fatalf("LEO %d, last offset %d", l2.LogEndOffset(), last)
	}
}

// TestCleanShutdownScansNothing damages a batch's payload after a clean
// shutdown. A clean start does not check CRCs, so the damage is served as
// is (the consumer's CRC check is what catches it, as in Kafka); an unclean
// start with the same damage truncates. Both outcomes are asserted, so the
// test fails if a clean start scans.
func TestCleanShutdownScansNothing(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean", false: "unclean"}[clean], func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTestManager(t, fsys)
			l := createTestLog(t, m, smallConfig(1<<20, 100))
			for i := range 10 {
				mustAppend(t, l, batchOf(2, int64(i), 50), 0)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			data, _ := vfs.ReadFile(fsys, segFile(0, logSuffix))
			data[len(data)/2-1] ^= 0xff // the last value byte of batch 4
			rewrite(t, fsys, segFile(0, logSuffix), data)
			if !clean {
				fsys.Remove(filepath.Join(testDir, cleanShutdownFile))
			}
			m2 := openTestManager(t, fsys)
			defer m2.Close()
			l2, _ := m2.Log("orders", 0)
			if clean {
				if n := m2.recoveredBatches.Load(); n != 0 {
					t.Fatalf("clean start checked %d batches", n)
				}
				if l2.LogEndOffset() != 20 {
					t.Fatalf("LEO %d", l2.LogEndOffset())
				}
				r, err := l2.Read(0, 1<<20, 20, true)
				if err != nil || !bytes.Equal(r.Data, data) {
					t.Fatalf("clean start does not serve the file as is: %v", err)
				}
				return
			}
			if l2.LogEndOffset() >= 20 || m2.recoveredBatches.Load() == 0 {
				t.Fatalf("unclean start kept LEO %d after checking %d batches", l2.LogEndOffset(), m2.recoveredBatches.Load())
			}
		})
	}
}

func TestMissingIndexRebuilt(t *testing.T) {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		t.Run(suffix, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := smallConfig(2000, 100)
			m := openTestManager(t, fsys, cfg)
			l := createTestLog(t, m, cfg)
			for i := range 40 {
				mustAppend(t, l, batchOf(2, int64(i), 50), 0)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			segs := l.segments()
			// A middle segment (below the recovery point) and the active one.
			for _, s := range []*segment{segs[1], segs[len(segs)-1]} {
				orig, _ := vfs.ReadFile(fsys, segFile(s.base, suffix))
				if err := fsys.Remove(segFile(s.base, suffix)); err != nil {
					t.Fatal(err)
				}
				fsys.SyncDir(partDir)
				m2 := openTestManager(t, fsys, cfg)
				got, err := vfs.ReadFile(fsys, segFile(s.base, suffix))
				if err != nil {
					t.Fatalf("not rebuilt: %v", err)
				}
				if !bytes.Equal(got, orig) {
					t.Fatalf("rebuilt %s differs:\n%x\n%x", suffix, got, orig)
				}
				l2, _ := m2.Log("orders", 0)
				if l2.LogEndOffset() != 80 || len(readAll(t, l2)) == 0 {
					t.Fatalf("LEO %d", l2.LogEndOffset())
				}
				if err := m2.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestInconsistentIndexRebuilt(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"odd size", func(b []byte) []byte { return b[:len(b)-3] }},
		{"positions out of order", func(b []byte) []byte {
			var p [4]byte
			copy(p[:], b[4:8])
			copy(b[4:8], b[12:16])
			copy(b[12:16], p[:])
			return b
		}},
		{"position past the log", func(b []byte) []byte { b[len(b)-4] = 0x7f; return b }},
		{"preallocated zeros are fine", func(b []byte) []byte { return append(b, make([]byte, 800)...) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := smallConfig(3000, 100)
			m := openTestManager(t, fsys, cfg)
			l := createTestLog(t, m, cfg)
			var as []appended
			for i := range 40 {
				as = append(as, mustAppend(t, l, batchOf(2, int64(i), 50), 0))
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			s := l.segments()[0]
			name := segFile(s.base, indexSuffix)
			orig, _ := vfs.ReadFile(fsys, name)
			if len(orig) < 2*offsetEntrySize {
				t.Fatalf("index too small for the test: %d", len(orig))
			}
			rewrite(t, fsys, name, tt.damage(append([]byte(nil), orig...)))
			m2 := openTestManager(t, fsys, cfg)
			defer m2.Close()
			l2, _ := m2.Log("orders", 0)
			for _, a := range as {
				r, err := l2.Read(a.last, 1, 80, true)
				if err != nil || !bytes.Equal(r.Data, a.data) {
					t.Fatalf("offset %d: %v", a.last, err)
				}
			}
			got, _ := vfs.ReadFile(fsys, name)
			if tt.name != "preallocated zeros are fine" && !bytes.Equal(got, orig) {
				t.Fatalf("index not rebuilt:\n%x\n%x", got, orig)
			}
		})
	}
}

func TestStickyErrorOnFailedFsync(t *testing.T) {
	mem := vfs.NewMem()
	var failing bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if failing && op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			return vfs.ErrInjected
		}
		return nil
	})
	m := openTestManager(t, fsys)
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l := createTestLog(t, m, cfg)
	mustAppend(t, l, batchOf(1, 1, 10), 0)
	if l.RecoveryPoint() != 1 {
		t.Fatalf("flush.messages=1 did not flush: recovery point %d", l.RecoveryPoint())
	}
	failing = true
	res, err := l.Append(batchOf(1, 2, 10), 0, 0)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	if res.FirstOffset != 1 {
		t.Fatalf("result %+v", res)
	}
	failing = false
	for _, op := range []func() error{
		func() error { _, err := l.Append(batchOf(1, 3, 10), 0, 0); return err },
		l.Flush,
	} {
		if err := op(); !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("error not sticky: %v", err)
		}
	}
	if l.RecoveryPoint() != 1 {
		t.Fatalf("recovery point moved to %d", l.RecoveryPoint())
	}
	if err := m.Close(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("close: %v", err)
	}
	if _, err := mem.Stat(filepath.Join(testDir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("clean shutdown marker written despite a failed log")
	}
	mem.Crash()
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	if l2.LogEndOffset() != 1 {
		t.Fatalf("LEO %d after recovery, want 1", l2.LogEndOffset())
	}
}

func TestShortWriteIsStickyAndRecovered(t *testing.T) {
	mem := vfs.NewMem()
	var failing bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if failing && op == vfs.OpWrite && strings.HasSuffix(path, logSuffix) {
			return &vfs.ShortWriteError{Err: vfs.ErrInjected}
		}
		return nil
	})
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, DefaultLogConfig())
	first := mustAppend(t, l, batchOf(2, 1, 100), 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	failing = true
	if _, err := l.Append(batchOf(2, 2, 100), 0, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("short write: %v", err)
	}
	failing = false
	if _, err := l.Append(batchOf(1, 3, 10), 0, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("not sticky: %v", err)
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("LEO moved to %d", l.LogEndOffset())
	}
	// Readers never see the half batch.
	r, err := l.Read(0, 1<<20, 10, true)
	if err != nil || !bytes.Equal(r.Data, first.data) {
		t.Fatalf("read: %v", err)
	}
	m.Close()
	// The half batch reached the file (a process crash keeps it); recovery
	// cuts it off.
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	if got := readAll(t, l2); !bytes.Equal(got, first.data) || l2.LogEndOffset() != 2 {
		t.Fatalf("LEO %d after recovery", l2.LogEndOffset())
	}
}

func TestFailedRollIsSticky(t *testing.T) {
	mem := vfs.NewMem()
	var failing bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if failing && op == vfs.OpOpenFile && strings.HasSuffix(path, "00000000000000000002.log") {
			return vfs.ErrInjected
		}
		return nil
	})
	m := openTestManager(t, fsys)
	defer m.Close()
	l := createTestLog(t, m, smallConfig(300, 100))
	mustAppend(t, l, batchOf(2, 1, 100), 0)
	failing = true
	if _, err := l.Append(batchOf(1, 1, 100), 0, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("roll failure: %v", err)
	}
	failing = false
	if _, err := l.Append(batchOf(1, 1, 10), 0, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("not sticky: %v", err)
	}
}
