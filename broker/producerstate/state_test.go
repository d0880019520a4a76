package producerstate

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// batch builds a BatchInfo of n records from base, wrapping as Kafka.
func batch(pid int64, epoch int16, base int32, n int32) BatchInfo {
	return BatchInfo{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: base, LastSequence: LastSequence(base, n-1), NumRecords: n}
}

func txnBatch(pid int64, epoch int16, base int32, n int32) BatchInfo {
	b := batch(pid, epoch, base, n)
	b.IsTransactional = true
	return b
}

// log is a partition log in miniature: it checks and appends batches,
// assigning offsets and timestamps, and remembers what it appended.
type log struct {
	s    *State
	next int64
	ts   int64
	recs []appended
}

type appended struct {
	b           BatchInfo
	first, last int64
	ts          int64
}

func newLog() *log { return &log{s: New(), next: 100, ts: 1000} }

// append checks b and, when accepted and not a duplicate, appends it.
func (l *log) append(b BatchInfo) (*Duplicate, error) {
	dup, err := l.s.Check(b)
	if err != nil || dup != nil {
		return dup, err
	}
	first, last := l.next, l.next+int64(b.NumRecords)-1
	l.ts++
	l.s.Update(b, first, last, l.ts)
	l.recs = append(l.recs, appended{b: b, first: first, last: last, ts: l.ts})
	l.next = last + 1
	return nil, nil
}

func (l *log) mustAppend(t *testing.T, bs ...BatchInfo) {
	t.Helper()
	for _, b := range bs {
		dup, err := l.append(b)
		if err != nil || dup != nil {
			t.Fatalf("append %+v: dup %+v err %v", b, dup, err)
		}
	}
}

