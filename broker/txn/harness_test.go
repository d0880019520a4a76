package txn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// fakeMarkers is a MarkerWriter that records every marker it is asked to
// write and answers injected errors per partition.
type fakeMarkers struct {
	coordtest.Gate
	mu       sync.Mutex
	attempts []markerAttempt // since the last drain
	all      []markerAttempt
	failures map[TopicPartition][]error // consumed one per attempt
}

type markerAttempt struct {
	m    Marker
	errs []error
}

func newFakeMarkers() *fakeMarkers {
	return &fakeMarkers{failures: make(map[TopicPartition][]error)}
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, markers []Marker) [][]error {
	if err := f.Wait(ctx); err != nil {
		out := make([][]error, len(markers))
		for i, m := range markers {
			out[i] = make([]error, len(m.Partitions))
			for j := range out[i] {
				out[i][j] = err
			}
		}
		return out
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]error, len(markers))
	for i, m := range markers {
		out[i] = make([]error, len(m.Partitions))
		for j, tp := range m.Partitions {
			if errs := f.failures[tp]; len(errs) > 0 {
				out[i][j] = errs[0]
				f.failures[tp] = errs[1:]
			}
		}
		m.Partitions = slices.Clone(m.Partitions)
		f.attempts = append(f.attempts, markerAttempt{m, out[i]})
		f.all = append(f.all, markerAttempt{m, out[i]})
	}
	return out
}

func (f *fakeMarkers) fail(tp TopicPartition, err error, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range times {
		f.failures[tp] = append(f.failures[tp], err)
	}
}

// drain returns the attempts since the last drain.
func (f *fakeMarkers) drain() []markerAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.attempts
	f.attempts = nil
	return out
}

// history returns every attempt from the n-th on.
func (f *fakeMarkers) history(n int) []markerAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all[min(n, len(f.all)):])
}

// allocator hands out producer ids from 1000 up, or fails while failing is
// set.
type allocator struct {
	next    atomic.Int64
	failing atomic.Bool
}

func (a *allocator) allocate(ctx context.Context) (int64, error) {
	if a.failing.Load() {
		return 0, fmt.Errorf("no producer id block yet")
	}
	return 1000 + a.next.Add(1) - 1, nil
}

// harness drives a Coordinator on a fake clock, memStore and fakeMarkers,
// waiting after each step until every shard is idle, so scripts are
// deterministic.
type harness struct {
	t       testing.TB
	cfg     Config
	clock   *coordtest.FakeClock
	store   *coordtest.MemStore
	markers *fakeMarkers
	alloc   *allocator
	exists  func(topic string, partition int32) bool
	epoch   int32 // coordinator epoch of the next load
	c       *Coordinator
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.TransactionStateTopicPartitions = 4
	cfg.Shards = 2
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func newHarness(t testing.TB, cfg Config) *harness {
	h := &harness{
		t:       t,
		cfg:     cfg,
		clock:   coordtest.NewFakeClock(),
		store:   coordtest.NewMemStore(),
		markers: newFakeMarkers(),
		alloc:   &allocator{},
		exists:  func(topic string, _ int32) bool { return topic != "missing" },
	}
	h.start()
	t.Cleanup(func() { h.c.Close() })
	return h
}

func (h *harness) deps() Deps {
	return Deps{
		Store:              h.store,
		Markers:            h.markers,
		AllocateProducerID: h.alloc.allocate,
		PartitionForGroup:  func(g string) int32 { return PartitionFor(g, 50) },
		PartitionExists:    func(topic string, p int32) bool { return h.exists(topic, p) },
		Clock:              h.clock,
	}
}

// start creates a coordinator on the harness's store and loads every
// partition from it.
func (h *harness) start() {
	c, err := New(h.cfg, h.deps())
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	for p := range h.cfg.TransactionStateTopicPartitions {
		h.load(p)
	}
}

func (h *harness) load(p int32) {
	if err := h.c.Load(context.Background(), p, h.epoch, coordtest.SeqOf(h.store.Records(p))); err != nil {
		h.t.Fatal(err)
	}
}

// restart closes the coordinator and builds a new one from the store, as a
// new leader at the next coordinator epoch.
func (h *harness) restart() {
	h.quiesce()
	h.c.Close()
	h.epoch++
	h.start()
}

// quiesce waits until no shard has work queued and every I/O is done or
// held by a gate.
func (h *harness) quiesce() {
	coordtest.Quiesce(h.t, h.c.rt, func() int { return h.store.Held() + h.markers.Held() })
}

// advance moves the clock, firing due timers one at a time in order and
// letting the shards finish each before the next.
func (h *harness) advance(d time.Duration) { h.clock.Advance(d, h.quiesce) }

// onShard runs fn on the shard of a transactional id and waits for it.
func (h *harness) onShard(id string, fn func(m *machine)) {
	s := h.c.rt.ShardFor(id)
	done := make(chan struct{})
	if !s.Post(context.Background(), func() { fn(s.Machine); close(done) }) {
		h.t.Fatal("shard stopped")
	}
	<-done
}
