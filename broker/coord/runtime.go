package coord

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Runtime is a coordinator's shards. Partition p of the internal topic
// belongs to shard p % shards.
type Runtime[K comparable, M any] struct {
	cfg    Config
	shards []*Shard[K, M]

	// Operations handed to shards and answered by them: tests wait on
	// these to know which requests are parked.
	posted, answered atomic.Int64

	closeOnce sync.Once
	closed    chan struct{}
}

// NewRuntime builds cfg.Shards shards, each owning the machine newMachine
// builds for it (on the caller's goroutine, before any shard runs).
func NewRuntime[K comparable, M any](cfg Config, newMachine func(s *Shard[K, M]) M) *Runtime[K, M] {
	r := &Runtime[K, M]{cfg: cfg, closed: make(chan struct{})}
	for i := range cfg.Shards {
		s := NewShard[K, M](i, cfg)
		s.Machine = newMachine(s)
		r.shards = append(r.shards, s)
	}
	return r
}

// Start runs every shard's goroutine; start runs first on each, with its
// machine.
func (r *Runtime[K, M]) Start(start func(m M)) {
	for _, s := range r.shards {
		go s.Run(func() { start(s.Machine) })
	}
}

// Close stops every shard, its timers and its I/O; the requests still
// waiting answer NOT_COORDINATOR.
func (r *Runtime[K, M]) Close() {
	r.closeOnce.Do(func() {
		close(r.closed)
		for _, s := range r.shards {
			s.Stop()
		}
	})
}

// Shards returns the shards, in index order.
func (r *Runtime[K, M]) Shards() []*Shard[K, M] { return r.shards }

// ShardOf returns the shard of an internal topic partition.
func (r *Runtime[K, M]) ShardOf(partition int32) *Shard[K, M] {
	return r.shards[int(partition)%len(r.shards)]
}

// PartitionFor returns the partition of a key (a group id, a
// transactional id).
func (r *Runtime[K, M]) PartitionFor(key string) int32 {
	return PartitionFor(key, r.cfg.Partitions)
}

// ShardFor returns the shard of a key's partition.
func (r *Runtime[K, M]) ShardFor(key string) *Shard[K, M] {
	return r.ShardOf(r.PartitionFor(key))
}

// Posted and Answered count the operations Submit handed to a shard and
// those answered; the difference is the requests parked in the shards.
func (r *Runtime[K, M]) Posted() int64 { return r.posted.Load() }

// Answered counts the operations Submit handed to a shard that were
// answered (see Posted).
func (r *Runtime[K, M]) Answered() int64 { return r.answered.Load() }

func (r *Runtime[K, M]) failCode() int16 {
	select {
	case <-r.closed:
		return errNotCoordinator
	default:
		return errCoordinatorNotAvailable
	}
}

// Submit queues op on shard s at once and returns the wait for the reply
// op sends. The reply channel holds one answer and extra sends are
// dropped, so the shard never blocks on a caller that went away. fail
// builds the answer when the shard or the caller's context ends first:
// COORDINATOR_NOT_AVAILABLE when ctx ends, NOT_COORDINATOR once Close has
// begun, UNKNOWN_SERVER_ERROR when op panics.
func Submit[T any, K comparable, M any](r *Runtime[K, M], ctx context.Context, s *Shard[K, M], op func(m M, reply func(T)), fail func(code int16) T) Pending[T] {
	ch := make(chan T, 1)
	reply := func(v T) {
		select {
		case ch <- v:
			r.answered.Add(1)
		default:
		}
	}
	run := func() {
		defer func() {
			// A panic is a bug; the caller still gets an answer.
			if p := recover(); p != nil {
				r.cfg.Log.Error(r.cfg.Name+" panic", "shard", s.idx, "panic", p)
				reply(fail(errUnknownServerError))
			}
		}()
		op(s.Machine, reply)
	}
	if !s.Post(ctx, run) {
		return Ready(fail(r.failCode()))
	}
	r.posted.Add(1)
	return func() T {
		select {
		case v := <-ch:
			return v
		case <-ctx.Done():
			return fail(errCoordinatorNotAvailable)
		case <-r.closed:
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

// Call runs op on shard s and waits for its reply (see Submit).
func Call[T any, K comparable, M any](r *Runtime[K, M], ctx context.Context, s *Shard[K, M], op func(m M, reply func(T)), fail func(code int16) T) T {
	return Submit(r, ctx, s, op, fail)()
}

// LoadSteps are a coordinator's parts of loading a partition (see Load).
type LoadSteps[M any] struct {
	// Begin marks the partition as loading and returns the token Finish
	// and Abort present; it runs on the shard.
	Begin func(m M) uint64
	// Replay reads the partition's records; it runs on the caller's
	// goroutine and hands what it built to Finish.
	Replay func() error
	// Abort forgets the partition after Replay failed; it runs on the
	// shard.
	Abort func(m M, token uint64)
	// Finish installs what Replay built unless the partition was unloaded
	// or loaded again meanwhile, which it reports as false; it runs on the
	// shard.
	Finish func(m M, token uint64) bool
}

// Load replays a partition of the internal topic the broker now leads and
// then serves it. Requests for its keys answer COORDINATOR_LOAD_IN_PROGRESS
// meanwhile (the machine's part). The replay runs on the caller's goroutine
// so the shard keeps serving its other partitions; a replay that fails
// leaves the partition unserved.
func (r *Runtime[K, M]) Load(ctx context.Context, partition int32, steps LoadSteps[M]) error {
	if partition < 0 || partition >= r.cfg.Partitions {
		return fmt.Errorf("load %s-%d: partition out of range [0, %d)", r.cfg.Topic, partition, r.cfg.Partitions)
	}
	s := r.ShardOf(partition)
	stopped := fmt.Errorf("load %s-%d: coordinator stopped", r.cfg.Topic, partition)
	tokens := make(chan uint64, 1)
	if !s.Post(ctx, func() { tokens <- steps.Begin(s.Machine) }) {
		return stopped
	}
	var token uint64
	select {
	case token = <-tokens:
	case <-r.closed:
		return stopped
	}
	if err := steps.Replay(); err != nil {
		s.Post(context.Background(), func() { steps.Abort(s.Machine, token) })
		return err
	}
	installed := make(chan bool, 1)
	if !s.Post(context.Background(), func() { installed <- steps.Finish(s.Machine, token) }) {
		return stopped
	}
	select {
	case ok := <-installed:
		if !ok {
			return fmt.Errorf("load %s-%d: unloaded while loading", r.cfg.Topic, partition)
		}
		return nil
	case <-r.closed:
		return stopped
	}
}

// Unload runs unload on the shard of a partition the broker no longer
// leads and waits for it, or for Close. A partition out of range is
// ignored.
func (r *Runtime[K, M]) Unload(partition int32, unload func(m M)) {
	if partition < 0 || partition >= r.cfg.Partitions {
		return
	}
	s := r.ShardOf(partition)
	done := make(chan struct{})
	if !s.Post(context.Background(), func() { unload(s.Machine); close(done) }) {
		return
	}
	select {
	case <-done:
	case <-r.closed:
	}
}

// Each runs fn on every shard with its machine and waits until all have
// run it, or until Close.
func (r *Runtime[K, M]) Each(fn func(m M)) {
	done := make(chan struct{}, len(r.shards))
	posted := 0
	for _, s := range r.shards {
		if s.Post(context.Background(), func() { fn(s.Machine); done <- struct{}{} }) {
			posted++
		}
	}
	for range posted {
		select {
		case <-done:
		case <-r.closed:
			return
		}
	}
}
