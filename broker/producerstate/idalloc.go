package producerstate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	// BlockSize is how many producer ids the controller hands out at a time
	// (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
	BlockSize = 1000
	// prefetchThreshold of a block handed out triggers the fetch of the
	// next (Kafka's PID_PREFETCH_THRESHOLD).
	prefetchThreshold = 0.90
	// RetryBackoff is how long a failed block request keeps the allocator
	// from asking again, as Kafka's RPCProducerIdManager.
	RetryBackoff = 50 * time.Millisecond
)

// BlockFunc obtains a new block of producer ids from the controller
// (AllocateProducerIds): first, first+1, ..., first+count-1.
type BlockFunc func(ctx context.Context) (first, count int64, err error)

// ErrAllocatorClosed is returned by Next after Close.
var ErrAllocatorClosed = errors.New("producer id allocator closed")

type idBlock struct {
	first, count int64
	next         int64 // next id to hand out; first+count when used up
}

func (b idBlock) end() int64 { return b.first + b.count }

// IDAllocator hands out producer ids for InitProducerId without a
// transactional id, from blocks obtained through a BlockFunc, as Kafka's
// RPCProducerIdManager: the next block is fetched in the background once
// 90% of the current one is handed out, so InitProducerId rarely waits on
// the controller. It is safe for concurrent use and never returns an id
// twice. Close stops a fetch in flight.
type IDAllocator struct {
	fetch BlockFunc
	now   func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	cur      idBlock
	pending  *idBlock      // fetched, not yet in use
	inflight chan struct{} // closed when the fetch in flight ends; nil if none
	lastErr  error         // the last fetch's failure, until a fetch succeeds
	retryAt  time.Time     // no fetch before this after a failure
	highest  int64         // the highest id of any block accepted, -1 at first
	closed   bool
}

// NewIDAllocator returns an allocator that gets its blocks from fetch,
// which must return when its context is canceled (Close cancels it).
func NewIDAllocator(fetch BlockFunc) *IDAllocator {
	ctx, cancel := context.WithCancel(context.Background())
	return &IDAllocator{fetch: fetch, now: time.Now, ctx: ctx, cancel: cancel, highest: -1}
}

// Next returns a new producer id and its first epoch, 0. When no id is at
// hand it waits for the block being fetched until ctx ends; then, or when
// the fetch failed, it answers COORDINATOR_LOAD_IN_PROGRESS, the retriable
// error Kafka gives while it has no block.
func (a *IDAllocator) Next(ctx context.Context) (id int64, epoch int16, err error) {
	a.mu.Lock()
	for {
		if a.closed {
			a.mu.Unlock()
			return 0, 0, ErrAllocatorClosed
		}
		if a.cur.next < a.cur.end() {
			id = a.cur.next
			a.cur.next++
			// Kafka truncates size*0.9 the same way.
			if id >= a.cur.first+int64(float64(a.cur.count)*prefetchThreshold) {
				a.startFetchLocked()
			}
			a.mu.Unlock()
			return id, 0, nil
		}
		if a.pending != nil {
			a.cur, a.pending = *a.pending, nil
			continue
		}
		if a.lastErr != nil && a.now().Before(a.retryAt) && a.inflight == nil {
			err := a.lastErr
			a.mu.Unlock()
			return 0, 0, fmt.Errorf("allocate producer id: %w: %w", kerr.CoordinatorLoadInProgress, err)
		}
		a.startFetchLocked()
		wait := a.inflight
		a.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("allocate producer id: waiting for a block: %w: %w", kerr.CoordinatorLoadInProgress, ctx.Err())
		}
		a.mu.Lock()
		if a.pending == nil && a.cur.next >= a.cur.end() && a.lastErr != nil {
			err := a.lastErr
			a.mu.Unlock()
			return 0, 0, fmt.Errorf("allocate producer id: %w: %w", kerr.CoordinatorLoadInProgress, err)
		}
	}
}

// startFetchLocked starts fetching the next block unless one is fetched,
// being fetched, or a failure's backoff has not passed.
func (a *IDAllocator) startFetchLocked() {
	if a.pending != nil || a.inflight != nil || a.closed {
		return
	}
	if a.lastErr != nil && a.now().Before(a.retryAt) {
		return
	}
	done := make(chan struct{})
	a.inflight = done
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		first, count, err := a.fetch(a.ctx)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err == nil {
			err = a.acceptLocked(first, count)
		}
		if err != nil {
			a.lastErr = fmt.Errorf("fetch producer id block: %w", err)
			a.retryAt = a.now().Add(RetryBackoff)
		} else {
			a.lastErr = nil
		}
		a.inflight = nil
		close(done)
	}()
}

// acceptLocked checks a block as Kafka's sanityCheckResponse does: a block
// overlapping ids already handed out would give an id twice.
func (a *IDAllocator) acceptLocked(first, count int64) error {
	switch {
	case first < 0 || count <= 0 || first > math.MaxInt64-count:
		return fmt.Errorf("invalid producer id block %d+%d", first, count)
	case first <= a.highest:
		return fmt.Errorf("producer id block %d+%d is not above the last block's end %d", first, count, a.highest)
	}
	a.highest = first + count - 1
	a.pending = &idBlock{first: first, count: count, next: first}
	return nil
}

// Close stops a fetch in flight and waits for it; Next then fails.
func (a *IDAllocator) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}
