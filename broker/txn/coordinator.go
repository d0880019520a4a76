package txn

import (
	"context"
	"fmt"
	"github.com/gregorbroker/gregor/broker/group"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// Clock is the source of time; group.SystemClock in production.
	Clock Clock
}

// Coordinator is the transaction coordinator of one broker. It serves the
// transactional ids of the __transaction_state partitions loaded into it.
// Its methods block the calling goroutine until the answer is ready (an
// EndTxn waits until its PrepareCommit is durable) and never block the
// shards; when ctx ends first they answer COORDINATOR_NOT_AVAILABLE, and
// once Close has begun NOT_COORDINATOR.
type Coordinator struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	shards []*shard

	// Operations handed to shards and answered by them: tests wait on
	// these to know which requests are parked.
	posted, answered atomic.Int64

	closeOnce sync.Once
	closed    chan struct{}
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
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "transaction-coordinator")
	c := &Coordinator{cfg: cfg, deps: deps, log: log, closed: make(chan struct{})}
	for i := range cfg.Shards {
		c.shards = append(c.shards, newShard(i, cfg, log, deps))
	}
	for _, s := range c.shards {
		go s.run()
	}
	return c, nil
}

// Close stops every shard, its timers, appends, marker writes and
// allocations, and answers the requests still waiting with NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		for _, s := range c.shards {
			s.stop()
		}
	})
}

// PartitionFor returns the __transaction_state partition of a
// transactional id under this coordinator's
// transaction.state.log.num.partitions.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return PartitionFor(transactionalID, c.cfg.TransactionStateTopicPartitions)
}

func (c *Coordinator) shardOf(partition int32) *shard {
	return c.shards[int(partition)%len(c.shards)]
}

func (c *Coordinator) shardFor(transactionalID string) *shard {
	return c.shardOf(c.PartitionFor(transactionalID))
}

// Pending is an answer the coordinator owes (see group.Pending): the
// request was queued on its shard before the method returned, so a
// connection's requests take effect in the order they came.
type Pending[T any] = group.Pending[T]

// ready is a Pending whose answer is already known.
func ready[T any](v T) Pending[T] { return func() T { return v } }

// then is p's answer passed through f.
func then[T, U any](p Pending[T], f func(T) U) Pending[U] { return func() U { return f(p()) } }

// submit queues op on a shard at once and returns the wait for the reply it
// sends. The reply channel holds one answer and extra sends are dropped, so
// the shard never blocks on a caller that went away. fail builds the answer
// when the shard or the caller's context ends first.
func submit[T any](c *Coordinator, ctx context.Context, s *shard, op func(m *machine, reply func(T)), fail func(code int16) T) Pending[T] {
	ch := make(chan T, 1)
	reply := func(v T) {
		select {
		case ch <- v:
			c.answered.Add(1)
		default:
		}
	}
	run := func() {
		defer func() {
			// A panic is a bug; the caller still gets an answer.
			if r := recover(); r != nil {
				c.log.Error("transaction coordinator panic", "shard", s.idx, "panic", r)
				reply(fail(errUnknownServerError))
			}
		}()
		op(s.m, reply)
	}
	if !s.post(ctx, run) {
		return ready(fail(c.failCode()))
	}
	c.posted.Add(1)
	return func() T {
		select {
		case v := <-ch:
			return v
		case <-ctx.Done():
			return fail(errCoordinatorNotAvailable)
		case <-c.closed:
			// The shard may have answered just before it stopped.
			select {
			case v := <-ch:
				return v
			default:
				return fail(errNotCoordinator)
			}
		}
	}
}

// call runs op on a shard and waits for its reply.
func call[T any](c *Coordinator, ctx context.Context, s *shard, op func(m *machine, reply func(T)), fail func(code int16) T) T {
	return submit(c, ctx, s, op, fail)()
}

func (c *Coordinator) failCode() int16 {
	select {
	case <-c.closed:
		return errNotCoordinator
	default:
		return errCoordinatorNotAvailable
	}
}

// Load replays a __transaction_state partition the broker now leads, at
// the partition's leader epoch coordinatorEpoch, and then serves its
// transactional ids; transactions found in PrepareCommit or PrepareAbort
// get their markers sent again and are completed. Requests for its ids
// answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. Records are decoded on the
// caller's goroutine; a record that does not decode fails the load and
// leaves the partition unserved.
func (c *Coordinator) Load(ctx context.Context, partition, coordinatorEpoch int32, records iter.Seq2[Record, error]) error {
	if partition < 0 || partition >= c.cfg.TransactionStateTopicPartitions {
		return fmt.Errorf("load %s-%d: partition out of range [0, %d)", TransactionStateTopic, partition, c.cfg.TransactionStateTopicPartitions)
	}
	s := c.shardOf(partition)
	tokens := make(chan uint64, 1)
	if !s.post(ctx, func() { tokens <- s.m.beginLoad(partition) }) {
		return fmt.Errorf("load %s-%d: coordinator stopped", TransactionStateTopic, partition)
	}
	var token uint64
	select {
	case token = <-tokens:
	case <-c.closed:
		return fmt.Errorf("load %s-%d: coordinator stopped", TransactionStateTopic, partition)
	}
	txns, err := replay(partition, records, c.log)
	if err != nil {
		s.post(context.Background(), func() { s.m.abortLoad(partition, token) })
		return err
	}
	n := len(txns) // counted before the shard owns the map
	installed := make(chan bool, 1)
	if !s.post(context.Background(), func() { installed <- s.m.finishLoad(partition, token, coordinatorEpoch, txns) }) {
		return fmt.Errorf("load %s-%d: coordinator stopped", TransactionStateTopic, partition)
	}
	select {
	case ok := <-installed:
		if !ok {
			return fmt.Errorf("load %s-%d: unloaded while loading", TransactionStateTopic, partition)
		}
		c.log.Debug("loaded __transaction_state partition", "partition", partition, "epoch", coordinatorEpoch, "transactional_ids", n)
		return nil
	case <-c.closed:
		return fmt.Errorf("load %s-%d: coordinator stopped", TransactionStateTopic, partition)
	}
}

// Unload stops serving a partition the broker no longer leads and stops
// sending its transactions' markers; the new coordinator finishes them.
func (c *Coordinator) Unload(partition int32) {
	if partition < 0 || partition >= c.cfg.TransactionStateTopicPartitions {
		return
	}
	s := c.shardOf(partition)
	done := make(chan struct{})
	if !s.post(context.Background(), func() { s.m.unload(partition); close(done) }) {
		return
	}
	select {
	case <-done:
	case <-c.closed:
	}
}
