package txn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxAppendBytes bounds how many queued appends of one partition are merged
// into one Store.Append: merging is group commit, but one call should stay
// well inside a record batch limit.
const maxAppendBytes = 512 << 10

// shard is one coordinator goroutine. It owns a machine and carries out its
// effects: real timers whose firing comes back through the inbox, and
// appends, marker writes and producer id allocations run on their own
// goroutines whose completion comes back the same way. Nothing on the
// shard goroutine blocks on I/O.
type shard struct {
	idx     int
	store   Store
	markers MarkerWriter
	alloc   func(context.Context) (int64, error)
	clock   Clock
	timeout time.Duration // bounds each append, marker write and allocation
	log     *slog.Logger
	m       *machine

	inbox chan func()
	quit  chan struct{}
	done  chan struct{}

	ctx   context.Context // canceled by stop, aborting I/O in flight
	abort context.CancelFunc
	wg    sync.WaitGroup // I/O goroutines

	// Touched only on the shard goroutine.
	timers   map[timerKey]*shardTimer
	timerSeq uint64
	ready    []func() // timers due at once, run after the current op
	queues   map[int32]*appendQueue
	asyncOps int // marker writes and allocations in flight
}

type shardTimer struct {
	seq uint64
	t   Timer // nil for a timer in ready
	fn  func()
}

// appendQueue serializes the appends of one partition: one Store.Append in
// flight, later ones queued and merged, completions in issue order.
type appendQueue struct {
	inflight bool
	pending  []pendingAppend
}

type pendingAppend struct {
	recs []Record
	done func(error)
}

func newShard(idx int, cfg Config, log *slog.Logger, deps Deps) *shard {
	ctx, cancel := context.WithCancel(context.Background())
	s := &shard{
		idx:     idx,
		store:   deps.Store,
		markers: deps.Markers,
		alloc:   deps.AllocateProducerID,
		clock:   deps.Clock,
		timeout: ms(cfg.RequestTimeoutMs),
		log:     log,
		inbox:   make(chan func(), 1024),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		ctx:     ctx,
		abort:   cancel,
		timers:  make(map[timerKey]*shardTimer),
		queues:  make(map[int32]*appendQueue),
	}
	s.m = newMachine(cfg, log, deps, s)
	return s
}

// run is the shard goroutine.
func (s *shard) run() {
	defer close(s.done)
	s.exec(s.m.start)
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
// request cannot take every transaction of the shard down with it.
func (s *shard) exec(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("transaction coordinator panic", "shard", s.idx, "panic", r)
		}
	}()
	fn()
}

// post hands work to the shard from another goroutine; it reports false once
// the shard has stopped.
func (s *shard) post(ctx context.Context, fn func()) bool {
	select {
	case s.inbox <- fn:
		return true
	case <-s.quit:
		return false
	case <-ctx.Done():
		return false
	}
}

// schedule implements effects.
func (s *shard) schedule(k timerKey, d time.Duration, fn func()) {
	s.cancel(k)
	s.timerSeq++
	seq := s.timerSeq
	e := &shardTimer{seq: seq, fn: fn}
	s.timers[k] = e
	if d <= 0 {
		s.ready = append(s.ready, func() { s.fire(k, seq) })
		return
	}
	e.t = s.clock.AfterFunc(d, func() {
		s.post(context.Background(), func() { s.fire(k, seq) })
	})
}

func (s *shard) fire(k timerKey, seq uint64) {
	e := s.timers[k]
	if e == nil || e.seq != seq {
		return // canceled or rescheduled meanwhile
	}
	delete(s.timers, k)
	e.fn()
}

// cancel implements effects.
func (s *shard) cancel(k timerKey) {
	if e := s.timers[k]; e != nil {
		if e.t != nil {
			e.t.Stop()
		}
		delete(s.timers, k)
	}
}

// scheduled implements effects.
func (s *shard) scheduled(k timerKey) bool {
	_, ok := s.timers[k]
	return ok
}

// append implements effects.
func (s *shard) append(partition int32, recs []Record, done func(error)) {
	q := s.queues[partition]
	if q == nil {
		q = &appendQueue{}
		s.queues[partition] = q
	}
	q.pending = append(q.pending, pendingAppend{recs: recs, done: done})
	if !q.inflight {
		s.flush(partition, q)
	}
}

// flush starts the next merged append of a partition unless one is in
// flight. The queue counts as in flight while completions run, so appends
// they issue queue behind the ones already waiting.
func (s *shard) flush(partition int32, q *appendQueue) {
	if !q.inflight && len(q.pending) > 0 {
		n, size := 0, 0
		var recs []Record
		for n < len(q.pending) && (n == 0 || size+recordsSize(q.pending[n].recs) <= maxAppendBytes) {
			size += recordsSize(q.pending[n].recs)
			recs = append(recs, q.pending[n].recs...)
			n++
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.inflight = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := s.ioContext()
			err := s.timedOut(ctx, s.store.Append(ctx, partition, recs))
			cancel()
			s.post(context.Background(), func() { s.completeAppend(partition, q, batch, err) })
		}()
		return
	}
	if !q.inflight && s.queues[partition] == q {
		delete(s.queues, partition)
	}
}

func (s *shard) completeAppend(partition int32, q *appendQueue, batch []pendingAppend, err error) {
	if err != nil {
		s.log.Warn("append to __transaction_state", "partition", partition, "err", err)
	}
	for _, a := range batch {
		s.exec(func() { a.done(err) })
	}
	q.inflight = false
	s.flush(partition, q)
}

// allocateProducerID implements effects.
func (s *shard) allocateProducerID(done func(int64, error)) {
	s.asyncOps++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := s.ioContext()
		// A block still missing at the timeout answers
		// COORDINATOR_LOAD_IN_PROGRESS (allocErrorCode), which clients retry.
		id, err := s.alloc(ctx)
		cancel()
		s.post(context.Background(), func() {
			s.asyncOps--
			done(id, err)
		})
	}()
}

// writeMarkers implements effects.
func (s *shard) writeMarkers(markers []Marker, done func([][]error)) {
	s.asyncOps++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := s.ioContext()
		res := s.markers.WriteMarkers(ctx, markers)
		for _, errs := range res {
			for i, err := range errs {
				errs[i] = s.timedOut(ctx, err)
			}
		}
		cancel()
		s.post(context.Background(), func() {
			s.asyncOps--
			done(res)
		})
	}()
}

// ioContext bounds one append, marker write or allocation: stop cancels
// it, and so does the request timeout.
func (s *shard) ioContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.timeout)
}

// timedOut turns the failure of an operation whose timeout (not stop)
// ended it into REQUEST_TIMED_OUT, which the coordinator retries; a bare
// context error would read as a coordinator that is stopping and leave a
// transaction's completion unwritten.
func (s *shard) timedOut(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || s.ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("no answer within %v: %w (%s)", s.timeout, kerr.RequestTimedOut, err.Error())
}

// busy counts the I/O the shard waits for; tests use it to wait until the
// shard is idle.
func (s *shard) busy() int {
	return len(s.queues) + s.asyncOps
}

// stop ends the shard goroutine and waits for it and its I/O.
func (s *shard) stop() {
	close(s.quit)
	<-s.done
	s.abort()
	s.wg.Wait()
}
