package storage

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// stamp returns a copy of batch as a leader stored it: with its base
// offset and partition leader epoch (outside the CRC).
func stamp(batch []byte, base int64, epoch int32) []byte {
	b := slices.Clone(batch)
	protocol.SetBaseOffset(b, base)
	protocol.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// openPartition returns partition p of the "orders" topic.
func openPartition(t testing.TB, m *Manager, p int32, cfg LogConfig) *Log {
	t.Helper()
	l, err := m.GetOrCreateLog("orders", p, [16]byte{1, 2, 3}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// replicate fetches from leader at follower's log end and appends as
// follower until it has caught up, maxBytes at a time.
func replicate(t testing.TB, leader, follower *Log, maxBytes int32) {
	t.Helper()
	for follower.LogEndOffset() < leader.LogEndOffset() {
		r, err := leader.Read(follower.LogEndOffset(), maxBytes, leader.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(r.Data); err != nil {
			t.Fatalf("append as follower at %d: %v", follower.LogEndOffset(), err)
		}
	}
}

// TestAppendAsFollowerReplicates copies a leader's log batch by batch:
// the follower's log holds the same bytes (offsets and leader epochs
// kept), rolls and indexes as the leader's does, and survives restarts.
func TestAppendAsFollowerReplicates(t *testing.T) {
	cfg := truncConfig()
	cfg.FlushMessages = 4
	mem := vfs.NewMem()
	m := openTestManager(t, mem, cfg)
	leader := openPartition(t, m, 0, cfg)
	follower := openPartition(t, m, 1, cfg)
	for i := range 12 {
		if _, err := leader.Append(batchOf(3, 1000+10*int64(i), 40), int32(i/4), 0); err != nil {
			t.Fatal(err)
		}
	}
	replicate(t, leader, follower, 500)
	want := readAll(t, leader)
	if got := readAll(t, follower); !bytes.Equal(got, want) {
		t.Fatal("follower's log differs from the leader's")
	}
	for i, h := range parseAll(t, want) {
		if h.PartitionLeaderEpoch != int32(i/4) || h.BaseOffset != int64(3*i) {
			t.Fatalf("batch %d: offset %d epoch %d", i, h.BaseOffset, h.PartitionLeaderEpoch)
		}
	}
	if len(follower.segments()) < 4 {
		t.Fatalf("follower did not roll: segments %v", segmentBases(follower))
	}
	if follower.RecoveryPoint() < follower.LogEndOffset()-3 {
		t.Fatalf("flush.messages=4 left the recovery point at %d of %d", follower.RecoveryPoint(), follower.LogEndOffset())
	}
	lts, loff := leader.MaxTimestamp()
	fts, foff := follower.MaxTimestamp()
	if lts != fts || loff != foff {
		t.Fatalf("max timestamp: leader %d at %d, follower %d at %d", lts, loff, fts, foff)
	}
	for off := int64(0); off < 36; off += 5 {
		lr, _ := leader.Read(off, 1, 36, true)
		fr, err := follower.Read(off, 1, 36, true)
		if err != nil || !bytes.Equal(lr.Data, fr.Data) {
			t.Fatalf("read at %d differs: %v", off, err)
		}
	}
	checkIndexes(t, follower)

	if err := follower.Flush(); err != nil {
		t.Fatal(err)
	}
	mem.Crash()
	m2 := openTestManager(t, mem, cfg)
	f2, _ := m2.Log("orders", 1)
	if got := readAll(t, f2); !bytes.Equal(got, want) {
		t.Fatal("follower's log differs after a crash")
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	m3 := openTestManager(t, mem, cfg)
	f3, _ := m3.Log("orders", 1)
	if got := readAll(t, f3); !bytes.Equal(got, want) || f3.LogEndOffset() != 36 {
		t.Fatal("follower's log differs after a clean restart")
	}
	m3.Close()
}

func TestAppendAsFollowerChecks(t *testing.T) {
	batch := func(base int64, n int) []byte { return stamp(batchOf(n, 2000+base, 20), base, 4) }
	corrupt := func(b []byte) []byte {
		b = slices.Clone(b)
		b[len(b)-1] ^= 1
		return b
	}
	badMagic := func(b []byte) []byte {
		b = slices.Clone(b)
		b[16] = 1
		return b
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	big := stamp(batchOf(1, 1, 700), 30, 4)
	tests := []struct {
		name      string
		input     []byte
		wantErr   error
		wantFirst int64 // when accepted
		wantLEO   int64 // when accepted
	}{
		{name: "at the log end", input: cat(batch(30, 3), batch(33, 2)), wantFirst: 30, wantLEO: 35},
		{name: "a gap left by compaction", input: batch(40, 3), wantFirst: 40, wantLEO: 43},
		{name: "gaps between batches", input: cat(batch(30, 1), batch(35, 1)), wantFirst: 30, wantLEO: 36},
		{name: "a partial batch at the end is ignored", input: cat(batch(30, 3), batch(33, 3)[:50]), wantFirst: 30, wantLEO: 33},
		{name: "starts at an appended batch", input: batch(27, 3), wantErr: ErrUnexpectedAppendOffset},
		{name: "starts inside the last batch", input: batch(28, 3), wantErr: ErrUnexpectedAppendOffset},
		{name: "starts long ago", input: batch(0, 3), wantErr: ErrUnexpectedAppendOffset},
		{name: "second batch overlaps the first", input: cat(batch(30, 3), batch(32, 3)), wantErr: ErrOffsetsOutOfOrder},
		{name: "second batch goes back", input: cat(batch(33, 3), batch(30, 3)), wantErr: ErrOffsetsOutOfOrder},
		{name: "offsets wider than a segment", input: cat(batch(30, 1), batch(31+math.MaxInt32, 1)), wantErr: ErrOffsetsOutOfOrder},
		{name: "corrupt CRC", input: corrupt(batch(30, 3)), wantErr: protocol.ErrCorrupt},
		{name: "corrupt CRC in a later batch", input: cat(batch(30, 3), corrupt(batch(33, 3))), wantErr: protocol.ErrCorrupt},
		{name: "old magic", input: badMagic(batch(30, 3)), wantErr: protocol.ErrMagic},
		{name: "nothing", input: nil, wantErr: protocol.ErrTruncated},
		{name: "only a partial batch", input: batch(30, 3)[:70], wantErr: protocol.ErrTruncated},
		{name: "larger than a segment", input: big, wantErr: ErrBatchTooLarge},
		{name: "negative base offset", input: stamp(batchOf(1, 1, 1), -5, 4), wantErr: protocol.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openTestManager(t, vfs.NewMem(), truncConfig())
			l := createTestLog(t, m, truncConfig())
			as := tenBatches(t, l)
			before := readAll(t, l)
			res, err := l.AppendAsFollower(tt.input)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, want %v", err, tt.wantErr)
				}
				if l.LogEndOffset() != 30 || !bytes.Equal(readAll(t, l), before) || l.Err() != nil {
					t.Fatalf("a refused append changed the log: end %d, err %v", l.LogEndOffset(), l.Err())
				}
				if _, err := l.AppendAsFollower(batch(30, 2)); err != nil {
					t.Fatalf("a good append after a refused one: %v", err)
				}
				return
			}
			if err != nil || res.FirstOffset != tt.wantFirst || res.LastOffset != tt.wantLEO-1 || l.LogEndOffset() != tt.wantLEO {
				t.Fatalf("result %+v, %v, log end %d", res, err, l.LogEndOffset())
			}
			// A fetch in a gap gets the next batch.
			r, err := l.Read(30, 1, tt.wantLEO, true)
			if err != nil {
				t.Fatal(err)
			}
			if hs := parseAll(t, r.Data); len(hs) != 1 || hs[0].BaseOffset != tt.wantFirst || hs[0].PartitionLeaderEpoch != 4 {
				t.Fatalf("read at 30 got %+v", hs)
			}
			if got := readAll(t, l); !bytes.HasPrefix(got, prefixBelow(as, 30)) {
				t.Fatal("earlier batches changed")
			}
			if _, err := l.AppendAsFollower(batch(tt.wantLEO, 1)); err != nil {
				t.Fatalf("next append: %v", err)
			}
		})
	}
}

func TestAppendOffsetErrorFields(t *testing.T) {
	m := openTestManager(t, vfs.NewMem(), truncConfig())
	l := createTestLog(t, m, truncConfig())
	if err := l.TruncateFullyAndStartAt(10); err != nil {
		t.Fatal(err)
	}
	// The leader's log start offset 10 lies inside its batch 8..12.
	in := bytes.Join([][]byte{stamp(batchOf(5, 1, 10), 8, 2), stamp(batchOf(2, 1, 10), 13, 2)}, nil)
	_, err := l.AppendAsFollower(in)
	var oe *AppendOffsetError
	if !errors.As(err, &oe) || !errors.Is(err, ErrUnexpectedAppendOffset) {
		t.Fatalf("got %v", err)
	}
	want := AppendOffsetError{Partition: l.tp, FirstOffset: 8, LastOffset: 14, LogStartOffset: 10, LogEndOffset: 10}
	if *oe != want {
		t.Fatalf("got %+v, want %+v", *oe, want)
	}
	// Kafka's recovery: start the log at the batch's base and append.
	if err := l.TruncateFullyAndStartAt(oe.FirstOffset); err != nil {
		t.Fatal(err)
	}
	if res, err := l.AppendAsFollower(in); err != nil || res.FirstOffset != 8 || l.LogEndOffset() != 15 {
		t.Fatalf("after starting at 8: %+v, %v", res, err)
	}
}

// TestAppendAsFollowerFarGap appends a batch whose offset is more than
// 2^31 past the active segment's base: a new segment starts at the batch,
// even if the active one is empty, so relative offsets fit.
func TestAppendAsFollowerFarGap(t *testing.T) {
	for _, prior := range []int{0, 2} {
		mem := vfs.NewMem()
		m := openTestManager(t, mem, truncConfig())
		l := createTestLog(t, m, truncConfig())
		var want []byte
		for i := range prior {
			want = append(want, mustAppend(t, l, batchOf(1, 1, 10), 0).data...)
			_ = i
		}
		far := int64(5_000_000_000)
		b := stamp(batchOf(3, 1, 10), far, 1)
		if _, err := l.AppendAsFollower(slices.Clone(b)); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
		if bases := segmentBases(l); bases[len(bases)-1] != far || l.LogEndOffset() != far+3 {
			t.Fatalf("segments %v, log end %d", segmentBases(l), l.LogEndOffset())
		}
		if got := readAll(t, l); !bytes.Equal(got, want) {
			t.Fatal("reads differ")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m2 := openTestManager(t, mem, truncConfig())
		l2, _ := m2.Log("orders", 0)
		if got := readAll(t, l2); !bytes.Equal(got, want) || l2.LogEndOffset() != far+3 {
			t.Fatal("reads differ after a restart")
		}
		m2.Close()
	}
}

func BenchmarkAppendAsFollower(b *testing.B) {
	m := openBenchManager(b, vfs.NewMem(), "/bench")
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 16 << 20
	batch := benchBatch()
	var l *Log
	newLog := func() {
		var err error
		if l, err = m.GetOrCreateLog("bench", 0, [16]byte{}, cfg); err != nil {
			b.Fatal(err)
		}
	}
	newLog()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i > 0 && i%4096 == 0 {
			b.StopTimer()
			if err := m.DeleteLog("bench", 0); err != nil {
				b.Fatal(err)
			}
			newLog()
			b.StartTimer()
		}
		protocol.SetBaseOffset(batch, l.LogEndOffset())
		if _, err := l.AppendAsFollower(batch); err != nil {
			b.Fatal(err)
		}
	}
}
