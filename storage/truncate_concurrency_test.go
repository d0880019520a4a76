package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// TestTruncateBelowCleanerCheckpoint truncates a compacted log below the
// offset it was cleaned to: the checkpoint must come down to the new
// active segment's base, or the next cleaning would never look at the
// records that replaced the truncated ones, and would keep values those
// records overwrote.
func TestTruncateBelowCleanerCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	clock := &testClock{}
	clock.set(1000)
	cfg := compactConfig()
	m := openCleanerManager(t, mem, clock, cfg)
	l := createTestLog(t, m, cfg)
	cleaner := NewCleaner(m, DefaultCleanerConfig())
	written := map[int64]kv{}
	appendKeyed := func(keys ...string) {
		var recs []kv
		for _, key := range keys {
			recs = append(recs, k(key, fmt.Sprintf("%s@%d", key, l.LogEndOffset()+int64(len(recs)))))
		}
		res, err := l.Append(kbatch{recs: recs, ts: 10}.build(t), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			written[res.FirstOffset+int64(i)] = r
		}
	}
	for range 2 {
		appendKeyed("k0", "k1", "k2", "k3")
		appendKeyed("k0", "k1", "k2", "k3")
		forceRoll(t, l)
	}
	// A truncation waiting for the log stops a cleaning at its next step.
	l.abortCleaning.Store(1)
	if res, err := cleaner.CleanLog(l); res != nil || err != nil {
		t.Fatalf("cleaning ran with a truncation waiting: %+v, %v", res, err)
	}
	if _, ok := m.cleanerCheckpoint(l); ok {
		t.Fatal("an aborted cleaning recorded a checkpoint")
	}
	l.abortCleaning.Store(0)
	if res, err := cleaner.CleanLog(l); res == nil || err != nil || res.EndOffset != 16 {
		t.Fatalf("first cleaning: %+v, %v", res, err)
	}
	if ckpt, _ := m.cleanerCheckpoint(l); ckpt != 16 {
		t.Fatalf("checkpoint %d after cleaning to 16", ckpt)
	}

	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	base := l.active().base
	if leo > 10 || base > leo {
		t.Fatalf("log end %d, active segment %d", leo, base)
	}
	ckpt, _ := m.cleanerCheckpoint(l)
	onDisk, err := readCheckpoint(mem, filepath.Join(testDir, cleanerCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if ckpt != base || onDisk[l.tp] != base {
		t.Fatalf("checkpoint %d (file %d) after truncating to %d; active segment at %d", ckpt, onDisk[l.tp], leo, base)
	}
	for off := range written {
		if off >= leo {
			delete(written, off)
		}
	}

	// The leader's records after the truncation point overwrite k0..k3;
	// later ones use other keys.
	appendKeyed("k0", "k1", "k2", "k3")
	appendKeyed("x0", "x1", "x2", "x3")
	appendKeyed("x0", "x1", "x2", "x3")
	forceRoll(t, l)
	res, err := cleaner.CleanLog(l)
	if err != nil || res == nil {
		t.Fatalf("second cleaning: %+v, %v", res, err)
	}
	latest := map[string]int64{}
	for off, r := range written {
		if prev, ok := latest[string(r.key)]; !ok || off > prev {
			latest[string(r.key)] = off
		}
	}
	_, rs := dumpLog(t, l)
	seen := map[string]bool{}
	for _, r := range rs {
		w, ok := written[r.offset]
		if !ok || string(w.key) != r.key || w.value != r.value {
			t.Fatalf("read %s, which the log never held at that offset", r)
		}
		if r.offset < res.EndOffset && latest[r.key] != r.offset {
			t.Fatalf("cleaned log kept %s, overwritten at %d", r, latest[r.key])
		}
		seen[r.key] = true
	}
	if len(seen) != len(latest) {
		t.Fatalf("keys %v after cleaning, want %d", seen, len(latest))
	}

	// A truncation above the checkpoint leaves it alone.
	ckpt, _ = m.cleanerCheckpoint(l)
	appendKeyed("y0")
	appendKeyed("y1")
	if err := l.TruncateTo(l.LogEndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.cleanerCheckpoint(l); after != ckpt {
		t.Fatalf("checkpoint moved from %d to %d", ckpt, after)
	}
	m.Close()
}

// TestTruncateWhileCleaning truncates and appends while a cleaner keeps
// cleaning the log: neither fails, and the log ends as the appends and
// truncations say.
func TestTruncateWhileCleaning(t *testing.T) {
	clock := &testClock{}
	clock.set(1000)
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
	l := createTestLog(t, m, cfg)
	cleaner := NewCleaner(m, DefaultCleanerConfig())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cleanErr atomic.Pointer[error]
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := cleaner.CleanLog(l); err != nil {
				cleanErr.Store(&err)
				return
			}
			if _, err := m.RunFileDeletions(clock.now()); err != nil {
				cleanErr.Store(&err)
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 60 {
		for i := range 3 {
			key := fmt.Sprintf("k%d", rng.IntN(6))
			if _, err := l.Append(kbatch{recs: []kv{k(key, fmt.Sprint(round, i))}, ts: 10}.build(t), 0, 0); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				forceRoll(t, l)
			}
		}
		to := l.LogEndOffset() - int64(rng.IntN(4))
		if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() > to {
			t.Fatalf("truncated to %d, log end %d", to, l.LogEndOffset())
		}
	}
	close(stop)
	wg.Wait()
	if p := cleanErr.Load(); p != nil {
		t.Fatalf("cleaner failed: %v", *p)
	}
	dumpLog(t, l)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// logState is the log as it stood after one round of
// TestTruncateConcurrentReads: batches by base offset, contiguous.
type logState struct {
	batches []stateBatch
	byBase  map[int64]int
}

type stateBatch struct {
	base, last int64
	data       []byte
}

func newLogState(batches []stateBatch) *logState {
	s := &logState{batches: batches, byBase: map[int64]int{}}
	for i, b := range batches {
		s.byBase[b.base] = i
	}
	return s
}

// holds reports whether the state has these batches, consecutive, the
// first holding offset.
func (s *logState) holds(offset int64, got []stateBatch) bool {
	i, ok := s.byBase[got[0].base]
	if !ok || got[0].base > offset || got[0].last < offset {
		return false
	}
	for j, g := range got {
		if i+j >= len(s.batches) || !bytes.Equal(s.batches[i+j].data, g.data) {
			return false
		}
	}
	return true
}

// TestTruncateConcurrentReads truncates, refills as a follower and
// applies retention while readers read: every read must give batches that
// stood together in one state of the log, never a mix of the log before
// and after a truncation, and no read may fail but for an offset out of
// range. The slice case reads through FileSlices of OS files, whose bytes
// are read after ReadSlice returns: those whose slice is still Intact
// after the bytes were read must hold the same.
func TestTruncateConcurrentReads(t *testing.T) {
	t.Run("read", func(t *testing.T) { testTruncateConcurrentReads(t, false) })
	t.Run("slice", func(t *testing.T) { testTruncateConcurrentReads(t, true) })
}

func testTruncateConcurrentReads(t *testing.T, slices bool) {
	cfg := truncConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.RetentionBytes = 8 * 202
	var m *Manager
	if slices {
		m = openOSTestManager(t, cfg)
	} else {
		m = openTestManager(t, vfs.NewMem(), cfg)
	}
	l := createTestLog(t, m, cfg)

	var mu sync.Mutex
	var states []*logState
	addState := func(s *logState) {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, s)
	}
	snapshot := func() []*logState {
		mu.Lock()
		defer mu.Unlock()
		return states
	}
	addState(newLogState(nil))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Pointer[string]
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failed.CompareAndSwap(nil, &msg)
	}
	var reads, withData, changed atomic.Int64
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				leo := l.LogEndOffset()
				offset := int64(rng.IntN(int(leo + 2)))
				read := l.Read
				if slices {
					read = l.ReadSlice
				}
				res, err := read(offset, int32(rng.IntN(700)), math.MaxInt64, true)
				reads.Add(1)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err != nil {
					fail("read at %d: %v", offset, err)
					return
				}
				if s := res.Slice; s != nil {
					// As a sender behind others on its connection.
					if rng.IntN(2) == 0 {
						time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
					}
					res.Data = make([]byte, s.Len())
					n, err := s.ReadAt(res.Data, 0)
					intact := s.Intact()
					s.Release()
					if !intact {
						changed.Add(1)
						continue
					}
					if err != nil || n != len(res.Data) {
						// A truncation cut the file and has not counted
						// itself yet: the sender fails, sends nothing wrong.
						changed.Add(1)
						continue
					}
				}
				if len(res.Data) == 0 {
					if offset < res.LogEndOffset {
						fail("read at %d returned nothing below the log end %d", offset, res.LogEndOffset)
					}
					continue
				}
				withData.Add(1)
				var got []stateBatch
				for data := res.Data; len(data) > 0; {
					batch, rest, h, err := protocol.NextBatch(data)
					if err == nil {
						err = protocol.VerifyCRC(batch)
					}
					if err != nil {
						fail("read at %d: %v", offset, err)
						return
					}
					got = append(got, stateBatch{base: h.BaseOffset, last: h.LastOffset(), data: batch})
					data = rest
				}
				ok := false
				for _, s := range snapshot() {
					if s.holds(offset, got) {
						ok = true
						break
					}
				}
				if !ok {
					fail("read at %d returned batches %d..%d that no state of the log held together", offset, got[0].base, got[len(got)-1].last)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.DeleteOldSegments(time.UnixMilli(0)); err != nil {
				fail("retention: %v", err)
				return
			}
			if _, err := m.RunFileDeletions(time.UnixMilli(0)); err != nil {
				fail("file deletion: %v", err)
				return
			}
			if err := l.Flush(); err != nil {
				fail("flush: %v", err)
				return
			}
			if _, _, _, err := l.FindOffsetByTimestamp(0); err != nil {
				fail("find offset by timestamp: %v", err)
				return
			}
		}
	}()

	// The readers must run between the rounds, however loaded the
	// machine: each round waits for reads of the state before it.
	waitReads := func(what string, done func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !done() && failed.Load() == nil {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: %d reads, %d with data after 30s", what, reads.Load(), withData.Load())
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cur := snapshot()[0]
	for round := 1; round <= 120 && failed.Load() == nil; round++ {
		before := reads.Load()
		waitReads(fmt.Sprintf("round %d", round), func() bool { return reads.Load() >= before+3 })
		// Truncate at a batch boundary (or start over below the first
		// segment), then refill from there as a follower would.
		i := rng.IntN(len(cur.batches) + 1)
		to := int64(0)
		if i < len(cur.batches) {
			to = cur.batches[i].base
		} else if i > 0 {
			to = cur.batches[i-1].last + 1
		}
		next := append([]stateBatch(nil), cur.batches[:i]...)
		var in []byte
		n := 1 + rng.IntN(4)
		half := 0 // bytes of the first n/2 batches
		for j := range n {
			base := to + int64(3*j)
			// Sizes vary, so that bytes read after a truncation at the
			// positions of the log before it do not line up as batches.
			b := stamp(batchOf(3, int64(round*100+j), 30+10*rng.IntN(3)), base, int32(round))
			next = append(next, stateBatch{base: base, last: base + 2, data: b})
			in = append(in, b...)
			if j < n/2 {
				half = len(in)
			}
		}
		cur = newLogState(next)
		addState(cur)
		if rng.IntN(10) == 0 {
			if err := l.TruncateFullyAndStartAt(to); err != nil {
				t.Fatal(err)
			}
		} else if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != to {
			t.Fatalf("round %d: truncated to %d, log end %d", round, to, l.LogEndOffset())
		}
		// Two appends, so readers also see the state between them.
		for _, part := range [][]byte{in[:half], in[half:]} {
			if len(part) == 0 {
				continue
			}
			if _, err := l.AppendAsFollower(part); err != nil {
				t.Fatalf("round %d: append as follower at %d: %v", round, l.LogEndOffset(), err)
			}
		}
	}
	waitReads("last round", func() bool { return withData.Load() > 0 })
	close(stop)
	wg.Wait()
	if p := failed.Load(); p != nil {
		t.Fatal(*p)
	}
	if withData.Load() == 0 {
		t.Fatalf("%d reads, none returned data", reads.Load())
	}
	t.Logf("%d reads, %d with data, %d slices changed before they were read", reads.Load(), withData.Load(), changed.Load())
	m.Close()
}
