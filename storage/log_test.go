package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

func TestAppendReadRoundTrip(t *testing.T) {
	tests := []struct {
		name         string
		segmentBytes int64
		batches      int
		records      int
		valueSize    int
		wantSegments int
	}{
		{name: "one segment", segmentBytes: 1 << 20, batches: 20, records: 3, valueSize: 50, wantSegments: 1},
		{name: "roll every few batches", segmentBytes: 1000, batches: 30, records: 2, valueSize: 100, wantSegments: 10},
		{name: "one batch per segment", segmentBytes: 300, batches: 12, records: 1, valueSize: 200, wantSegments: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openTestManager(t, vfs.NewMem())
			l := createTestLog(t, m, smallConfig(tt.segmentBytes, 100))
			var want []appended
			for i := range tt.batches {
				a := mustAppend(t, l, batchOf(tt.records, 1000+int64(i), tt.valueSize), 0)
				if a.base != int64(i*tt.records) || a.last != a.base+int64(tt.records-1) {
					t.Fatalf("batch %d got offsets %d..%d", i, a.base, a.last)
				}
				want = append(want, a)
			}
			if got := len(l.segments()); got != tt.wantSegments {
				t.Fatalf("%d segments, want %d", got, tt.wantSegments)
			}
			if l.LogEndOffset() != int64(tt.batches*tt.records) {
				t.Fatalf("LEO %d", l.LogEndOffset())
			}
			// Every offset reads back the batch holding it, byte for byte.
			for _, a := range want {
				for off := a.base; off <= a.last; off++ {
					r, err := l.Read(off, 1, l.LogEndOffset(), true)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(r.Data, a.data) {
						t.Fatalf("read %d: got %d bytes, want the batch at %d", off, len(r.Data), a.base)
					}
				}
			}
			var all []byte
			for _, a := range want {
				all = append(all, a.data...)
			}
			if !bytes.Equal(readAll(t, l), all) {
				t.Fatal("reading the whole log does not give back what was appended")
			}
			// Reopen after a clean shutdown: the same bytes, offsets continue.
			fsys := l.fsys
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			m2 := openTestManager(t, fsys)
			l2, ok := m2.Log("orders", 0)
			if !ok {
				t.Fatal("log not loaded")
			}
			if !bytes.Equal(readAll(t, l2), all) {
				t.Fatal("reopened log differs")
			}
			a := mustAppend(t, l2, batchOf(1, 5000, 10), 0)
			if a.base != int64(tt.batches*tt.records) {
				t.Fatalf("after reopen appended at %d", a.base)
			}
		})
	}
}

func TestAppendRewritesOffsetAndEpochOnly(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(3, 100, 10), 0)
	in := batchOf(2, 200, 10)
	orig := append([]byte(nil), in...)
	res, err := l.Append(in, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstOffset != 3 || res.LastOffset != 4 || res.MaxTimestamp != 201 || res.OffsetOfMaxTimestamp != 4 {
		t.Fatalf("result %+v", res)
	}
	h, err := protocol.ParseBatchHeader(in)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 3 || h.PartitionLeaderEpoch != 42 {
		t.Fatalf("header %+v", h)
	}
	if !bytes.Equal(in[17:], orig[17:]) {
		t.Fatal("bytes after the leader epoch changed")
	}
	if err := protocol.VerifyCRC(in); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRejects(t *testing.T) {
	good := batchOf(1, 1, 10)
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty", nil, protocol.ErrCorrupt},
		{"truncated", good[:len(good)-1], protocol.ErrTruncated},
		{"trailing garbage", append(append([]byte(nil), good...), 1, 2, 3), protocol.ErrTruncated},
		{"larger than segment", batchOf(1, 1, 600), ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openTestManager(t, vfs.NewMem())
			l := createTestLog(t, m, smallConfig(500, 100))
			if _, err := l.Append(tt.input, 0, 0); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if l.LogEndOffset() != 0 || l.Err() != nil {
				t.Fatalf("rejected input changed the log: LEO %d, err %v", l.LogEndOffset(), l.Err())
			}
		})
	}
}

