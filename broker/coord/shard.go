package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxAppendBytes bounds how many queued appends of one partition are merged
// into one append: merging is group commit, but one call should stay well
// inside a record batch limit.
const maxAppendBytes = 512 << 10

// Config is what a coordinator tells the runtime.
type Config struct {
	// Name names the coordinator in logs ("group coordinator").
	Name string
	// Topic is the coordinator's internal topic, for logs and errors.
	Topic string
	// Partitions is how many partitions Topic has: keys map to them with
	// PartitionFor, and partitions to shards.
	Partitions int32
	// Shards is how many shards (goroutines) serve the partitions.
	Shards int
	// Store writes records to Topic's partitions.
	Store Store
	// Timeout bounds each append and each Go; zero bounds them only by
	// Stop.
	Timeout time.Duration
	// Clock runs the timers.
	Clock Clock
	// Log gets the shards' warnings and the panics they survive.
	Log *slog.Logger
}

// Store appends records to a partition of a coordinator's internal topic.
// Append returns once the records are durable (acks=all in Kafka's terms)
// or have failed; errors that wrap a *kerr.Error are mapped to the client
// error Kafka answers (see AppendErrorCode). Appends to one partition are
// issued one at a time, in order.
type Store interface {
	Append(ctx context.Context, partition int32, records []Record) error
}

// Shard is one coordinator goroutine. It owns a coordinator's state machine
// (Machine, of type M) and carries out its effects: real timers whose
// firing comes back through the inbox, and appends and other I/O run on
// their own goroutines whose completion comes back the same way. Nothing on
// the shard goroutine blocks on I/O. Timers are named by keys of type K;
// scheduling a key again replaces its timer.
//
// Post, Queued, Index and Stop may be called from any goroutine; every
// other method only on the shard goroutine, from work it runs.
type Shard[K comparable, M any] struct {
	// Machine is the state the shard owns; only the shard goroutine
	// touches it.
	Machine M

	idx int
	cfg Config

	inbox chan func()
	quit  chan struct{}
	done  chan struct{}

	ctx   context.Context // canceled by Stop, aborting I/O in flight
	abort context.CancelFunc
	wg    sync.WaitGroup // I/O goroutines

	// Touched only on the shard goroutine.
	timers   map[K]*shardTimer
	timerSeq uint64
	ready    []func() // timers due at once, run after the current op
	queues   map[int32]*appendQueue
	asyncOps int // Go operations in flight
}

type shardTimer struct {
	seq uint64
	t   Timer // nil for a timer in ready
	fn  func()
}

// appendQueue serializes the appends of one partition: one append in
// flight, later ones queued and merged, completions in issue order.
type appendQueue struct {
	inflight bool
	pending  []pendingAppend
}

type pendingAppend struct {
	recs []Record
	done func(error)
	// write, when set, is a write of its own (a transactional batch, a
	// marker) that goes to the log alone; plain appends (nil) are merged.
	write func(ctx context.Context) error
}

// NewShard returns shard idx, not yet running (see Run).
func NewShard[K comparable, M any](idx int, cfg Config) *Shard[K, M] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Shard[K, M]{
		idx:    idx,
		cfg:    cfg,
		inbox:  make(chan func(), 1024),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		abort:  cancel,
		timers: make(map[K]*shardTimer),
		queues: make(map[int32]*appendQueue),
	}
}

// Index is the shard's number among its coordinator's shards.
func (s *Shard[K, M]) Index() int { return s.idx }

// Run is the shard goroutine: it runs start (which schedules the machine's
// periodic jobs), then the work posted to it, until Stop.
func (s *Shard[K, M]) Run(start func()) {
	defer close(s.done)
	if start != nil {
		s.exec(start)
	}
	for {
		select {
		case fn := <-s.inbox:
			s.exec(fn)
			for len(s.ready) > 0 {
				next := s.ready[0]
				s.ready = s.ready[1:]
				s.exec(next)
			}
		case <-s.quit:
			for _, t := range s.timers {
				if t.t != nil {
					t.t.Stop()
				}
			}
			return
		}
	}
}

// exec runs one unit of work; a panic is a bug, logged so that one bad
// request cannot take every group or transaction of the shard down with
// it.
func (s *Shard[K, M]) exec(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Log.Error(s.cfg.Name+" panic", "shard", s.idx, "panic", r)
		}
	}()
	fn()
}

// Post hands work to the shard from another goroutine; it reports false
// once the shard has stopped or ctx has ended first.
func (s *Shard[K, M]) Post(ctx context.Context, fn func()) bool {
	select {
	case s.inbox <- fn:
		return true
	case <-s.quit:
		return false
	case <-ctx.Done():
		return false
	}
}

// Queued counts the work waiting in the inbox; tests use it to wait until
// the shard is idle.
func (s *Shard[K, M]) Queued() int { return len(s.inbox) }

// Schedule runs fn on the shard once d has elapsed, replacing k's timer. A
// d of zero or less runs fn right after the current work.
func (s *Shard[K, M]) Schedule(k K, d time.Duration, fn func()) {
	s.Cancel(k)
	s.timerSeq++
	seq := s.timerSeq
	e := &shardTimer{seq: seq, fn: fn}
	s.timers[k] = e
	if d <= 0 {
		s.ready = append(s.ready, func() { s.fire(k, seq) })
		return
	}
	e.t = s.cfg.Clock.AfterFunc(d, func() {
		s.Post(context.Background(), func() { s.fire(k, seq) })
	})
}

