package group

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

	"github.com/twmb/franz-go/pkg/kmsg"
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

// memStore is a Store keeping every partition's records in memory. It can
// hold appends until released and fail them with an injected error.
type memStore struct {
	mu       sync.Mutex
	parts    map[int32][]Record
	hold     bool
	held     []*heldAppend
	heldN    atomic.Int32 // appends blocked in hold, counted until released
	failWith error
}

type heldAppend struct {
	ch       chan struct{}
	released bool
}

func newMemStore() *memStore { return &memStore{parts: make(map[int32][]Record)} }

func (s *memStore) Append(ctx context.Context, partition int32, recs []Record) error {
	return s.write(ctx, partition, slices.Clone(recs))
}

// AppendTxn implements TxnStore: the records keep their batch's producer.
func (s *memStore) AppendTxn(ctx context.Context, partition int32, txn TxnAppend, recs []Record) error {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Key: r.Key, Value: r.Value, Transactional: true, ProducerID: txn.ProducerID, ProducerEpoch: txn.ProducerEpoch}
	}
	return s.write(ctx, partition, out)
}

// AppendMarker implements TxnStore with the control record Kafka writes.
func (s *memStore) AppendMarker(ctx context.Context, partition int32, m TxnMarker) error {
	return s.write(ctx, partition, []Record{markerRecord(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit)})
}

// markerRecord is an end transaction marker as a load yields it.
func markerRecord(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool) Record {
	typ := kmsg.ControlRecordKeyTypeAbort
	if commit {
		typ = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
	value := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordinatorEpoch}).AppendTo(nil)
	return Record{Key: key, Value: value, Control: true, Transactional: true, ProducerID: producerID, ProducerEpoch: producerEpoch}
}

func (s *memStore) write(ctx context.Context, partition int32, recs []Record) error {
	s.mu.Lock()
	var h *heldAppend
	if s.hold {
		h = &heldAppend{ch: make(chan struct{})}
		s.held = append(s.held, h)
		s.heldN.Add(1)
	}
	s.mu.Unlock()
	if h != nil {
		select {
		case <-h.ch:
		case <-ctx.Done():
			s.mu.Lock()
			if !h.released {
				h.released = true
				s.heldN.Add(-1)
			}
			s.mu.Unlock()
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		return s.failWith
	}
	s.parts[partition] = append(s.parts[partition], recs...)
	return nil
}

// setHold makes later appends block until released; releasing counts the
// held appends as running at once, so quiesce waits for their completion.
func (s *memStore) setHold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
	if !on {
		for _, h := range s.held {
			if !h.released {
				h.released = true
				s.heldN.Add(-1)
				close(h.ch)
			}
		}
		s.held = nil
	}
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

// harness drives a Coordinator on a fake clock and memStore, waiting after
// each step until every shard is idle, so scripts are deterministic.
type harness struct {
	t     testing.TB
	cfg   Config
	clock *fakeClock
	store *memStore
	c     *Coordinator
	ids   atomic.Int64
	// topics is the topics view consumer groups assign from.
	topics *fakeTopics
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 4
	cfg.Shards = 2
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func newHarness(t testing.TB, cfg Config) *harness {
	h := &harness{t: t, cfg: cfg, clock: newFakeClock(), store: newMemStore(), topics: newFakeTopics()}
	if h.cfg.Topics == nil {
		h.cfg.Topics = h.topics
	}
	h.start()
	t.Cleanup(func() { h.c.Close() })
	return h
}

// start creates a coordinator on the harness's store and loads every
// partition from it.
func (h *harness) start() {
	c, err := newCoordinator(h.cfg, h.store, h.clock, func() string {
		return fmt.Sprint(h.ids.Add(1))
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	for p := range h.cfg.OffsetsTopicPartitions {
		if err := c.Load(context.Background(), p, seqOf(h.store.records(p))); err != nil {
			h.t.Fatal(err)
		}
	}
}

// restart closes the coordinator and builds a new one from the store.
func (h *harness) restart() {
	h.quiesce()
	h.c.Close()
	h.start()
}

// quiesce waits until no shard has work queued and every append is done or
// held by the store.
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
		if busy == int(h.store.heldN.Load()) {
			// One more round: completions posted meanwhile are now queued.
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
			h.t.Fatalf("coordinator did not go idle: %d busy, %d held", busy, h.store.heldN.Load())
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
