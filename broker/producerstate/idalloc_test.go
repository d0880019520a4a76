package producerstate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// controller hands out consecutive blocks, as the controller's
// AllocateProducerIds does, counting the requests.
type controller struct {
	size  int64
	next  atomic.Int64
	calls atomic.Int32
}

func (c *controller) fetch(ctx context.Context) (int64, int64, error) {
	c.calls.Add(1)
	return c.next.Add(c.size) - c.size, c.size, nil
}

func TestIDAllocatorUniqueUnderConcurrency(t *testing.T) {
	c := &controller{size: BlockSize}
	a := NewIDAllocator(c.fetch)
	defer a.Close()
	const workers, each = 8, 2500
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, epoch, err := a.Next(context.Background())
				if err != nil || epoch != 0 {
					t.Errorf("Next: %d %d %v", id, epoch, err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	seen := make(map[int64]bool)
	for _, list := range ids {
		prev := int64(-1)
		for _, id := range list {
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			if id <= prev {
				t.Fatalf("ids went backwards for one caller: %d after %d", id, prev)
			}
			seen[id], prev = true, id
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d ids, want %d", len(seen), workers*each)
	}
	// Every id is used: 20 blocks for 20,000 ids, plus at most one
	// prefetched ahead.
	for id := range int64(workers * each) {
		if !seen[id] {
			t.Fatalf("id %d skipped", id)
		}
	}
	if n := c.calls.Load(); n < 20 || n > 21 {
		t.Fatalf("%d blocks fetched, want 20 or 21", n)
	}
}

func TestIDAllocatorPrefetch(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	fetched := make(chan int32, 4)
	fetch := func(ctx context.Context) (int64, int64, error) {
		n := calls.Add(1)
		fetched <- n
		if n == 2 {
			// The prefetch waits until the test has seen that the caller
			// that triggered it did not wait for it.
			select {
			case <-release:
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
		}
		return int64(n-1) * 10, 10, nil
	}
	a := NewIDAllocator(fetch)
	defer a.Close()
	next := func(want int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		id, _, err := a.Next(ctx)
		if err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d", id, err, want)
		}
	}
	for id := int64(0); id < 9; id++ {
		next(id)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d fetches after 9 of 10 ids, want 1", n)
	}
	next(9) // 90% of the block: the next one is fetched in the background
	select {
	case n := <-fetched:
		if n != 1 {
			t.Fatalf("fetch %d", n)
		}
	default:
		t.Fatal("first fetch not seen")
	}
	select {
	case <-fetched:
	case <-time.After(10 * time.Second):
		t.Fatal("no prefetch after 90% of the block")
	}
	close(release)
	for id := int64(10); id < 19; id++ {
		next(id)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (no fetch while the block lasts)", n)
	}
}

func TestIDAllocatorFailureAndBackoff(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	fetch := func(ctx context.Context) (int64, int64, error) {
		calls.Add(1)
		if fail.Load() {
			return 0, 0, errors.New("not the controller")
		}
		return 5000, 1000, nil
	}
	a := NewIDAllocator(fetch)
	defer a.Close()
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	a.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	_, _, err := a.Next(context.Background())
	if !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("err = %v, want COORDINATOR_LOAD_IN_PROGRESS", err)
	}
	// Within the backoff the controller is not asked again.
	fail.Store(false)
	if _, _, err := a.Next(context.Background()); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("within backoff: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d fetches within the backoff, want 1", n)
	}
	advance(RetryBackoff)
	id, _, err := a.Next(context.Background())
	if err != nil || id != 5000 {
		t.Fatalf("after backoff: %d %v", id, err)
	}
}

func TestIDAllocatorRejectsBadBlocks(t *testing.T) {
	tests := []struct {
		name         string
		first, count int64
	}{
		{"negative start", -5, 10},
		{"empty", 10, 0},
		{"negative length", 10, -1},
		{"overflow", 1<<63 - 5, 10},
		{"overlaps the last block", 995, 1000},
		{"repeats the last block", 0, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks := [][2]int64{{0, 1000}, {tt.first, tt.count}}
			var calls atomic.Int32
			a := NewIDAllocator(func(ctx context.Context) (int64, int64, error) {
				b := blocks[min(int(calls.Add(1))-1, 1)]
				return b[0], b[1], nil
			})
			defer a.Close()
			ctx := context.Background()
			for want := int64(0); want < 1000; want++ {
				if id, _, err := a.Next(ctx); err != nil || id != want {
					t.Fatalf("Next = %d %v, want %d", id, err, want)
				}
			}
			// The prefetched block was refused: the next id fails
			// instead of repeating or inventing one.
			deadline := time.Now().Add(10 * time.Second)
			for calls.Load() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			id, _, err := a.Next(ctx)
			if !errors.Is(err, kerr.CoordinatorLoadInProgress) {
				t.Fatalf("Next after a bad block = %d, %v", id, err)
			}
		})
	}
}

func TestIDAllocatorWaitAndClose(t *testing.T) {
	started := make(chan struct{})
	a := NewIDAllocator(func(ctx context.Context) (int64, int64, error) {
		close(started)
		<-ctx.Done() // a controller that never answers
		return 0, 0, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _, err := a.Next(ctx)
	if !errors.Is(err, kerr.CoordinatorLoadInProgress) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want COORDINATOR_LOAD_IN_PROGRESS after the deadline", err)
	}
	<-started
	// Close stops the fetch and waits for it; a waiting Next is released.
	waiting := make(chan error, 1)
	go func() {
		_, _, err := a.Next(context.Background())
		waiting <- err
	}()
	a.Close()
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrAllocatorClosed) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			t.Fatalf("waiting Next after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next still waiting after Close")
	}
	if _, _, err := a.Next(context.Background()); !errors.Is(err, ErrAllocatorClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}