func code(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestCheck(t *testing.T) {
	const pid = 4000
	const maxSeq = math.MaxInt32
	fiveBatches := []BatchInfo{batch(pid, 1, 0, 3), batch(pid, 1, 3, 2), batch(pid, 1, 5, 1), batch(pid, 1, 6, 4), batch(pid, 1, 10, 5), batch(pid, 1, 15, 2)}
	tests := []struct {
		name    string
		setup   []BatchInfo
		marker  *Marker // applied after setup
		probe   BatchInfo
		wantErr *kerr.Error
		wantDup int // index into setup of the batch it duplicates, -1 for none
	}{
		{name: "no producer id", probe: BatchInfo{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1, NumRecords: 1}, wantDup: -1},
		{name: "unknown producer at sequence 0", probe: batch(pid, 0, 0, 1), wantDup: -1},
		{name: "unknown producer at any sequence (KIP-360)", probe: batch(pid, 7, 42, 3), wantDup: -1},
		{name: "in sequence", setup: fiveBatches[:2], probe: batch(pid, 1, 5, 1), wantDup: -1},
		{name: "gap", setup: fiveBatches[:2], probe: batch(pid, 1, 6, 1), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "sequence going back, not a cached range", setup: fiveBatches[:2], probe: batch(pid, 1, 1, 2), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "same first sequence, other last", setup: fiveBatches[:2], probe: batch(pid, 1, 3, 1), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "duplicate of the last batch", setup: fiveBatches, probe: fiveBatches[5], wantDup: 5},
		{name: "duplicate of the 2nd last", setup: fiveBatches, probe: fiveBatches[4], wantDup: 4},
		{name: "duplicate of the 3rd last", setup: fiveBatches, probe: fiveBatches[3], wantDup: 3},
		{name: "duplicate of the 4th last", setup: fiveBatches, probe: fiveBatches[2], wantDup: 2},
		{name: "duplicate of the 5th last", setup: fiveBatches, probe: fiveBatches[1], wantDup: 1},
		{name: "6th last is forgotten", setup: fiveBatches, probe: fiveBatches[0], wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "duplicate needs the same epoch", setup: fiveBatches, probe: batch(pid, 2, 15, 2), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "older epoch is fenced", setup: []BatchInfo{batch(pid, 3, 0, 1)}, probe: batch(pid, 2, 1, 1), wantErr: kerr.InvalidProducerEpoch, wantDup: -1},
		{name: "older epoch at sequence 0 is fenced", setup: []BatchInfo{batch(pid, 3, 0, 1)}, probe: batch(pid, 2, 0, 1), wantErr: kerr.InvalidProducerEpoch, wantDup: -1},
		{name: "retry of the old epoch's batch after a bump", setup: []BatchInfo{batch(pid, 1, 0, 1), batch(pid, 2, 0, 1)}, probe: batch(pid, 1, 0, 1), wantErr: kerr.InvalidProducerEpoch, wantDup: -1},
		{name: "epoch bump at sequence 0", setup: fiveBatches[:3], probe: batch(pid, 2, 0, 4), wantDup: -1},
		{name: "epoch bump at another sequence", setup: fiveBatches[:3], probe: batch(pid, 2, 6, 1), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "epoch jump by more than one", setup: fiveBatches[:3], probe: batch(pid, 9, 0, 1), wantDup: -1},
		{name: "wrap after MaxInt32", setup: []BatchInfo{batch(pid, 0, maxSeq-4, 5)}, probe: batch(pid, 0, 0, 1), wantDup: -1},
		{name: "no wrap to 1", setup: []BatchInfo{batch(pid, 0, maxSeq-4, 5)}, probe: batch(pid, 0, 1, 1), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "batch wrapping inside", setup: []BatchInfo{batch(pid, 0, maxSeq-1, 4)}, probe: batch(pid, 0, 2, 1), wantDup: -1},
		{name: "duplicate of a wrapping batch", setup: []BatchInfo{batch(pid, 0, maxSeq-3, 2), batch(pid, 0, maxSeq-1, 4)}, probe: batch(pid, 0, maxSeq-1, 4), wantDup: 1},
		{name: "same epoch with no batch needs sequence 0", setup: []BatchInfo{batch(pid, 1, 0, 1)}, marker: &Marker{ProducerID: pid, ProducerEpoch: 2, TransactionVersion: 2}, probe: batch(pid, 2, 3, 1), wantErr: kerr.OutOfOrderSequenceNumber, wantDup: -1},
		{name: "same epoch with no batch at sequence 0", setup: []BatchInfo{batch(pid, 1, 0, 1)}, marker: &Marker{ProducerID: pid, ProducerEpoch: 2, TransactionVersion: 2}, probe: batch(pid, 2, 0, 1), wantDup: -1},
		{name: "non-transactional during a transaction", setup: []BatchInfo{txnBatch(pid, 0, 0, 2)}, probe: batch(pid, 0, 2, 1), wantErr: kerr.InvalidTxnState, wantDup: -1},
		{name: "transactional during a transaction", setup: []BatchInfo{txnBatch(pid, 0, 0, 2)}, probe: txnBatch(pid, 0, 2, 1), wantDup: -1},
		{name: "last sequence disagrees with the count", probe: BatchInfo{ProducerID: pid, BaseSequence: 0, LastSequence: 5, NumRecords: 2}, wantErr: kerr.InvalidRecord, wantDup: -1},
		{name: "no records", probe: BatchInfo{ProducerID: pid, BaseSequence: 0, LastSequence: -1, NumRecords: 0}, wantErr: kerr.InvalidRecord, wantDup: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog()
			l.mustAppend(t, tt.setup...)
			if tt.marker != nil {
				if err := l.s.CheckMarker(*tt.marker); err != nil {
					t.Fatal(err)
				}
				l.s.ApplyMarker(*tt.marker, l.next, l.ts)
				l.next++
			}
			before := l.s.Producers()
			dup, err := l.append(tt.probe)
			if tt.wantErr != nil {
				if code(err) != tt.wantErr.Code {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if !reflect.DeepEqual(l.s.Producers(), before) {
					t.Fatalf("a refused batch changed the state: %+v, was %+v", l.s.Producers(), before)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantDup < 0 {
				if dup != nil {
					t.Fatalf("duplicate %+v, want none", dup)
				}
				if tt.probe.ProducerID < 0 {
					if l.s.Len() != 0 {
						t.Fatalf("state for a batch without producer id: %+v", l.s.Producers())
					}
					return
				}
				p, ok := l.s.Producer(tt.probe.ProducerID)
				if !ok || p.Epoch != tt.probe.ProducerEpoch || p.LastSequence != tt.probe.LastSequence || p.LastTimestamp != l.ts {
					t.Fatalf("after append: %+v ok=%v, want epoch %d last seq %d ts %d", p, ok, tt.probe.ProducerEpoch, tt.probe.LastSequence, l.ts)
				}
				return
			}
			orig := l.recs[tt.wantDup]
			want := Duplicate{FirstOffset: orig.first, LastOffset: orig.last, Timestamp: orig.ts}
			if dup == nil || *dup != want {
				t.Fatalf("duplicate = %+v, want %+v", dup, want)
			}
		})
	}
}

func TestUpdateKeepsFiveBatches(t *testing.T) {
	l := newLog()
	for i := int32(0); i < 8; i++ {
		l.mustAppend(t, batch(1, 0, i*2, 2))
	}
	got := l.s.Batches(1)
	if len(got) != NumBatchesToRetain {
		t.Fatalf("%d batches kept, want %d", len(got), NumBatchesToRetain)
	}
	for i, m := range got {
		r := l.recs[3+i]
		want := BatchMetadata{LastSeq: r.b.LastSequence, LastOffset: r.last, OffsetDelta: int32(r.last - r.first), Timestamp: r.ts}
		if m != want || m.FirstSeq() != r.b.BaseSequence || m.FirstOffset() != r.first {
			t.Fatalf("batch %d = %+v, want %+v", i, m, want)
		}
	}
	// A new epoch forgets the old epoch's batches.
	l.mustAppend(t, batch(1, 1, 0, 1))
	if got := l.s.Batches(1); len(got) != 1 || got[0].LastSeq != 0 {
		t.Fatalf("after epoch bump: %+v", got)
	}
}

func TestLastSequence(t *testing.T) {
	tests := []struct{ base, delta, want int32 }{
		{0, 0, 0},
		{5, 3, 8},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
		{-1, 4, -1},
	}
	for _, tt := range tests {
		if got := LastSequence(tt.base, tt.delta); got != tt.want {
			t.Errorf("LastSequence(%d, %d) = %d, want %d", tt.base, tt.delta, got, tt.want)
		}
		if tt.base >= 0 {
			if got := decrementSequence(tt.want, tt.delta); got != tt.base {
				t.Errorf("decrementSequence(%d, %d) = %d, want %d", tt.want, tt.delta, got, tt.base)
			}
		}
	}
}

func TestExpireProducers(t *testing.T) {
	s := New()
	s.Update(batch(1, 0, 0, 1), 0, 0, 1000)
	s.Update(batch(2, 0, 0, 1), 1, 1, 5000)
	s.Update(txnBatch(3, 0, 0, 1), 2, 2, 1000) // open transaction: kept
	tests := []struct {
		now     int64
		removed int
		left    []int64
	}{
		{now: 1999, removed: 0, left: []int64{1, 2, 3}},
		{now: 2000, removed: 1, left: []int64{2, 3}}, // idle exactly expirationMs: expired, as Kafka's >=
		{now: 5999, removed: 0, left: []int64{2, 3}},
		{now: 1 << 40, removed: 1, left: []int64{3}},
	}
	for _, tt := range tests {
		if n := s.ExpireProducers(tt.now, 1000); n != tt.removed {
			t.Fatalf("now %d: removed %d, want %d", tt.now, n, tt.removed)
		}
		var left []int64
		for _, p := range s.Producers() {
			left = append(left, p.ProducerID)
		}
		if !reflect.DeepEqual(left, tt.left) {
			t.Fatalf("now %d: left %v, want %v", tt.now, left, tt.left)
		}
	}
	// Once its transaction ends, the producer can expire.
	s.ApplyMarker(Marker{ProducerID: 3, Commit: true}, 3, 1000)
	if n := s.ExpireProducers(1<<40, 1000); n != 1 || s.Len() != 0 {
		t.Fatalf("after commit: removed %d, left %d", n, s.Len())
	}
}

func TestTransactionsAndLSO(t *testing.T) {
	l := newLog()
	if _, ok := l.s.LastStableOffsetFirst(); ok {
		t.Fatal("LSO bound with no transaction")
	}
	l.mustAppend(t, txnBatch(1, 0, 0, 2)) // offsets 100-101
	l.mustAppend(t, batch(2, 0, 0, 1))    // 102, not transactional
	l.mustAppend(t, txnBatch(3, 5, 0, 1)) // 103
	l.mustAppend(t, txnBatch(1, 0, 2, 1)) // 104, same transaction
	if off, ok := l.s.LastStableOffsetFirst(); !ok || off != 100 {
		t.Fatalf("first undecided = %d %v, want 100", off, ok)
	}
	m := Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 7, Commit: true}
	if err := l.s.CheckMarker(m); err != nil {
		t.Fatal(err)
	}
	txn, ok := l.s.ApplyMarker(m, 105, 2000)
	if want := (CompletedTxn{ProducerID: 1, FirstOffset: 100, LastOffset: 105}); !ok || txn != want {
		t.Fatalf("completed %+v %v, want %+v", txn, ok, want)
	}
	if off, ok := l.s.LastStableOffsetFirst(); !ok || off != 103 {
		t.Fatalf("first undecided = %d %v, want 103", off, ok)
	}
	p, _ := l.s.Producer(1)
	want := ProducerInfo{ProducerID: 1, Epoch: 0, LastSequence: 2, LastTimestamp: 2000, CoordinatorEpoch: 7, CurrentTxnStartOffset: -1}
	if p != want {
		t.Fatalf("producer 1 = %+v, want %+v", p, want)
	}
	// A marker with no transaction open ends nothing.
	if _, ok := l.s.ApplyMarker(Marker{ProducerID: 2, CoordinatorEpoch: 7}, 106, 2001); ok {
		t.Fatal("marker without a transaction completed one")
	}
	txn, ok = l.s.ApplyMarker(Marker{ProducerID: 3, ProducerEpoch: 5, CoordinatorEpoch: 7}, 107, 2002)
	if !ok || !txn.Aborted || txn.FirstOffset != 103 {
		t.Fatalf("abort: %+v %v", txn, ok)
	}
	if _, ok := l.s.LastStableOffsetFirst(); ok {
		t.Fatal("LSO still bound after every transaction ended")
	}
}

func TestCheckMarker(t *testing.T) {
	s := New()
	s.Update(txnBatch(1, 4, 0, 1), 0, 0, 10)
	s.ApplyMarker(Marker{ProducerID: 2, ProducerEpoch: 4, CoordinatorEpoch: 3}, 1, 10) // producer 2: epoch 4, no txn
	tests := []struct {
		name string
		m    Marker
		want *kerr.Error
	}{
		{"unknown producer", Marker{ProducerID: 9, ProducerEpoch: 0}, nil},
		{"same epoch TV1", Marker{ProducerID: 1, ProducerEpoch: 4}, nil},
		{"older epoch TV1", Marker{ProducerID: 1, ProducerEpoch: 3}, kerr.InvalidProducerEpoch},
		{"newer epoch TV2", Marker{ProducerID: 1, ProducerEpoch: 5, TransactionVersion: 2}, nil},
		{"same epoch TV2 with a transaction open", Marker{ProducerID: 1, ProducerEpoch: 4, TransactionVersion: 2}, kerr.InvalidProducerEpoch},
		{"same epoch TV2 retry, transaction ended", Marker{ProducerID: 2, ProducerEpoch: 4, CoordinatorEpoch: 3, TransactionVersion: 2}, nil},
		{"older epoch TV2", Marker{ProducerID: 2, ProducerEpoch: 3, CoordinatorEpoch: 3, TransactionVersion: 2}, kerr.InvalidProducerEpoch},
		{"older coordinator epoch", Marker{ProducerID: 2, ProducerEpoch: 4, CoordinatorEpoch: 2}, kerr.TransactionCoordinatorFenced},
		{"newer coordinator epoch", Marker{ProducerID: 2, ProducerEpoch: 4, CoordinatorEpoch: 9}, nil},
	}
	for _, tt := range tests {
		err := s.CheckMarker(tt.m)
		if (tt.want == nil && err != nil) || (tt.want != nil && code(err) != tt.want.Code) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestReplayEqualsLive appends a random history, then rebuilds the state
// twice: by replaying the whole log, and from a snapshot taken midway plus
// the log after it. Both must agree with the live state.
func TestReplayEqualsLive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 20; round++ {
		l := newLog()
		type prod struct {
			epoch int16
			seq   int32
			txn   bool
		}
		prods := map[int64]*prod{}
		snapAt, snapLen := -1, 0
		var snap []byte
		for i := 0; i < 300; i++ {
			if i == 150 {
				snap, snapAt, snapLen = l.s.EncodeSnapshot(), int(l.next), len(l.recs)
			}
			id := int64(rng.IntN(6))
			p := prods[id]
			if p == nil {
				p = &prod{seq: int32(rng.IntN(3)) * (math.MaxInt32 / 2)}
				prods[id] = p
			}
			switch r := rng.IntN(20); {
			case r == 0:
				p.epoch++
				p.seq = 0
			case r == 1 && p.txn:
				m := Marker{ProducerID: id, ProducerEpoch: p.epoch, Commit: rng.IntN(2) == 0}
				l.s.ApplyMarker(m, l.next, l.ts)
				l.recs = append(l.recs, appended{b: BatchInfo{ProducerID: -2 - id, ProducerEpoch: p.epoch}, first: l.next, last: l.next, ts: l.ts})
				l.next++
				p.txn = false
				continue
			}
			n := int32(1 + rng.IntN(4))
			b := batch(id, p.epoch, p.seq, n)
			b.IsTransactional = p.txn || (id%2 == 0 && rng.IntN(4) == 0)
			p.txn = b.IsTransactional
			l.mustAppend(t, b)
			p.seq = LastSequence(p.seq, n)
		}
		replay := func(s *State, recs []appended) {
			for _, r := range recs {
				if r.b.ProducerID <= -2 { // a marker
					s.ApplyMarker(Marker{ProducerID: -2 - r.b.ProducerID, ProducerEpoch: r.b.ProducerEpoch}, r.first, r.ts)
					continue
				}
				s.Replay(r.b, r.first, r.last, r.ts)
			}
		}
		full := New()
		replay(full, l.recs)
		fromSnap, err := DecodeSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		replay(fromSnap, l.recs[snapLen:])
		live := l.s.Producers()
		if got := full.Producers(); !reflect.DeepEqual(got, live) {
			t.Fatalf("round %d: full replay %+v, live %+v", round, got, live)
		}
		if got := fromSnap.Producers(); !reflect.DeepEqual(got, live) {
			t.Fatalf("round %d: snapshot at %d + replay %+v, live %+v", round, snapAt, got, live)
		}
		o1, ok1 := l.s.LastStableOffsetFirst()
		o2, ok2 := fromSnap.LastStableOffsetFirst()
		if o1 != o2 || ok1 != ok2 {
			t.Fatalf("round %d: first undecided %d %v live, %d %v rebuilt", round, o2, ok2, o1, ok1)
		}
		for id := range prods {
			lb := l.s.Batches(id)
			if got := full.Batches(id); !reflect.DeepEqual(got, lb) {
				t.Fatalf("round %d producer %d: full replay batches %+v, live %+v", round, id, got, lb)
			}
			// The snapshot keeps one batch per producer, so the rebuilt
			// state knows a suffix of the live batches.
			got := fromSnap.Batches(id)
			if len(got) > len(lb) || !reflect.DeepEqual(got, lb[len(lb)-len(got):]) {
				t.Fatalf("round %d producer %d: rebuilt batches %+v are not a suffix of %+v", round, id, got, lb)
			}
		}
	}
}

func BenchmarkCheckUpdate(b *testing.B) {
	s := New()
	const producers = 64
	seqs := make([]int32, producers)
	off := int64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := int64(i % producers)
		bi := batch(id, 0, seqs[id], 10)
		dup, err := s.Check(bi)
		if err != nil || dup != nil {
			b.Fatalf("check: %v %v", dup, err)
		}
		s.Update(bi, off, off+9, int64(i))
		off += 10
		seqs[id] = LastSequence(seqs[id], 10)
	}
}
