package replica

import (
	"context"
	"testing"

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
