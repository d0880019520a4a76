package share

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

func (e *env) ackNow(member string, epoch int32, acks ...Ack) (int16, int16) {
	e.t.Helper()
	code, codes := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: member, Epoch: epoch, Acks: acks})
	return code, codes[e.ref()]
}

// TestAckRollbackLocalWrite: this node is the group's share coordinator
// and the append of the acknowledgement's snapshot fails. The
// acknowledgement answers the error and the share partition goes back to
// what it was: the accepted and released records are ACQUIRED by their
// member again (the released ones are not handed to another member), the
// start offset did not move, and the durable state served is what the
// log holds. Sent again once the log takes writes, it succeeds.
func TestAckRollbackLocalWrite(t *testing.T) {
	e := newEnv(t)
	e.join("a")
	e.join("b")
	if _, got := e.fetch("a", 0, 4, 4); !slices.Equal(got, []Acquired{{0, 3, 1}}) {
		t.Fatalf("a: %v", got)
	}
	e.store.SetFail(kerr.NotLeaderForPartition)
	top, code := e.ackNow("a", 1, Ack{Ref: e.ref(), Batches: []AckBatch{{First: 0, Last: 1, Types: []int8{ackAccept}}, {First: 2, Last: 3, Types: []int8{ackRelease}}}})
	if top != 0 || code != kerr.NotCoordinator.Code {
		t.Fatalf("ack with a failing log: %d, partition %v", top, kerr.ErrorForCode(code))
	}
	if st := e.state(); st.Start != 0 || st.InFlight["ACQUIRED"] != 4 || len(st.InFlight) != 1 {
		t.Fatalf("after the failed write: %+v, want 0-3 ACQUIRED", st)
	}
	if sum := e.c.ReadStateSummary(context.Background(), StateKey{Group: "g", TopicID: e.tid})(); sum.StartOffset != 0 {
		t.Fatalf("durable start after the failed write: %d", sum.StartOffset)
	}
	e.store.SetFail(nil)
	// b gets nothing of 0-3: they are still a's.
	if _, got := e.fetch("b", 0, 4, 4); len(got) != 0 {
		t.Fatalf("b acquired %v of a's records", got)
	}
	top, code = e.ackNow("a", 2, Ack{Ref: e.ref(), Batches: []AckBatch{{First: 0, Last: 1, Types: []int8{ackAccept}}, {First: 2, Last: 3, Types: []int8{ackRelease}}}})
	if top != 0 || code != 0 {
		t.Fatalf("ack sent again: %d %v", top, kerr.ErrorForCode(code))
	}
	if st := e.state(); st.Start != 2 || st.InFlight["AVAILABLE"] != 2 {
		t.Fatalf("after the ack: %+v", st)
	}
	e.reopen()
	if st := e.state(); st.Start != 2 || st.InFlight["AVAILABLE"] != 2 {
		t.Fatalf("after a reload: %+v", st)
	}
}

// failingPersister is a share coordinator on another node whose writes
// answer code while it is set.
type failingPersister struct {
	code   atomic.Int32
	writes atomic.Int32
}

func (p *failingPersister) ReadState(context.Context, StateKey, int32) State {
	return State{LeaderEpoch: -1}
}

func (p *failingPersister) InitializeState(context.Context, StateKey, int32, int64) int16 { return 0 }

func (p *failingPersister) WriteState(context.Context, StateKey, StateWrite) int16 {
	p.writes.Add(1)
	return int16(p.code.Load())
}