func TestReadLimits(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, DefaultLogConfig())
	var as []appended
	for i := range 5 {
		as = append(as, mustAppend(t, l, batchOf(2, int64(i), 100), 0)) // offsets 0..9
	}
	size := int32(len(as[0].data))
	tests := []struct {
		name        string
		offset      int64
		maxBytes    int32
		maxOffset   int64
		minOne      bool
		wantBatches []int // indexes into as
		wantErr     error
	}{
		{name: "all", offset: 0, maxBytes: 1 << 20, maxOffset: 10, wantBatches: []int{0, 1, 2, 3, 4}},
		{name: "mid batch offset starts at its batch", offset: 3, maxBytes: 1 << 20, maxOffset: 10, wantBatches: []int{1, 2, 3, 4}},
		{name: "max bytes cuts at whole batches", offset: 0, maxBytes: 2*size + size/2, maxOffset: 10, wantBatches: []int{0, 1}},
		{name: "max bytes exact", offset: 0, maxBytes: 3 * size, maxOffset: 10, wantBatches: []int{0, 1, 2}},
		{name: "too small without minOne", offset: 0, maxBytes: size - 1, maxOffset: 10},
		{name: "too small with minOne gives exactly one", offset: 2, maxBytes: 1, maxOffset: 10, minOne: true, wantBatches: []int{1}},
		{name: "zero bytes with minOne", offset: 0, maxBytes: 0, maxOffset: 10, minOne: true, wantBatches: []int{0}},
		{name: "high watermark excludes batches at or above it", offset: 0, maxBytes: 1 << 20, maxOffset: 6, wantBatches: []int{0, 1, 2}},
		{name: "high watermark inside a batch keeps it", offset: 0, maxBytes: 1 << 20, maxOffset: 5, wantBatches: []int{0, 1, 2}},
		{name: "offset at high watermark", offset: 6, maxBytes: 1 << 20, maxOffset: 6},
		{name: "offset at log end", offset: 10, maxBytes: 1 << 20, maxOffset: 10},
		{name: "past log end", offset: 11, maxBytes: 1 << 20, maxOffset: 10, wantErr: ErrOffsetOutOfRange},
		{name: "negative", offset: -1, maxBytes: 1 << 20, maxOffset: 10, wantErr: ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := l.Read(tt.offset, tt.maxBytes, tt.maxOffset, tt.minOne)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			var want []byte
			for _, i := range tt.wantBatches {
				want = append(want, as[i].data...)
			}
			if !bytes.Equal(r.Data, want) {
				t.Fatalf("got %d bytes (%d batches), want batches %v", len(r.Data), len(parseAll(t, r.Data)), tt.wantBatches)
			}
			if r.LogEndOffset != 10 || r.LogStartOffset != 0 {
				t.Fatalf("bounds %d..%d", r.LogStartOffset, r.LogEndOffset)
			}
		})
	}
}

func TestLogStartOffset(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, DefaultLogConfig())
	for i := range 4 {
		mustAppend(t, l, batchOf(5, int64(i), 10), 0)
	}
	if err := l.IncrementLogStartOffset(7); err != nil {
		t.Fatal(err)
	}
	if err := l.IncrementLogStartOffset(3); err != nil || l.LogStartOffset() != 7 {
		t.Fatalf("lowering: %v, start %d", err, l.LogStartOffset())
	}
	if err := l.IncrementLogStartOffset(21); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
	if _, err := l.Read(6, 1000, 20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	r, err := l.Read(7, 1000, 20, true)
	if err != nil {
		t.Fatal(err)
	}
	if hs := parseAll(t, r.Data); hs[0].BaseOffset != 5 || r.LogStartOffset != 7 {
		t.Fatalf("first batch %d, start %d", hs[0].BaseOffset, r.LogStartOffset)
	}
}

// TestIndexFollowsKafka checks the .index and .timeindex bytes against
// Kafka's LogSegment.append rule, computed independently here: an entry
// (batch last offset, batch position) whenever more than
// index.interval.bytes were appended since the last entry, counted before
// the batch itself, and a time entry for the largest timestamp so far when
// it grew.
func TestIndexFollowsKafka(t *testing.T) {
	fixed := int64(len(batchOf(2, 0, 50)))
	tests := []struct {
		name     string
		interval int32
		random   bool // random batch sizes and counts; else 2 records of 50 bytes
	}{
		{name: "random sizes", interval: 250, random: true},
		{name: "interval exactly two batches", interval: int32(2 * fixed)},
		{name: "interval zero", interval: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testIndexFollowsKafka(t, tt.interval, tt.random) })
	}
}