func (s *Shard[K, M]) fire(k K, seq uint64) {
	e := s.timers[k]
	if e == nil || e.seq != seq {
		return // canceled or rescheduled meanwhile
	}
	delete(s.timers, k)
	e.fn()
}

// Cancel stops k's timer, if any.
func (s *Shard[K, M]) Cancel(k K) {
	if e := s.timers[k]; e != nil {
		if e.t != nil {
			e.t.Stop()
		}
		delete(s.timers, k)
	}
}

// Scheduled reports whether k has a timer.
func (s *Shard[K, M]) Scheduled(k K) bool {
	_, ok := s.timers[k]
	return ok
}

// Append hands records to the log of a partition and calls done on the
// shard once they are durable or failed. Appends to one partition reach
// the log and complete in the order they were issued, merged while they
// wait; an append of no records completes after every append issued before
// it on the partition, which makes it a barrier.
func (s *Shard[K, M]) Append(partition int32, recs []Record, done func(error)) {
	s.enqueue(partition, pendingAppend{recs: recs, done: done})
}

// Write queues a write of its own on a partition (a transactional batch, a
// marker): it is ordered with the partition's appends as one of them, but
// goes to the log alone through write, and done is called on the shard.
func (s *Shard[K, M]) Write(partition int32, write func(ctx context.Context) error, done func(error)) {
	s.enqueue(partition, pendingAppend{done: done, write: write})
}

func (s *Shard[K, M]) enqueue(partition int32, a pendingAppend) {
	q := s.queues[partition]
	if q == nil {
		q = &appendQueue{}
		s.queues[partition] = q
	}
	q.pending = append(q.pending, a)
	if !q.inflight {
		s.flush(partition, q)
	}
}

// flush starts the next merged append of a partition unless one is in
// flight. The queue counts as in flight while completions run, so appends
// they issue queue behind the ones already waiting.
func (s *Shard[K, M]) flush(partition int32, q *appendQueue) {
	if !q.inflight && len(q.pending) > 0 {
		if first := q.pending[0]; first.write != nil {
			q.pending = q.pending[1:]
			q.inflight = true
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				ctx, cancel := s.ioContext()
				err := s.TimedOut(ctx, first.write(ctx))
				cancel()
				s.Post(context.Background(), func() { s.completeAppend(partition, q, []pendingAppend{first}, err) })
			}()
			return
		}
		n, size := 0, 0
		var recs []Record
		for n < len(q.pending) && q.pending[n].write == nil && (n == 0 || size+recordsSize(q.pending[n].recs) <= maxAppendBytes) {
			size += recordsSize(q.pending[n].recs)
			recs = append(recs, q.pending[n].recs...)
			n++
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.inflight = true
		if len(recs) == 0 {
			// Only barriers: everything issued before them has completed.
			s.completeAppend(partition, q, batch, nil)
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := s.ioContext()
			err := s.TimedOut(ctx, s.cfg.Store.Append(ctx, partition, recs))
			cancel()
			s.Post(context.Background(), func() { s.completeAppend(partition, q, batch, err) })
		}()
		return
	}
	if !q.inflight && s.queues[partition] == q {
		delete(s.queues, partition)
	}
}

func (s *Shard[K, M]) completeAppend(partition int32, q *appendQueue, batch []pendingAppend, err error) {
	if err != nil {
		s.cfg.Log.Warn("append to "+s.cfg.Topic, "partition", partition, "err", err)
	}
	for _, a := range batch {
		s.exec(func() { a.done(err) })
	}
	q.inflight = false
	s.flush(partition, q)
}

// Go runs work on its own goroutine, bounded like an append (see
// Config.Timeout), and then the function it returns on the shard:
// I/O other than appends (marker writes, producer id allocations) that the
// shard waits for without blocking.
func (s *Shard[K, M]) Go(work func(ctx context.Context) (then func())) {
	s.asyncOps++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := s.ioContext()
		then := work(ctx)
		cancel()
		s.Post(context.Background(), func() {
			s.asyncOps--
			then()
		})
	}()
}

// ioContext bounds one append or Go: Stop cancels it, and so does the
// timeout when there is one.
func (s *Shard[K, M]) ioContext() (context.Context, context.CancelFunc) {
	if s.cfg.Timeout <= 0 {
		return s.ctx, func() {}
	}
	return context.WithTimeout(s.ctx, s.cfg.Timeout)
}

// TimedOut turns the failure of an operation whose timeout (not Stop)
// ended it into REQUEST_TIMED_OUT, which a coordinator retries; a bare
// context error would read as a coordinator that is stopping. ctx is the
// one the shard handed the operation.
func (s *Shard[K, M]) TimedOut(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || s.ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("no answer within %v: %w (%s)", s.cfg.Timeout, kerr.RequestTimedOut, err.Error())
}

// Busy counts the I/O the shard waits for: partitions with an append in
// flight or queued, and Go operations. Tests use it to wait until the
// shard is idle.
func (s *Shard[K, M]) Busy() int {
	return len(s.queues) + s.asyncOps
}

// Stop ends the shard goroutine and waits for it and its I/O.
func (s *Shard[K, M]) Stop() {
	close(s.quit)
	<-s.done
	s.abort()
	s.wg.Wait()
}