// TestAckRollbackPersister: the group's share coordinator is another node
// (a Persister) and WriteShareGroupState fails after its retries. The
// ShareAcknowledge and a ShareFetch's piggy-backed acknowledgements answer
// the error and roll back: the records stay ACQUIRED by the member, whose
// next acknowledgement of them succeeds.
func TestAckRollbackPersister(t *testing.T) {
	e := &env{t: t, clock: coordtest.NewFakeClock(), store: coordtest.NewMemStore(), tid: [16]byte{1}}
	p := &failingPersister{}
	cfg := DefaultConfig()
	cfg.StatePartitions = 1
	cfg.DeliveryCountLimit = 3
	cfg.Topics = fixedTopics{"t": {ID: e.tid, Partitions: 1}}
	cfg.Offsets = func(string, int32) (int64, int64, bool) { return 0, 0, true }
	cfg.Persister = p
	c, err := New(cfg, e.store, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c // partition 0 is not loaded: the state is the persister's
	if _, got := e.fetch("a", 0, 6, 6); !slices.Equal(got, []Acquired{{0, 5, 1}}) {
		t.Fatalf("a: %v", got)
	}
	p.code.Store(int32(kerr.CoordinatorNotAvailable.Code))
	if top, code := e.ackNow("a", 1, e.ack(0, 2, ackReject)); top != 0 || code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("ack: %d %v", top, kerr.ErrorForCode(code))
	}
	plan, _ := e.fetch("a", 2, 6, 6, e.ack(3, 5, ackAccept))
	if plan.AckErrors[e.ref()] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("piggy-backed ack: %+v", plan)
	}
	if st := e.state(); st.Start != 0 || st.InFlight["ACQUIRED"] != 6 {
		t.Fatalf("after the failed writes: %+v, want 0-5 ACQUIRED", st)
	}
	p.code.Store(0)
	if top, code := e.ackNow("a", 3, e.ack(0, 5, ackAccept)); top != 0 || code != 0 {
		t.Fatalf("ack sent again: %d %v", top, kerr.ErrorForCode(code))
	}
	if st := e.state(); st.Start != 6 || len(st.InFlight) != 0 {
		t.Fatalf("after the ack: %+v", st)
	}
	if p.writes.Load() < 3 {
		t.Fatalf("%d writes reached the persister", p.writes.Load())
	}
}

// TestRollbackKeepsNewerChanges: records an acknowledgement released are
// not acquired by another member while its write is in flight, and a
// rollback does not bring back records below a log start offset that
// moved past them.
func TestRollbackKeepsNewerChanges(t *testing.T) {
	ps := newPartitionState("t", 0, 0)
	now := coordtest.NewFakeClock().Now()
	got, _ := ps.acquire([]Batch{{First: 0, Last: 5}}, "a", 6, true, 100, 5, now)
	if !slices.Equal(got, []Acquired{{0, 5, 1}}) {
		t.Fatalf("acquire: %v", got)
	}
	undo := ps.acknowledge(0, 5, []int8{ackRelease}, 5, now)
	if got, _ := ps.acquire([]Batch{{First: 4, Last: 5}}, "b", 2, true, 100, 5, now); len(got) != 0 {
		t.Fatalf("b acquired %v of records whose release is being written", got)
	}
	ps.skipTo(2) // records 0-1 deleted from the log
	if !ps.rollback(undo) {
		t.Fatal("nothing rolled back")
	}
	if ps.start != 2 || ps.recs[0] != nil {
		t.Fatalf("after rollback: start %d, %+v", ps.start, ps.recs[0])
	}
	for off := int64(2); off <= 5; off++ {
		if r := ps.recs[off]; r.member != "a" || r.state != stateAcquired || r.writing {
			t.Fatalf("after rollback, offset %d: %+v", off, r)
		}
	}
	// Released again and written, they go to b.
	undo = ps.acknowledge(2, 5, []int8{ackRelease}, 5, now)
	if !ps.written(undo) {
		t.Fatal("nothing held")
	}
	if got, _ := ps.acquire([]Batch{{First: 2, Last: 5}}, "b", 4, true, 100, 5, now); !slices.Equal(got, []Acquired{{2, 5, 2}}) {
		t.Fatalf("b after the write: %v", got)
	}
}

// TestReleaseHeldUntilWritten: records a member released are handed to
// another member only once the release is written (Kafka's
// SharePartition acquires no record whose state transition is in
// progress), and a fetch waiting for them is woken then.
func TestReleaseHeldUntilWritten(t *testing.T) {
	e := newEnv(t)
	e.join("a")
	e.join("b")
	if _, got := e.fetch("a", 0, 4, 4); !slices.Equal(got, []Acquired{{0, 3, 1}}) {
		t.Fatalf("a: %v", got)
	}
	e.store.Gate.Set(true)
	done := make(chan int16, 1)
	go func() {
		_, code := e.ackNow("a", 1, e.ack(0, 3, ackRelease))
		done <- code
	}()
	for e.store.Held() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, got := e.fetch("b", 0, 4, 4); len(got) != 0 {
		t.Fatalf("b acquired %v while the release was being written", got)
	}
	if st := e.state(); st.InFlight["AVAILABLE"] != 4 {
		t.Fatalf("while the release is written: %+v", st)
	}
	e.store.Gate.Set(false)
	if code := <-done; code != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(code))
	}
	if _, got := e.fetch("b", 0, 4, 4); !slices.Equal(got, []Acquired{{0, 3, 2}}) {
		t.Fatalf("b after the write: %v", got)
	}
}
