package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// crashAfter is an inject function that lets n operations that change the
// disk succeed and fails every operation from the n+1th on, as a machine
// that lost power there would do nothing more.
type crashAfter struct {
	mu      sync.Mutex
	armed   bool
	left    int
	crashed bool
}

func (c *crashAfter) inject(op vfs.Op, path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return nil
	}
	if c.crashed {
		return vfs.ErrInjected
	}
	switch op {
	case vfs.OpCreate, vfs.OpOpenFile, vfs.OpRemove, vfs.OpRemoveAll, vfs.OpRename,
		vfs.OpSyncDir, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate, vfs.OpMkdirAll, vfs.OpChtimes:
		if c.left == 0 {
			c.crashed = true
			return vfs.ErrInjected
		}
		c.left--
	}
	return nil
}

// crashScenario builds a durable log on a fresh MemFS, then runs action
// with a crash after n disk-changing operations, loses power, restarts
// and returns the restarted log with what was appended. done reports that
// action finished before the crash point.
func crashScenario(t *testing.T, n int, setup func(*Log), action func(*Manager, *Log) error) (l2 *Log, done bool, m2 *Manager) {
	t.Helper()
	mem := vfs.NewMem()
	clock := &testClock{}
	clock.set(1000)
	cfg := compactConfig()
	m := openCleanerManager(t, mem, clock, cfg)
	setup(createTestLog(t, m, cfg))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fault := &crashAfter{left: n}
	m = openCleanerManager(t, vfs.NewFaulty(mem, fault.inject), clock, cfg)
	l, _ := m.Log("orders", 0)
	fault.mu.Lock()
	fault.armed = true
	fault.mu.Unlock()
	err := action(m, l)
	fault.mu.Lock()
	done = !fault.crashed
	fault.mu.Unlock()
	if done && err != nil {
		t.Fatalf("action failed without a crash: %v", err)
	}
	mem.Crash()
	m2 = openCleanerManager(t, mem, clock, cfg)
	l2, ok := m2.Log("orders", 0)
	if !ok {
		t.Fatal("log lost")
	}
	return l2, done, m2
}

// TestCleanerCrashAtEveryStep crashes a cleaning after each operation
// that changes the disk (every write, fsync, create, rename, remove):
// the restarted log must read, hold only records that were appended, at
// their offsets, in order, and still hold every key's latest value. Then
// the cleaning runs to completion.
func TestCleanerCrashAtEveryStep(t *testing.T) {
	type appendedRec struct{ key, value string }
	written := map[int64]appendedRec{}
	latest := map[string]int64{}
	setup := func(l *Log) {
		off := int64(0)
		for b := range 6 {
			var recs []kv
			for i := range 4 {
				key := fmt.Sprintf("k%d", (b*3+i)%5)
				val := fmt.Sprintf("v%d", off)
				if b == 4 && i == 0 {
					recs = append(recs, tomb(key))
					val = "<nil>"
				} else {
					recs = append(recs, k(key, val))
				}
				written[off] = appendedRec{key, val}
				latest[key] = off
				off++
			}
			mustAppend(t, l, kbatch{recs: recs, ts: 10}.build(t), 0)
			if b%2 == 1 {
				forceRoll(t, l)
			}
		}
	}
	clean := func(m *Manager, l *Log) error {
		cfg := DefaultCleanerConfig()
		cfg.IOBufferSize = 4096
		_, err := NewCleaner(m, cfg).CleanLog(l)
		return err
	}
	completedByRecovery := 0
	for n := 0; ; n++ {
		l, done, m := crashScenario(t, n, setup, clean)
		_, rs := dumpLog(t, l)
		if !done && len(rs) < 24 {
			completedByRecovery++
		}
		seen := map[string]bool{}
		for _, r := range rs {
			w, ok := written[r.offset]
			if !ok || w.key != r.key || w.value != r.value {
				t.Fatalf("crash after %d ops: read %s, appended %+v", n, r, w)
			}
			if latest[r.key] == r.offset {
				seen[r.key] = true
			}
		}
		for key, off := range latest {
			if !seen[key] {
				t.Fatalf("crash after %d ops: latest value of %s (offset %d) lost; have %v", n, key, off, rs)
			}
		}
		if l.LogEndOffset() != 24 {
			t.Fatalf("crash after %d ops: log end %d", n, l.LogEndOffset())
		}
		assertNoTempFiles(t, m)
		m.Close()
		if done {
			if len(rs) >= 24 {
				t.Fatalf("a completed cleaning removed nothing: %d records", len(rs))
			}
			if completedByRecovery == 0 {
				t.Fatal("no crash point left a swap for the restart to complete")
			}
			t.Logf("cleaning completes after %d disk operations; %d crash points completed by recovery", n, completedByRecovery)
			return
		}
		if n > 500 {
			t.Fatal("cleaning never completes")
		}
	}
}

