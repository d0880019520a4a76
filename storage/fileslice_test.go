package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// openOSTestManager opens a manager on the real filesystem in a temporary
// directory (only OS files give FileSlices), as openTestManager.
func openOSTestManager(t testing.TB, cfg ...LogConfig) *Manager {
	t.Helper()
	mc := ManagerConfig{
		FS: vfs.Default, Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Decompress: gunzip,
		Now: func() time.Time { return time.UnixMilli(0) },
	}
	if len(cfg) > 0 {
		mc.TopicConfig = func(string) LogConfig { return cfg[0] }
	}
	m, err := OpenManager(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// sliceBytes reads a slice's bytes through ReadAt.
func sliceBytes(t testing.TB, s *FileSlice) []byte {
	t.Helper()
	b := make([]byte, s.Len())
	if n, err := s.ReadAt(b, 0); n != len(b) || err != nil {
		t.Fatalf("read slice: %d of %d bytes, %v", n, len(b), err)
	}
	return b
}

// TestReadSliceMatchesRead: for every combination of fetch offset, byte
// limit, offset limit and minOneBatch, ReadSlice finds exactly the
// batches Read returns, and the last offset of the last one; with index
// entries every batch, every few batches, and none.
func TestReadSliceMatchesRead(t *testing.T) {
	for _, interval := range []int32{1, 300, 1 << 30} {
		m := openOSTestManager(t)
		cfg := smallConfig(64<<10, interval)
		l := createTestLog(t, m, cfg)
		rng := rand.New(rand.NewPCG(uint64(interval), 7))
		for range 200 {
			// From 80 bytes to beyond the header reader's window.
			n, size := 1+rng.IntN(4), 10+rng.IntN(200)
			if rng.IntN(10) == 0 {
				size = 3000 + rng.IntN(3000)
			}
			mustAppend(t, l, batchOf(n, 1, size), 0)
		}
		leo := l.LogEndOffset()
		for range 2000 {
			off := rng.Int64N(leo + 1)
			maxBytes := int32(rng.IntN(20000))
			maxOffset := leo - rng.Int64N(leo/4+1)
			minOne := rng.IntN(2) == 0
			want, err := l.Read(off, maxBytes, maxOffset, minOne)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.ReadSlice(off, maxBytes, maxOffset, minOne)
			if err != nil {
				t.Fatal(err)
			}
			if got.Data != nil {
				t.Fatalf("ReadSlice on OS files returned Data")
			}
			if (got.Slice == nil) != (len(want.Data) == 0) {
				t.Fatalf("read(%d, %d, %d, %v): slice %v, data %d bytes", off, maxBytes, maxOffset, minOne, got.Slice, len(want.Data))
			}
			if got.Slice == nil {
				continue
			}
			if b := sliceBytes(t, got.Slice); !bytes.Equal(b, want.Data) {
				t.Fatalf("read(%d, %d, %d, %v): slice of %d bytes differs from %d bytes read", off, maxBytes, maxOffset, minOne, len(b), len(want.Data))
			}
			hs := parseAll(t, want.Data)
			if last := hs[len(hs)-1].LastOffset(); got.Slice.LastOffset() != last {
				t.Fatalf("read(%d, ...): last offset %d, want %d", off, got.Slice.LastOffset(), last)
			}
			if got.LogStartOffset != want.LogStartOffset || got.LogEndOffset != want.LogEndOffset || !got.Slice.Intact() {
				t.Fatalf("bounds %d-%d, want %d-%d", got.LogStartOffset, got.LogEndOffset, want.LogStartOffset, want.LogEndOffset)
			}
			got.Slice.Release()
			got.Slice.Release() // a second release does nothing
		}
	}
}

// TestReadSliceMemFS: a filesystem without OS files reads Data instead.
func TestReadSliceMemFS(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	l := createTestLog(t, m, DefaultLogConfig())
	a := mustAppend(t, l, batchOf(3, 1, 40), 0)
	r, err := l.ReadSlice(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Slice != nil || !bytes.Equal(r.Data, a.data) {
		t.Fatalf("ReadSlice on MemFS: slice %v, %d bytes, %v", r.Slice, len(r.Data), err)
	}
}

// TestFileSliceOutlivesDeletion: a slice taken before its segment was
// deleted still reads the segment's bytes after the files are removed and
// the segment closed; its release closes the file. A truncation or a
// closed log makes a slice no longer intact.
func TestFileSliceOutlivesDeletion(t *testing.T) {
	m := openOSTestManager(t)
	cfg := oneBatchPerSegment()
	cfg.RetentionMs = -1
	cfg.FileDeleteDelayMs = 0
	l := createTestLog(t, m, cfg)
	first := mustAppend(t, l, batchOf(3, 1, 40), 0)
	mustAppend(t, l, batchOf(3, 2, 40), 0)
	r, err := l.ReadSlice(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Slice == nil {
		t.Fatalf("read slice: %v %v", r.Slice, err)
	}
	s := r.Slice
	old := l.segments()[0]
	if err := l.IncrementLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(0)); n != 1 || err != nil {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if n, err := m.RunFileDeletions(time.UnixMilli(0)); n != 1 || err != nil {
		t.Fatalf("removed %d: %v", n, err)
	}
	if old.acquire() {
		t.Fatal("removed segment still acquirable")
	}
	if _, err := os.Stat(old.path(logSuffix + deletedFileSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted file still there: %v", err)
	}
	f, pos := s.File()
	b := make([]byte, s.Len())
	if n, err := f.ReadAt(b, pos); n != len(b) || err != nil || !bytes.Equal(b, first.data) {
		t.Fatalf("read the removed segment through the slice: %d bytes, %v", n, err)
	}
	if !s.Intact() {
		t.Fatal("deletion made the slice not intact")
	}
	s.Release()
	if _, err := f.ReadAt(b, pos); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("file still open after the last release: %v", err)
	}

	// A truncation, even of another segment, ends intactness.
	r, err = l.ReadSlice(3, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Slice == nil {
		t.Fatalf("read slice: %v %v", r.Slice, err)
	}
	mustAppend(t, l, batchOf(3, 3, 40), 0)
	if err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	if r.Slice.Intact() {
		t.Fatal("slice intact across a truncation")
	}
	r.Slice.Release()

	r, err = l.ReadSlice(3, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Slice == nil {
		t.Fatalf("read slice: %v %v", r.Slice, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Slice.Intact() {
		t.Fatal("slice intact after the log closed")
	}
	// The closed log's file stays open for the slice.
	f, pos = r.Slice.File()
	if n, err := f.ReadAt(b[:10], pos); n != 10 || err != nil {
		t.Fatalf("read after close: %v", err)
	}
	r.Slice.Release()
	if _, err := f.ReadAt(b[:10], pos); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("file still open after the last release: %v", err)
	}
}

// TestReadSliceHintsMatchRead reads a log as a consumer does, each read
// starting after the last one's last offset, where readRange finds the
// first batch from the hint the read before left on the segment and may
// take the last batch's last offset from the index: with gaps between
// batches' offsets (a follower's copy of a compacted log), and after a
// truncation and appends that put other batches at the hinted positions,
// every read returns exactly what Read returns.
func TestReadSliceHintsMatchRead(t *testing.T) {
	for _, interval := range []int32{1, 300, 1 << 30} {
		m := openOSTestManager(t)
		l := createTestLog(t, m, smallConfig(64<<10, interval))
		rng := rand.New(rand.NewPCG(uint64(interval), 11))
		next := int64(0)
		appendSome := func(count int) {
			for range count {
				n, size := 1+rng.IntN(4), 10+rng.IntN(200)
				if rng.IntN(5) == 0 {
					size = 3000 + rng.IntN(3000)
				}
				if rng.IntN(3) == 0 {
					next += 1 + rng.Int64N(5) // a gap
				}
				res, err := l.AppendAsFollower(withBaseOffset(batchOf(n, 1, size), next))
				if err != nil {
					t.Fatal(err)
				}
				next = res.LastOffset + 1
			}
		}
		appendSome(300)
		consume := func(maxBytes int32) {
			leo := l.LogEndOffset()
			for off := l.LogStartOffset(); off < leo; {
				want, err := l.Read(off, maxBytes, leo, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := l.ReadSlice(off, maxBytes, leo, true)
				if err != nil {
					t.Fatal(err)
				}
				if got.Slice == nil {
					if len(want.Data) != 0 {
						t.Fatalf("read(%d, %d): no slice, %d bytes read", off, maxBytes, len(want.Data))
					}
					off++ // in a gap at a segment's end
					continue
				}
				if b := sliceBytes(t, got.Slice); !bytes.Equal(b, want.Data) {
					t.Fatalf("read(%d, %d): slice of %d bytes differs from %d bytes read", off, maxBytes, len(b), len(want.Data))
				}
				hs := parseAll(t, want.Data)
				last := hs[len(hs)-1].LastOffset()
				if got.Slice.LastOffset() != last {
					t.Fatalf("read(%d, %d): last offset %d, want %d", off, maxBytes, got.Slice.LastOffset(), last)
				}
				got.Slice.Release()
				off = last + 1
			}
		}
		for _, mb := range []int32{1, 700, 5000, 20000, 1 << 20} {
			consume(mb)
		}
		// Cut the log in the middle, where hints point, and append other
		// batches there.
		if err := l.TruncateTo(l.LogEndOffset() / 2); err != nil {
			t.Fatal(err)
		}
		next = l.LogEndOffset()
		appendSome(150)
		for _, mb := range []int32{20000, 700, 5000} {
			consume(mb)
		}
	}
}

// TestReadSliceHintAfterTruncation leaves a segment's hint on a batch,
// truncates the log below it and appends a different batch at the same
// position and offset: the next read from that offset finds the new one.
func TestReadSliceHintAfterTruncation(t *testing.T) {
	m := openOSTestManager(t)
	l := createTestLog(t, m, smallConfig(1<<20, 1))
	for range 10 {
		mustAppend(t, l, batchOf(3, 1, 500), 0)
	}
	leo := l.LogEndOffset()
	first, err := l.Read(0, 1, leo, true) // the first batch alone
	if err != nil {
		t.Fatal(err)
	}
	// Room for the first batch and the second's header, not the second.
	got, err := l.ReadSlice(0, int32(len(first.Data)+100), leo, true)
	if err != nil || got.Slice == nil || got.Slice.LastOffset() != 2 {
		t.Fatalf("first read: %+v, %v", got, err)
	}
	got.Slice.Release()
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(1, 1, 50), 0)
	for range 10 { // past the end of the batch the hint saw
		mustAppend(t, l, batchOf(3, 1, 500), 0)
	}
	want, err := l.Read(3, 1000, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	got, err = l.ReadSlice(3, 1000, l.LogEndOffset(), true)
	if err != nil || got.Slice == nil {
		t.Fatalf("read after truncation: %+v, %v", got, err)
	}
	defer got.Slice.Release()
	hs := parseAll(t, want.Data)
	if b := sliceBytes(t, got.Slice); !bytes.Equal(b, want.Data) || got.Slice.LastOffset() != hs[len(hs)-1].LastOffset() {
		t.Fatalf("read after truncation: %d bytes up to offset %d, want %d bytes up to %d", len(b), got.Slice.LastOffset(), len(want.Data), hs[len(hs)-1].LastOffset())
	}
}
