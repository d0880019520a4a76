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

// A reconcile that comes after Close (a metadata change still being
// applied while the server shuts down) starts no fetcher: none may append
// to a log once Close has returned.
func TestReconcileAfterCloseStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config.Default()
	m := NewManager(Deps{Cfg: cfg, Ctx: ctx})
	p := &partition.Partition{Topic: "t"}
	p.Assign.Store(&partition.Assignment{Leader: cfg.NodeID + 1})

	m.Close()
	m.Reconcile([]*partition.Partition{p})
	m.mu.Lock()
	n := len(m.fetchers)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d fetchers after a reconcile following Close, want 0", n)
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
