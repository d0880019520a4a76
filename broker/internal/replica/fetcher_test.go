package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/config"
)

// An update that comes after Close (a metadata change still being
// applied while the server shuts down) starts no fetcher: none may append
// to a log once Close has returned.
func TestUpdateAfterCloseStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config.Default()
	m := NewManager(Deps{Cfg: cfg, Ctx: ctx})
	p := &partition.Partition{Topic: "t"}
	p.Assign.Store(&partition.Assignment{Leader: cfg.NodeID + 1})

	m.Close()
	m.Update([]*partition.Partition{p}, nil)
	m.mu.Lock()
	n := len(m.fetchers)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d fetchers after an update following Close, want 0", n)
	}
}

// A leader that answers NOT_LEADER_FOR_PARTITION or UNKNOWN_LEADER_EPOCH
// (most often one that has not yet applied its new leadership) is asked
// again after 50 ms, ten times in a row at most; any other error waits
// the whole replica.fetch.backoff.ms.
func TestRetryAfterLeaderBehind(t *testing.T) {
	f := &fetcher{}
	const backoff = time.Second
	behind := errors.Join(errors.New("other partition"), fmt.Errorf("fetch t-0 from leader: %w", kerr.NotLeaderForPartition))
	quick := 0
	for i := range leaderBehindMaxRetries {
		if d := f.retryAfter(behind, backoff, &quick); d != leaderBehindRetry {
			t.Fatalf("try %d: wait %v, want %v", i, d, leaderBehindRetry)
		}
	}
	if d := f.retryAfter(behind, backoff, &quick); d != backoff {
		t.Fatalf("after %d quick tries: wait %v, want %v", leaderBehindMaxRetries, d, backoff)
	}
	quick = 0
	if d := f.retryAfter(fmt.Errorf("offset for leader epoch: %w", kerr.UnknownLeaderEpoch), backoff, &quick); d != leaderBehindRetry || quick != 1 {
		t.Fatalf("UNKNOWN_LEADER_EPOCH: wait %v (quick %d), want %v (1)", d, quick, leaderBehindRetry)
	}
	if d := f.retryAfter(kerr.FencedLeaderEpoch, backoff, &quick); d != backoff {
		t.Fatalf("FENCED_LEADER_EPOCH: wait %v, want %v", d, backoff)
	}
	if d := f.retryAfter(kerr.NotLeaderForPartition, 20*time.Millisecond, &quick); d != 20*time.Millisecond {
		t.Fatalf("a backoff shorter than the quick retry: wait %v, want 20ms", d)
	}
}

// Update hands each fetcher the partitions it was told about and no
// others: a partition keeps its follow state while its leader and epoch
// stay, moves when its leader changes, leaves when this node leads it or
// no longer hosts it, and a fetcher left with nothing stops.
func TestUpdateMovesOnlyWhatChanged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config.Default()
	self := cfg.NodeID
	m := NewManager(Deps{Cfg: cfg, Ctx: ctx, Go: func(func()) {}}) // no fetch loops
	part := func(leader, epoch int32) *partition.Partition {
		p := &partition.Partition{Topic: "t"}
		p.Assign.Store(&partition.Assignment{Leader: leader, LeaderEpoch: epoch})
		return p
	}
	follows := func() map[int32]int {
		m.mu.Lock()
		defer m.mu.Unlock()
		out := make(map[int32]int)
		for leader, f := range m.fetchers {
			out[leader] = f.size()
		}
		return out
	}
	state := func(leader int32, p *partition.Partition) *FollowState {
		m.mu.Lock()
		f := m.fetchers[leader]
		m.mu.Unlock()
		if f == nil {
			return nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.parts[p]
	}
	want := func(step string, w map[int32]int) {
		t.Helper()
		if got := follows(); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s: fetchers follow %v, want %v", step, got, w)
		}
	}

	a, b, c := part(self+1, 1), part(self+2, 1), part(self, 1)
	m.Update([]*partition.Partition{a, b, c}, nil)
	want("start", map[int32]int{self + 1: 1, self + 2: 1})
	stA := state(self+1, a)
	stA.Truncated = true

	// b's leader moves to a's; a is not in the change and keeps its state.
	oldB := m.fetchers[self+2]
	b.Assign.Store(&partition.Assignment{Leader: self + 1, LeaderEpoch: 2})
	m.Update([]*partition.Partition{b}, nil)
	want("b moved", map[int32]int{self + 1: 2})
	if oldB.ctx.Err() == nil {
		t.Fatal("the fetcher left with nothing still runs")
	}
	if state(self+1, a) != stA {
		t.Fatal("a lost its follow state in a change that did not touch it")
	}

	// The same assignment again keeps the state; a new epoch starts over.
	m.Update([]*partition.Partition{a}, nil)
	if st := state(self+1, a); st != stA || !st.Truncated {
		t.Fatal("a lost its follow state at an unchanged epoch")
	}
	a.Assign.Store(&partition.Assignment{Leader: self + 1, LeaderEpoch: 2})
	m.Update([]*partition.Partition{a}, nil)
	if st := state(self+1, a); st == stA || st.Epoch != 2 || st.Truncated {
		t.Fatalf("a at a new epoch: state %+v, want a fresh one at epoch 2", st)
	}

	// This node leads b now; a is no longer hosted.
	b.Assign.Store(&partition.Assignment{Leader: self, LeaderEpoch: 3})
	m.Update([]*partition.Partition{b}, nil)
	want("b led here", map[int32]int{self + 1: 1})
	m.Update(nil, []*partition.Partition{a})
	want("a gone", map[int32]int{})
	m.mu.Lock()
	n := len(m.following)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d partitions still recorded as followed", n)
	}
}
