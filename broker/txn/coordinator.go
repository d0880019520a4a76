package txn

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync/atomic"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Deps is what the coordinator needs from the broker.
type Deps struct {
	// Store appends to __transaction_state partitions.
	Store Store
	// Markers writes transaction markers to partition leaders.
	Markers MarkerWriter
	// AllocateProducerID hands out a new producer id, unique in the cluster
	// (from the blocks recorded in the metadata log). It may block.
	AllocateProducerID func(ctx context.Context) (int64, error)
	// PartitionForGroup returns the __consumer_offsets partition of a group
	// (the group coordinator's PartitionFor), for AddOffsetsToTxn.
	PartitionForGroup func(groupID string) int32
	// PartitionExists reports whether a topic partition exists in the
	// cluster's metadata. AddPartitionsToTxn answers
	// UNKNOWN_TOPIC_OR_PARTITION for those that do not, as Kafka checks its
	// metadata cache. It is called on the requesting goroutine, so it must
	// be safe for concurrent use. Optional: nil skips the check.
	PartitionExists func(topic string, partition int32) bool
	// Clock is the source of time; coord.SystemClock in production.
	Clock Clock
}

// Coordinator is the transaction coordinator of one broker. It serves the
// transactional ids of the __transaction_state partitions loaded into it.
// Its methods block the calling goroutine until the answer is ready (an
// EndTxn waits until its PrepareCommit is durable) and never block the
// shards; when ctx ends first they answer COORDINATOR_NOT_AVAILABLE, and
// once Close has begun NOT_COORDINATOR.
type Coordinator struct {
	cfg       Config
	deps      Deps
	log       *slog.Logger
	rt        *coord.Runtime[timerKey, *machine]
	completed Completed
}

// Completed counts the transactions a coordinator completed (their
// CompleteCommit or CompleteAbort written), for the broker's metrics.
type Completed struct {
	commits, aborts atomic.Int64
}

// count counts a transition to state that is durable.
func (c *Completed) count(state txnState) {
	switch {
	case c == nil:
	case state == stateCompleteCommit:
		c.commits.Add(1)
	case state == stateCompleteAbort:
		c.aborts.Add(1)
	}
}

// Completed returns how many transactions this coordinator committed and
// aborted since it started (markers written and the outcome recorded),
// including aborts of transactions that timed out.
func (c *Coordinator) Completed() (commits, aborts int64) {
	return c.completed.commits.Load(), c.completed.aborts.Load()
}

// New starts a coordinator with cfg's shards. It serves no transactional id
// until Load.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("transaction coordinator config: %w", err)
	}
	switch {
	case deps.Store == nil, deps.Markers == nil, deps.Clock == nil:
		return nil, fmt.Errorf("transaction coordinator needs a store, a marker writer and a clock")
	case deps.AllocateProducerID == nil || deps.PartitionForGroup == nil:
		return nil, fmt.Errorf("transaction coordinator needs a producer id allocator and the group partitioner")
	}
	log := coord.Logger(cfg.Logger, "transaction-coordinator")
	c := &Coordinator{cfg: cfg, deps: deps, log: log}
	rtCfg := coord.Config{
		Name:       "transaction coordinator",
		Topic:      TransactionStateTopic,
		Partitions: cfg.TransactionStateTopicPartitions,
		Shards:     cfg.Shards,
		Store:      deps.Store,
		Timeout:    ms(cfg.RequestTimeoutMs), // bounds each append, marker write and allocation
		Clock:      deps.Clock,
		Log:        log,
	}
	c.rt = coord.NewRuntime(rtCfg, func(s *shard) *machine {
		return newMachine(cfg, log, deps, shardEffects{s, deps.Markers, deps.AllocateProducerID}, &c.completed)
	})
	c.rt.Start((*machine).start)
	return c, nil
}

// Close stops every shard, its timers, appends, marker writes and
// allocations, and answers the requests still waiting with NOT_COORDINATOR.
func (c *Coordinator) Close() { c.rt.Close() }

// PartitionFor returns the __transaction_state partition of a
// transactional id under this coordinator's
// transaction.state.log.num.partitions.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return c.rt.PartitionFor(transactionalID)
}

// Pending is an answer the coordinator owes (see coord.Pending): the
// request was queued on its shard before the method returned, so a
// connection's requests take effect in the order they came.
type Pending[T any] = coord.Pending[T]

// Load replays a __transaction_state partition the broker now leads, at
// the partition's leader epoch coordinatorEpoch, and then serves its
// transactional ids; transactions found in PrepareCommit or PrepareAbort
// get their markers sent again and are completed. Requests for its ids
// answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. Records are decoded on the
// caller's goroutine; a record that does not decode fails the load and
// leaves the partition unserved.
func (c *Coordinator) Load(ctx context.Context, partition, coordinatorEpoch int32, records iter.Seq2[Record, error]) error {
	var txns map[string]*txnMeta
	n := 0
	err := c.rt.Load(ctx, partition, coord.LoadSteps[*machine]{
		Begin: func(m *machine) uint64 { return m.beginLoad(partition) },
		Replay: func() (err error) {
			txns, err = replay(partition, records, c.log)
			n = len(txns) // counted before the shard owns the map
			return err
		},
		Abort: func(m *machine, token uint64) { m.abortLoad(partition, token) },
		Finish: func(m *machine, token uint64) bool {
			return m.finishLoad(partition, token, coordinatorEpoch, txns)
		},
	})
	if err != nil {
		return err
	}
	c.log.Debug("loaded __transaction_state partition", "partition", partition, "epoch", coordinatorEpoch, "transactional_ids", n)
	return nil
}

// Unload stops serving a partition the broker no longer leads and stops
// sending its transactions' markers; the new coordinator finishes them.
func (c *Coordinator) Unload(partition int32) {
	c.rt.Unload(partition, func(m *machine) { m.unload(partition) })
}
