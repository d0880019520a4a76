package storage

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// record is one appended record's offset and timestamp, for brute force.
type record struct{ offset, ts int64 }

func TestFindOffsetByTimestamp(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "reopened"}[reopen], func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := smallConfig(1500, 150)
			m := openTestManager(t, fsys, cfg)
			l := createTestLog(t, m, cfg)
			rng := rand.New(rand.NewPCG(5, 6))
			var recs []record
			for i := range 120 {
				n := 1 + rng.IntN(4)
				tss := make([]int64, n)
				for j := range tss {
					// Mostly rising, with stragglers from the past.
					tss[j] = int64(i*10) + int64(rng.IntN(40)) - 15
				}
				tb := testBatch{timestamps: tss, valueSize: 30, gzip: i%7 == 3}
				a := mustAppend(t, l, tb.build(), 0)
				for j, ts := range tss {
					recs = append(recs, record{a.base + int64(j), ts})
				}
			}
			if reopen {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				m = openTestManager(t, fsys, cfg)
				l, _ = m.Log("orders", 0)
			}
			defer m.Close()
			if len(l.segments()) < 5 {
				t.Fatalf("%d segments", len(l.segments()))
			}
			for target := int64(-20); target <= 1250; target += 7 {
				wantOff, wantTs, wantOK := int64(-1), int64(-1), false
				for _, r := range recs {
					if r.ts >= target {
						wantOff, wantTs, wantOK = r.offset, r.ts, true
						break
					}
				}
				off, ts, ok, err := l.FindOffsetByTimestamp(target)
				if err != nil {
					t.Fatal(err)
				}
				if off != wantOff || ts != wantTs || ok != wantOK {
					t.Fatalf("ts %d: got (%d, %d, %v), want (%d, %d, %v)", target, off, ts, ok, wantOff, wantTs, wantOK)
				}
			}
			// MaxTimestamp: the largest, at the last offset of its batch;
			// OffsetOfMaxTimestamp: the first record carrying it.
			var maxRec record
			maxRec.ts = -1
			for _, r := range recs {
				if r.ts > maxRec.ts {
					maxRec = r
				}
			}
			ts, _ := l.MaxTimestamp()
			if ts != maxRec.ts {
				t.Fatalf("max timestamp %d, want %d", ts, maxRec.ts)
			}
			off, mts, ok, err := l.OffsetOfMaxTimestamp()
			if err != nil || !ok || off != maxRec.offset || mts != maxRec.ts {
				t.Fatalf("offset of max timestamp (%d, %d, %v, %v), want (%d, %d)", off, mts, ok, err, maxRec.offset, maxRec.ts)
			}
		})
	}
}

func TestFindOffsetByTimestampEdges(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	if _, _, ok, err := l.FindOffsetByTimestamp(0); ok || err != nil {
		t.Fatalf("empty log: %v %v", ok, err)
	}
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("empty log max timestamp %d at %d", ts, off)
	}
	mustAppend(t, l, testBatch{timestamps: []int64{100, 200, 300}, valueSize: 5}.build(), 0)         // 0..2
	mustAppend(t, l, testBatch{timestamps: []int64{5, 6}, valueSize: 5, appendTime: 500}.build(), 0) // 3..4
	tests := []struct {
		ts      int64
		wantOff int64
		wantTs  int64
		wantOK  bool
	}{
		{0, 0, 100, true},
		{150, 1, 200, true},
		{300, 2, 300, true},
		{301, 3, 500, true}, // log append time: every record has the batch time
		{501, -1, -1, false},
	}
	for _, tt := range tests {
		off, ts, ok, err := l.FindOffsetByTimestamp(tt.ts)
		if err != nil || off != tt.wantOff || ts != tt.wantTs || ok != tt.wantOK {
			t.Fatalf("ts %d: (%d, %d, %v, %v), want (%d, %d, %v)", tt.ts, off, ts, ok, err, tt.wantOff, tt.wantTs, tt.wantOK)
		}
	}
	// Records below the log start offset are not answers.
	if err := l.IncrementLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if off, _, _, _ := l.FindOffsetByTimestamp(0); off != 2 {
		t.Fatalf("below start offset: got %d", off)
	}
}

