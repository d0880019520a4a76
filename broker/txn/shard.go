package txn

import (
	"context"

	"github.com/gregorbroker/gregor/broker/coord"
)

// shard is one coordinator goroutine of the runtime, owning a machine: the
// transactional ids of the __transaction_state partitions mapped to it and
// the markers it is sending.
type shard = coord.Shard[timerKey, *machine]

// shardEffects carries out a machine's effects on its shard: timers and
// appends are the runtime's; producer id allocations and marker writes run
// through the runtime's Go, bounded by the request timeout like appends.
type shardEffects struct {
	*shard
	markers MarkerWriter
	alloc   func(context.Context) (int64, error)
}

// allocateProducerID implements effects.
func (fx shardEffects) allocateProducerID(done func(int64, error)) {
	fx.Go(func(ctx context.Context) func() {
		// A block still missing at the timeout answers
		// COORDINATOR_LOAD_IN_PROGRESS (allocErrorCode), which clients retry.
		id, err := fx.alloc(ctx)
		return func() { done(id, err) }
	})
}

// writeMarkers implements effects.
func (fx shardEffects) writeMarkers(markers []Marker, done func([][]error)) {
	fx.Go(func(ctx context.Context) func() {
		res := fx.markers.WriteMarkers(ctx, markers)
		for _, errs := range res {
			for i, err := range errs {
				errs[i] = fx.TimedOut(ctx, err)
			}
		}
		return func() { done(res) }
	})
}
