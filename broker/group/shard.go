package group

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
// appends run on their own goroutines whose completion comes back the same
// way. Nothing on the shard goroutine blocks on I/O.
type shard struct {
	idx   int
	store Store
	clock Clock
	log   *slog.Logger
	m     *machine

	inbox chan func()
	quit  chan struct{}
	done  chan struct{}

	ctx   context.Context // canceled by Close, aborting appends
	abort context.CancelFunc
	wg    sync.WaitGroup // append goroutines

	// Touched only on the shard goroutine.
	timers   map[timerKey]*shardTimer
	timerSeq uint64
	ready    []func() // timers due at once, run after the current op
	queues   map[int32]*appendQueue
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
	// A transactional append or a marker goes to the Store on its own;
	// plain appends (both nil) are merged.
	txn    *TxnAppend
	marker *TxnMarker
}

func (a *pendingAppend) plain() bool { return a.txn == nil && a.marker == nil }

func newShard(idx int, cfg Config, log *slog.Logger, store Store, clock Clock, newID func() string) *shard {
	ctx, cancel := context.WithCancel(context.Background())
	s := &shard{
		idx:    idx,
		store:  store,
		clock:  clock,
		log:    log,
		inbox:  make(chan func(), 1024),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		abort:  cancel,
		timers: make(map[timerKey]*shardTimer),
		queues: make(map[int32]*appendQueue),
	}
	s.m = newMachine(cfg, log, clock, s, newID)
	return s
}

// run is the shard goroutine.
func (s *shard) run() {
	defer close(s.done)
	s.scheduleSweep()
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
// request cannot take every group of the shard down with it.
func (s *shard) exec(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("group coordinator panic", "shard", s.idx, "panic", r)
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

// append implements effects.
func (s *shard) append(partition int32, recs []Record, done func(error)) {
	s.enqueue(partition, pendingAppend{recs: recs, done: done})
}

// appendTxn implements effects.
func (s *shard) appendTxn(partition int32, txn TxnAppend, recs []Record, done func(error)) {
	s.enqueue(partition, pendingAppend{recs: recs, done: done, txn: &txn})
}

// appendMarker implements effects.
func (s *shard) appendMarker(partition int32, marker TxnMarker, done func(error)) {
	s.enqueue(partition, pendingAppend{done: done, marker: &marker})
}

func (s *shard) enqueue(partition int32, a pendingAppend) {
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
func (s *shard) flush(partition int32, q *appendQueue) {
	for !q.inflight && len(q.pending) > 0 {
		if first := q.pending[0]; !first.plain() {
			q.pending = q.pending[1:]
			q.inflight = true
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				err := s.writeTxn(partition, &first)
				s.post(context.Background(), func() { s.completeAppend(partition, q, []pendingAppend{first}, err) })
			}()
			return
		}
		n, size := 0, 0
		var recs []Record
		for n < len(q.pending) && q.pending[n].plain() && (n == 0 || size+recordsSize(q.pending[n].recs) <= maxAppendBytes) {
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
			err := s.store.Append(s.ctx, partition, recs)
			s.post(context.Background(), func() { s.completeAppend(partition, q, batch, err) })
		}()
		return
	}
	if !q.inflight && s.queues[partition] == q {
		delete(s.queues, partition)
	}
}

// writeTxn hands a transactional append or a marker to the Store, which
// must implement TxnStore.
func (s *shard) writeTxn(partition int32, a *pendingAppend) error {
	ts, ok := s.store.(TxnStore)
	if !ok {
		return fmt.Errorf("write transactional records to __consumer_offsets-%d: the store does not support transactions: %w", partition, kerr.UnsupportedVersion)
	}
	if a.marker != nil {
		return ts.AppendMarker(s.ctx, partition, *a.marker)
	}
	return ts.AppendTxn(s.ctx, partition, *a.txn, a.recs)
}

func (s *shard) completeAppend(partition int32, q *appendQueue, batch []pendingAppend, err error) {
	if err != nil {
		s.log.Warn("append to __consumer_offsets", "partition", partition, "err", err)
	}
	for _, a := range batch {
		s.exec(func() { a.done(err) })
	}
	q.inflight = false
	s.flush(partition, q)
}

// inflightAppends counts partitions with an append in flight or queued; tests
// use it to wait until the shard is idle.
func (s *shard) inflightAppends() int {
	return len(s.queues)
}

// scheduleSweep schedules the offset retention job, which reschedules itself.
func (s *shard) scheduleSweep() {
	d := ms(s.m.cfg.OffsetsRetentionCheckIntervalMs)
	s.schedule(timerKey{kind: timerExpiry}, d, func() {
		s.m.sweepExpired()
		s.scheduleSweep()
	})
}

// stop ends the shard goroutine and waits for it and its appends.
func (s *shard) stop() {
	close(s.quit)
	<-s.done
	s.abort()
	s.wg.Wait()
}