func testIndexFollowsKafka(t *testing.T, interval int32, random bool) {
	fsys := vfs.NewMem()
	cfg := smallConfig(1<<20, interval)
	m := openTestManager(t, fsys, cfg)
	l := createTestLog(t, m, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	var wantIdx, wantTime []byte
	var pos, since, maxTs, maxTsOff int64 = 0, 0, -1, 0
	lastTimeTs := int64(-1)
	for range 40 {
		n, size := 2, 50
		if random {
			n, size = 1+rng.IntN(4), 20+rng.IntN(100)
		}
		ts := 1000 + int64(rng.IntN(50)) // timestamps go up and down
		b := batchOf(n, ts, size)
		a := mustAppend(t, l, b, 0)
		if bt := ts + int64(n-1); bt > maxTs {
			maxTs, maxTsOff = bt, a.last
		}
		if since > int64(interval) {
			wantIdx = binary.BigEndian.AppendUint32(wantIdx, uint32(a.last))
			wantIdx = binary.BigEndian.AppendUint32(wantIdx, uint32(pos))
			if maxTs > lastTimeTs {
				wantTime = binary.BigEndian.AppendUint64(wantTime, uint64(maxTs))
				wantTime = binary.BigEndian.AppendUint32(wantTime, uint32(maxTsOff))
				lastTimeTs = maxTs
			}
			since = 0
		}
		since += int64(len(b))
		pos += int64(len(b))
	}
	// Closing adds the final time entry, as Kafka's LogSegment.close.
	if maxTs > lastTimeTs {
		wantTime = binary.BigEndian.AppendUint64(wantTime, uint64(maxTs))
		wantTime = binary.BigEndian.AppendUint32(wantTime, uint32(maxTsOff))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testDir, "orders-0")
	gotIdx, err := vfs.ReadFile(fsys, filepath.Join(dir, "00000000000000000000.index"))
	if err != nil {
		t.Fatal(err)
	}
	gotTime, err := vfs.ReadFile(fsys, filepath.Join(dir, "00000000000000000000.timeindex"))
	if err != nil {
		t.Fatal(err)
	}
	if len(wantIdx) < 5*offsetEntrySize {
		t.Fatalf("test wrote only %d index entries", len(wantIdx)/offsetEntrySize)
	}
	if !bytes.Equal(gotIdx, wantIdx) {
		t.Fatalf(".index\n got %x\nwant %x", gotIdx, wantIdx)
	}
	if !bytes.Equal(gotTime, wantTime) {
		t.Fatalf(".timeindex\n got %x\nwant %x", gotTime, wantTime)
	}
	// Recovery builds the very same files.
	fsys.Remove(filepath.Join(testDir, cleanShutdownFile))
	m2 := openTestManager(t, fsys, cfg)
	if m2.recoveredBatches.Load() != 40 {
		t.Fatalf("recovered %d batches, want 40", m2.recoveredBatches.Load())
	}
	m2.Close()
	gotIdx, _ = vfs.ReadFile(fsys, filepath.Join(dir, "00000000000000000000.index"))
	gotTime, _ = vfs.ReadFile(fsys, filepath.Join(dir, "00000000000000000000.timeindex"))
	if !bytes.Equal(gotIdx, wantIdx) || !bytes.Equal(gotTime, wantTime) {
		t.Fatalf("recovered indexes differ:\n%x\n%x", gotIdx, gotTime)
	}
}

func TestIndexLookupManySegments(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, smallConfig(4000, 200))
	rng := rand.New(rand.NewPCG(3, 4))
	var as []appended
	for i := range 400 {
		as = append(as, mustAppend(t, l, batchOf(1+rng.IntN(5), int64(i), rng.IntN(200)), 0))
	}
	if n := len(l.segments()); n < 20 {
		t.Fatalf("only %d segments", n)
	}
	// Each segment's base offset is the first offset it holds.
	for _, s := range l.segments() {
		r, err := l.Read(s.base, 1, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if h := parseAll(t, r.Data); h[0].BaseOffset != s.base {
			t.Fatalf("segment %d starts with batch %d", s.base, h[0].BaseOffset)
		}
	}
	// Reads reopened from disk use the index files written at roll.
	fsys := l.fsys
	m.Close()
	m2 := openTestManager(t, fsys)
	l2, _ := m2.Log("orders", 0)
	for range 500 {
		a := as[rng.IntN(len(as))]
		off := a.base + rng.Int64N(a.last-a.base+1)
		r, err := l2.Read(off, 1, l2.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Data, a.data) {
			t.Fatalf("offset %d: wrong batch", off)
		}
	}
	for _, s := range l2.segments()[:len(l2.segments())-1] {
		if s.loaded && len(s.offIdx) == 0 && s.size.Load() > 400 {
			t.Fatalf("segment %d of %d bytes has no index entries", s.base, s.size.Load())
		}
	}
}

func TestRollTriggers(t *testing.T) {
	day := int64(24 * 3600 * 1000)
	tests := []struct {
		name  string
		cfg   func(*LogConfig)
		steps []struct {
			ts, now int64
		}
		wantSegments int
	}{
		{
			name: "segment.ms by record timestamps",
			cfg:  func(c *LogConfig) { c.SegmentMs = day },
			steps: []struct{ ts, now int64 }{
				{0, 0}, {day, 0}, {day + 1, 0}, {2*day + 1, 0}, {2*day + 2, 0},
			},
			// Measured from the segment's first batch: [0, day],
			// [day+1, 2day+1], [2day+2].
			wantSegments: 3,
		},
		{
			name: "segment.ms by wall clock without timestamps",
			cfg:  func(c *LogConfig) { c.SegmentMs = 1000 },
			steps: []struct{ ts, now int64 }{
				{-1, 0}, {-1, 500}, {-1, 1001}, {-1, 1500},
			},
			wantSegments: 2,
		},
		{
			name: "full offset index",
			cfg: func(c *LogConfig) {
				c.SegmentIndexBytes = 3 * offsetEntrySize
				c.IndexIntervalBytes = 0
			},
			steps: []struct{ ts, now int64 }{
				{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}, {8, 0},
			},
			// 24 bytes hold 2 time entries, one kept for the roll entry,
			// so the time index is full after the second batch of a
			// segment (the first never gets an entry): 2 batches each.
			wantSegments: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openTestManager(t, vfs.NewMem())
			cfg := DefaultLogConfig()
			tt.cfg(&cfg)
			l := createTestLog(t, m, cfg)
			for _, s := range tt.steps {
				b := batchOf(1, s.ts, 10)
				mustAppend(t, l, b, s.now)
			}
			if got := len(l.segments()); got != tt.wantSegments {
				t.Fatalf("%d segments, want %d", got, tt.wantSegments)
			}
			if readAll(t, l) == nil {
				t.Fatal("empty")
			}
		})
	}
}

