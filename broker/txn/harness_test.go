package txn

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a Clock whose time moves only when a test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	seq     uint64
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped {
		return false
	}
	t.stopped = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(o *fakeTimer) bool { return o == t })
	return true
}

// next removes and returns the earliest timer due by target, moving the
// clock to its time; nil when none is due.
func (c *fakeClock) next(target time.Time) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *fakeTimer
	for _, t := range c.timers {
		if t.when.After(target) {
			continue
		}
		if best == nil || t.when.Before(best.when) || t.when.Equal(best.when) && t.seq < best.seq {
			best = t
		}
	}
	if best == nil {
		return nil
	}
	best.stopped = true
	c.timers = slices.DeleteFunc(c.timers, func(o *fakeTimer) bool { return o == best })
	if best.when.After(c.now) {
		c.now = best.when
	}
	return best
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// gate holds calls until released; held counts the calls blocked in it.
type gate struct {
	mu    sync.Mutex
	on    bool
	chans []chan struct{}
	held  atomic.Int32
}

// wait blocks while the gate is on, until released or ctx ends.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	if !g.on {
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	g.chans = append(g.chans, ch)
	g.held.Add(1)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.chans, ch); i >= 0 {
			g.chans = slices.Delete(g.chans, i, i+1)
			g.held.Add(-1)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}

// set turns the gate on or off; turning it off releases every held call,
// which stops counting as held at once so quiesce waits for it to finish.
func (g *gate) set(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = on
	if !on {
		for _, ch := range g.chans {
			close(ch)
			g.held.Add(-1)
		}
		g.chans = nil
	}
}

// memStore is a Store keeping every partition's records in memory.
type memStore struct {
	gate
	mu       sync.Mutex
	parts    map[int32][]Record
	failWith error
}

func newMemStore() *memStore { return &memStore{parts: make(map[int32][]Record)} }

func (s *memStore) Append(ctx context.Context, partition int32, recs []Record) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		return s.failWith
	}
	s.parts[partition] = append(s.parts[partition], slices.Clone(recs)...)
	return nil
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

func (s *memStore) records(partition int32) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.parts[partition])
}

func seqOf(recs []Record) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// fakeMarkers is a MarkerWriter that records every marker it is asked to
// write and answers injected errors per partition.
type fakeMarkers struct {
	gate
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
	if err := f.wait(ctx); err != nil {
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
	clock   *fakeClock
	store   *memStore
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
		clock:   newFakeClock(),
		store:   newMemStore(),
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
	if err := h.c.Load(context.Background(), p, h.epoch, seqOf(h.store.records(p))); err != nil {
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := 0
		for _, s := range h.c.rt.Shards() {
			n := make(chan int, 1)
			if !s.Post(context.Background(), func() { n <- s.Busy() + s.Queued() }) {
				return
			}
			busy += <-n
		}
		if busy == int(h.store.held.Load()+h.markers.held.Load()) {
			idle := true
			for _, s := range h.c.rt.Shards() {
				if s.Queued() > 0 {
					idle = false
				}
			}
			if idle {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("coordinator did not go idle: %d busy", busy)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// advance moves the clock, firing due timers one at a time in order and
// letting the shards finish each before the next.
func (h *harness) advance(d time.Duration) {
	h.quiesce()
	target := h.clock.Now().Add(d)
	for {
		t := h.clock.next(target)
		if t == nil {
			break
		}
		t.f()
		h.quiesce()
	}
	h.clock.set(target)
}

// onShard runs fn on the shard of a transactional id and waits for it.
func (h *harness) onShard(id string, fn func(m *machine)) {
	s := h.c.shardFor(id)
	done := make(chan struct{})
	if !s.Post(context.Background(), func() { fn(s.Machine); close(done) }) {
		h.t.Fatal("shard stopped")
	}
	<-done
}

// goroutinesIn lists the stacks of live goroutines running code of one of
// pkgs other than the test's own.
func goroutinesIn(pkgs ...string) []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "goroutinesIn") {
			continue
		}
		for _, pkg := range pkgs {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