// TestRetentionCrashAtEveryStep does the same for segment deletion.
func TestRetentionCrashAtEveryStep(t *testing.T) {
	setup := func(l *Log) {
		for range 4 {
			mustAppend(t, l, batchOf(3, 1, 40), 0)
			forceRoll(t, l)
		}
		mustAppend(t, l, batchOf(3, 1, 40), 0)
	}
	deleteOld := func(m *Manager, l *Log) error {
		cfg := l.cfg.Load()
		c := *cfg
		c.Delete, c.Compact, c.RetentionBytes = true, false, 2*202
		l.SetConfig(c)
		if _, err := l.DeleteOldSegments(time.UnixMilli(1000)); err != nil {
			return err
		}
		if err := m.Checkpoint(); err != nil {
			return err
		}
		_, err := m.RunFileDeletions(time.UnixMilli(1000))
		return err
	}
	for n := 0; ; n++ {
		l, done, m := crashScenario(t, n, setup, deleteOld)
		bases := segmentBases(l)
		// The oldest segments may be gone, never one in the middle.
		want := []int64{0, 3, 6, 9, 12}
		if i := slices.Index(want, bases[0]); i < 0 || !slices.Equal(want[i:], bases) {
			t.Fatalf("crash after %d ops: segments %v", n, bases)
		}
		if l.LogStartOffset() < bases[0] || l.LogEndOffset() != 15 {
			t.Fatalf("crash after %d ops: offsets %d..%d, segments %v", n, l.LogStartOffset(), l.LogEndOffset(), bases)
		}
		if got := len(parseAll(t, readAll(t, l))); int64(got*3) != 15-l.LogStartOffset() {
			t.Fatalf("crash after %d ops: %d batches from %d", n, got, l.LogStartOffset())
		}
		assertNoTempFiles(t, m)
		m.Close()
		if done {
			if !slices.Equal(bases, []int64{9, 12}) {
				t.Fatalf("completed deletion left %v", bases)
			}
			return
		}
	}
}

// assertNoTempFiles checks that a start left no .cleaned, .swap or
// .deleted file.
func assertNoTempFiles(t *testing.T, m *Manager) {
	t.Helper()
	ents, err := m.fsys.ReadDir(partDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		for _, s := range []string{cleanedFileSuffix, swapFileSuffix, deletedFileSuffix} {
			if strings.HasSuffix(e.Name(), s) {
				t.Fatalf("start left %s", e.Name())
			}
		}
	}
}

// TestSwapRecovery builds the files an interrupted swap leaves and checks
// that a start resolves them as Kafka's LogLoader does.
func TestSwapRecovery(t *testing.T) {
	tests := []struct {
		name      string
		files     func(t *testing.T, fsys vfs.FS, seg map[int64][]byte)
		wantBases []int64
		wantFirst int64 // first offset read
	}{
		{
			name: ".cleaned files are removed, the old segments stay",
			files: func(t *testing.T, fsys vfs.FS, seg map[int64][]byte) {
				write(t, fsys, segFile(0, logSuffix+cleanedFileSuffix), seg[3])
			},
			wantBases: []int64{0, 3, 6, 9}, wantFirst: 0,
		},
		{
			name: "a .swap replaces the segments in its offset range",
			files: func(t *testing.T, fsys vfs.FS, seg map[int64][]byte) {
				write(t, fsys, segFile(0, logSuffix+swapFileSuffix), seg[3])
			},
			wantBases: []int64{0, 6, 9}, wantFirst: 3,
		},
		{
			name: "a .swap whose old segments are already .deleted",
			files: func(t *testing.T, fsys vfs.FS, seg map[int64][]byte) {
				write(t, fsys, segFile(0, logSuffix+swapFileSuffix), seg[3])
				for _, base := range []int64{0, 3} {
					for _, ext := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
						if err := fsys.Rename(segFile(base, ext), segFile(base, ext)+deletedFileSuffix); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			wantBases: []int64{0, 6, 9}, wantFirst: 3,
		},
		{
			name: "a .swap at or above a .cleaned base is unfinished and goes",
			files: func(t *testing.T, fsys vfs.FS, seg map[int64][]byte) {
				write(t, fsys, segFile(3, logSuffix+cleanedFileSuffix), seg[3])
				write(t, fsys, segFile(3, logSuffix+swapFileSuffix), seg[3])
			},
			wantBases: []int64{0, 3, 6, 9}, wantFirst: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTestManager(t, fsys)
			l := createTestLog(t, m, DefaultLogConfig())
			seg := map[int64][]byte{}
			for range 3 {
				a := mustAppend(t, l, batchOf(3, 1, 40), 0)
				seg[a.base] = a.data
				forceRoll(t, l)
			}
			m.Close()
			tt.files(t, fsys, seg)
			m2 := openTestManager(t, fsys)
			defer m2.Close()
			l2, _ := m2.Log("orders", 0)
			if got := segmentBases(l2); !slices.Equal(got, tt.wantBases) {
				t.Fatalf("segments %v, want %v", got, tt.wantBases)
			}
			hs := parseAll(t, readAll(t, l2))
			if hs[0].BaseOffset != tt.wantFirst || hs[len(hs)-1].LastOffset() != 8 || l2.LogEndOffset() != 9 {
				t.Fatalf("batches from %d to %d, log end %d", hs[0].BaseOffset, hs[len(hs)-1].LastOffset(), l2.LogEndOffset())
			}
			assertNoTempFiles(t, m2)
		})
	}
}

func write(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	if err := vfs.WriteFileAtomic(fsys, name, data); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
}