func TestConcurrentReadersDuringAppends(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, smallConfig(3000, 100))
	const n = 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				leo := l.LogEndOffset()
				if leo == 0 {
					continue
				}
				off := rand.Int64N(leo)
				r, err := l.Read(off, 4096, leo, true)
				if err != nil {
					t.Error(err)
					return
				}
				hs := parseAll(t, r.Data)
				if len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
					t.Errorf("read %d: got batches starting %v", off, hs)
					return
				}
			}
		}()
	}
	for i := range n {
		mustAppend(t, l, batchOf(2, int64(i), 50), 0)
		if i%50 == 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if l.LogEndOffset() != 2*n {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

func TestClosedLog(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(1, 1, 1), 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batchOf(1, 1, 1), 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := l.Read(0, 100, 1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestFlushPolicy(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*LogConfig)
		appends []int64 // now, per append of a 2-record batch
		wantRP  []int64 // recovery point after each append
	}{
		{"never", func(*LogConfig) {}, []int64{0, 10, 20}, []int64{0, 0, 0}},
		{"flush.messages=3", func(c *LogConfig) { c.FlushMessages = 3 }, []int64{0, 0, 0, 0}, []int64{0, 4, 4, 8}},
		{"flush.ms=1000", func(c *LogConfig) { c.FlushMs = 1000 }, []int64{0, 999, 1000, 1500, 2000}, []int64{0, 0, 6, 6, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openTestManager(t, vfs.NewMem())
			defer m.Close()
			cfg := DefaultLogConfig()
			tt.cfg(&cfg)
			l := createTestLog(t, m, DefaultLogConfig())
			l.SetConfig(cfg)
			for i, now := range tt.appends {
				mustAppend(t, l, batchOf(2, 1, 10), now)
				if got := l.RecoveryPoint(); got != tt.wantRP[i] {
					t.Fatalf("after append %d: recovery point %d, want %d", i, got, tt.wantRP[i])
				}
			}
		})
	}
}