// TestOffsetOfMaxTimestamp: ListOffsets MAX_TIMESTAMP's record is the
// first record holding the log's largest timestamp, not the last record of
// its batch (Kafka 3.8+), and the answer is the same after a clean reopen
// (segment maxima from the .timeindex) and after a start that rebuilds the
// indexes from the .log.
func TestOffsetOfMaxTimestamp(t *testing.T) {
	const base = 1_700_000_000_000
	fsys := vfs.NewMem()
	cfg := smallConfig(1000, 100)
	m := openTestManager(t, fsys, cfg)
	l := createTestLog(t, m, cfg)
	if off, ts, ok, err := l.OffsetOfMaxTimestamp(); ok || err != nil {
		t.Fatalf("empty log: (%d, %d, %v, %v)", off, ts, ok, err)
	}
	check := func(l *Log, when string, wantOff, wantTs int64) {
		t.Helper()
		off, ts, ok, err := l.OffsetOfMaxTimestamp()
		if err != nil || !ok || off != wantOff || ts != wantTs {
			t.Fatalf("%s: (%d, %d, %v, %v), want (%d, %d)", when, off, ts, ok, err, wantOff, wantTs)
		}
	}
	// Offsets 0..5: the maximum is the fourth record.
	mustAppend(t, l, testBatch{timestamps: []int64{base + 1000, base + 3000, base + 2000, base + 9000, base + 4000, base + 5000}, valueSize: 10}.build(), 0)
	check(l, "one batch", 3, base+9000)
	// Offsets 6..8, compressed, reach the same maximum twice: the first
	// batch holding it keeps the answer.
	mustAppend(t, l, testBatch{timestamps: []int64{base + 9000, base + 9000, base + 1}, valueSize: 10, gzip: true}.build(), 0)
	check(l, "tie", 3, base+9000)
	// Offsets 9..11 in a compressed batch raise it at its middle record.
	mustAppend(t, l, testBatch{timestamps: []int64{base + 9500, base + 9900, base + 9700}, valueSize: 10, gzip: true}.build(), 0)
	check(l, "compressed", 10, base+9900)
	// Enough batches to roll a few segments, all older.
	for i := range 30 {
		mustAppend(t, l, batchOf(3, base+int64(i), 50), 0)
	}
	if len(l.segments()) < 3 {
		t.Fatalf("%d segments", len(l.segments()))
	}
	check(l, "older segments after", 10, base+9900)
	// Offsets 102..104 under LogAppendTime: every record carries the
	// batch's time, so the first record is the answer.
	la := mustAppend(t, l, testBatch{timestamps: []int64{5, 6, 7}, valueSize: 10, appendTime: base + 20_000}.build(), 0)
	check(l, "log append time", la.base, base+20_000)

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, fsys, cfg)
	l, _ = m.Log("orders", 0)
	check(l, "reopened", la.base, base+20_000)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Without the indexes and the clean-shutdown marker the start
	// rebuilds the maxima from the batches themselves.
	for _, s := range l.segments() {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if err := fsys.Remove(segFile(s.base, suffix)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Remove(filepath.Join(testDir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, fsys, cfg)
	defer m.Close()
	l, _ = m.Log("orders", 0)
	check(l, "indexes rebuilt", la.base, base+20_000)
}

func TestFindOffsetByTimestampNeedsDecompressor(t *testing.T) {
	m, err := OpenManager(ManagerConfig{FS: vfs.NewMem(), Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, testBatch{timestamps: []int64{10, 20}, valueSize: 5, gzip: true}.build(), 0)
	if _, _, _, err := l.FindOffsetByTimestamp(15); !errors.Is(err, ErrNoDecompressor) {
		t.Fatalf("got %v", err)
	}
	// A search that never looks inside the compressed batch needs none.
	if _, _, ok, err := l.FindOffsetByTimestamp(21); ok || err != nil {
		t.Fatalf("got %v %v", ok, err)
	}
}

func TestFirstRecordRejectsGarbage(t *testing.T) {
	b := testBatch{timestamps: []int64{1, 2, 3}, valueSize: 5}.build()
	// Claim more records than the batch holds: an error, not a panic.
	b[60] = 9
	if _, _, _, err := firstRecordAtOrAfter(b, 100, 0, nil); err == nil {
		t.Fatal("no error for a record count past the data")
	}
}
