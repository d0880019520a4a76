package coord_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// machine is a test state machine: it records what happened to it, in
// order; only its shard goroutine touches it.
type machine struct {
	events []string
	loaded map[int32]uint64
	tokens uint64
}

type key string

type runtime = coord.Runtime[key, *machine]

// countingStore counts the appends that reach the store, to see merging.
type countingStore struct {
	*coordtest.MemStore
	calls atomic.Int32
}

func (c *countingStore) Append(ctx context.Context, partition int32, recs []coord.Record) error {
	c.calls.Add(1)
	return c.MemStore.Append(ctx, partition, recs)
}

type env struct {
	t     *testing.T
	clock *coordtest.FakeClock
	store *countingStore
	rt    *runtime
}

func newEnv(t *testing.T, timeout time.Duration) *env {
	e := &env{t: t, clock: coordtest.NewFakeClock(), store: &countingStore{MemStore: coordtest.NewMemStore()}}
	e.rt = coord.NewRuntime(coord.Config{
		Name:       "test coordinator",
		Topic:      "__test",
		Partitions: 4,
		Shards:     2,
		Store:      e.store,
		Timeout:    timeout,
		Clock:      e.clock,
		Log:        slog.New(slog.DiscardHandler),
	}, func(*coord.Shard[key, *machine]) *machine { return &machine{loaded: map[int32]uint64{}} })
	e.rt.Start(func(m *machine) { m.events = append(m.events, "start") })
	t.Cleanup(e.rt.Close)
	return e
}

// on runs fn on the shard of partition p with its machine and waits.
func (e *env) on(p int32, fn func(s *coord.Shard[key, *machine], m *machine)) {
	s := e.rt.ShardOf(p)
	done := make(chan struct{})
	if !s.Post(context.Background(), func() { fn(s, s.Machine); close(done) }) {
		e.t.Fatal("shard stopped")
	}
	<-done
}

func (e *env) quiesce() { coordtest.Quiesce(e.t, e.rt, e.store.Held) }

// events returns and clears the events of partition p's machine.
func (e *env) events(p int32) []string {
	var out []string
	e.on(p, func(_ *coord.Shard[key, *machine], m *machine) {
		out = m.events
		m.events = nil
	})
	return out
}

func rec(k string, size int) coord.Record {
	return coord.Record{Key: []byte(k), Value: make([]byte, size)}
}

func keys(recs []coord.Record) string {
	var ks []string
	for _, r := range recs {
		ks = append(ks, string(r.Key))
	}
	return strings.Join(ks, ",")
}

// TestStartRunsFirst: the start function runs on every shard before any
// other work.
func TestStartRunsFirst(t *testing.T) {
	e := newEnv(t, 0)
	for p := range int32(2) {
		if got := e.events(p); !slices.Equal(got, []string{"start"}) {
			t.Errorf("shard %d events = %v, want [start]", p, got)
		}
	}
}

// TestAppendsMergeInIssueOrder: appends queued behind one in flight go to
// the store as one merged append, reach the log in issue order and
// complete in that order; an append of no records is a barrier behind
// them; a Write goes alone, ordered with the appends.
func TestAppendsMergeInIssueOrder(t *testing.T) {
	e := newEnv(t, 0)
	e.events(0)
	e.store.Set(true) // the first append stays in flight
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		done := func(name string) func(error) {
			return func(err error) { m.events = append(m.events, fmt.Sprintf("%s:%v", name, err)) }
		}
		s.Append(0, []coord.Record{rec("a", 1)}, done("a"))
		s.Append(0, []coord.Record{rec("b", 1)}, done("b"))
		s.Append(0, nil, done("barrier"))
		s.Append(0, []coord.Record{rec("c", 1), rec("d", 1)}, done("cd"))
		s.Write(0, func(ctx context.Context) error {
			return e.store.Write(ctx, 0, []coord.Record{rec("w", 1)})
		}, done("w"))
		s.Append(0, []coord.Record{rec("e", 1)}, done("e"))
	})
	e.quiesce()
	if got := e.events(0); len(got) != 0 {
		t.Fatalf("completed while the store holds the first append: %v", got)
	}
	e.store.Set(false)
	e.quiesce()
	want := []string{"a:<nil>", "b:<nil>", "barrier:<nil>", "cd:<nil>", "w:<nil>", "e:<nil>"}
	if got := e.events(0); !slices.Equal(got, want) {
		t.Errorf("completions = %v, want %v", got, want)
	}
	if got := keys(e.store.Records(0)); got != "a,b,c,d,w,e" {
		t.Errorf("log = %s, want a,b,c,d,w,e", got)
	}
	// a alone; b, c, d merged (the barrier holds no records); w alone
	// through Write; e alone.
	if got := e.store.calls.Load(); got != 3 {
		t.Errorf("store appends = %d, want 3 (a, then b+c+d, then e)", got)
	}
}

// TestMergedAppendsStayBounded: a merged append stops before it would pass
// 512 KiB; the first append of a batch goes whatever its size.
func TestMergedAppendsStayBounded(t *testing.T) {
	e := newEnv(t, 0)
	e.store.Set(true)
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		for i := range 5 {
			s.Append(0, []coord.Record{rec(fmt.Sprint(i), 200<<10)}, func(error) {})
		}
	})
	e.store.Set(false)
	e.quiesce()
	// 0 alone (in flight), then 1+2 (400 KiB), then 3+4.
	if got := e.store.calls.Load(); got != 3 {
		t.Errorf("store appends = %d, want 3", got)
	}
	if got := keys(e.store.Records(0)); got != "0,1,2,3,4" {
		t.Errorf("log = %s", got)
	}
}

// TestAppendFailureReachesEveryMergedAppend: a failed merged append fails
// each append in it; later appends go on.
func TestAppendFailureReachesEveryMergedAppend(t *testing.T) {
	e := newEnv(t, 0)
	e.events(0)
	e.store.SetFail(kerr.NotLeaderForPartition)
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		for _, k := range []string{"a", "b"} {
			s.Append(0, []coord.Record{rec(k, 1)}, func(err error) {
				m.events = append(m.events, fmt.Sprintf("%s:%d", k, coord.AppendErrorCode(err, nil)))
			})
		}
	})
	e.quiesce()
	want := []string{fmt.Sprintf("a:%d", kerr.NotCoordinator.Code), fmt.Sprintf("b:%d", kerr.NotCoordinator.Code)}
	if got := e.events(0); !slices.Equal(got, want) {
		t.Errorf("completions = %v, want %v", got, want)
	}
}

// TestTimers: a timer fires on the shard at its time; scheduling a key
// again replaces its timer; Cancel stops it; a timer due at once runs
// right after the current work.
func TestTimers(t *testing.T) {
	e := newEnv(t, 0)
	e.events(0)
	note := func(m *machine, s string) func() { return func() { m.events = append(m.events, s) } }
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		s.Schedule("a", time.Second, note(m, "a1"))
		s.Schedule("a", 2*time.Second, note(m, "a2")) // replaces a1
		s.Schedule("b", time.Second, note(m, "b"))
		s.Schedule("c", 3*time.Second, note(m, "c"))
		s.Cancel("c")
		s.Schedule("now", 0, note(m, "now"))
		m.events = append(m.events, "scheduled")
		if !s.Scheduled("a") || s.Scheduled("c") {
			t.Errorf("Scheduled(a) = %v, Scheduled(c) = %v", s.Scheduled("a"), s.Scheduled("c"))
		}
	})
	e.quiesce()
	if got := e.events(0); !slices.Equal(got, []string{"scheduled", "now"}) {
		t.Fatalf("before any time passes: %v", got)
	}
	e.clock.Advance(1500*time.Millisecond, e.quiesce)
	if got := e.events(0); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after 1.5s: %v, want [b]", got)
	}
	e.clock.Advance(5*time.Second, e.quiesce)
	if got := e.events(0); !slices.Equal(got, []string{"a2"}) {
		t.Fatalf("after 6.5s: %v, want [a2]", got)
	}
}

// TestGoCountsAsBusy: a Go operation keeps its shard busy until its result
// ran on the shard.
func TestGoCountsAsBusy(t *testing.T) {
	e := newEnv(t, 0)
	e.events(0)
	release := make(chan struct{})
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		s.Go(func(ctx context.Context) func() {
			<-release
			return func() { m.events = append(m.events, "went") }
		})
	})
	busy := 0
	e.on(0, func(s *coord.Shard[key, *machine], _ *machine) { busy = s.Busy() })
	if busy != 1 {
		t.Fatalf("Busy with a Go in flight = %d, want 1", busy)
	}
	close(release)
	e.quiesce()
	if got := e.events(0); !slices.Equal(got, []string{"went"}) {
		t.Errorf("events = %v", got)
	}
}

// TestTimeoutAnswersRequestTimedOut: an append the store never answers
// fails with REQUEST_TIMED_OUT once the timeout passes, which maps to
// COORDINATOR_NOT_AVAILABLE; the context error Stop leaves instead maps to
// NOT_COORDINATOR.
func TestTimeoutAnswersRequestTimedOut(t *testing.T) {
	e := newEnv(t, 50*time.Millisecond)
	e.events(0)
	e.store.Set(true)
	e.on(0, func(s *coord.Shard[key, *machine], m *machine) {
		s.Append(0, []coord.Record{rec("a", 1)}, func(err error) {
			m.events = append(m.events, fmt.Sprintf("%v %d", errors.Is(err, kerr.RequestTimedOut), coord.AppendErrorCode(err, nil)))
		})
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.events(0)
		if len(got) > 0 {
			if want := fmt.Sprintf("true %d", kerr.CoordinatorNotAvailable.Code); got[0] != want {
				t.Fatalf("timed-out append = %q, want %q", got[0], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("append never timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := coord.AppendErrorCode(context.Canceled, nil); got != kerr.NotCoordinator.Code {
		t.Errorf("canceled append = %d, want NOT_COORDINATOR", got)
	}
}

// TestAppendErrorCode: the common mapping, and a coordinator's own codes
// taking precedence.
func TestAppendErrorCode(t *testing.T) {
	extra := map[int16]int16{kerr.NetworkException.Code: kerr.CoordinatorLoadInProgress.Code}
	for _, tt := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{errors.New("disk on fire"), kerr.UnknownServerError.Code},
		{fmt.Errorf("append: %w", context.DeadlineExceeded), kerr.NotCoordinator.Code},
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{kerr.KafkaStorageError, kerr.NotCoordinator.Code},
		{kerr.RecordListTooLarge, kerr.UnknownServerError.Code},
		{kerr.NetworkException, kerr.CoordinatorLoadInProgress.Code},
		{kerr.InvalidRecord, kerr.InvalidRecord.Code},
	} {
		if got := coord.AppendErrorCode(tt.err, extra); got != tt.want {
			t.Errorf("AppendErrorCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestSubmit: an operation answers through its Pending; one that panics
// answers UNKNOWN_SERVER_ERROR and leaves the shard serving; a caller
// whose context ends gets COORDINATOR_NOT_AVAILABLE, and after Close
// NOT_COORDINATOR.
func TestSubmit(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	fail := func(code int16) int16 { return code }
	s := e.rt.ShardFor("g1")
	p := coord.Submit(e.rt, ctx, s, func(m *machine, reply func(int16)) { reply(7) }, fail)
	if got := coord.Then(p, func(v int16) int16 { return v * 2 })(); got != 14 {
		t.Errorf("Then(answer 7) = %d, want 14", got)
	}
	if got := coord.Call(e.rt, ctx, s, func(*machine, func(int16)) { panic("boom") }, fail); got != kerr.UnknownServerError.Code {
		t.Errorf("panicking op = %d, want UNKNOWN_SERVER_ERROR", got)
	}
	if got := coord.Call(e.rt, ctx, s, func(m *machine, reply func(int16)) { reply(1) }, fail); got != 1 {
		t.Errorf("op after a panic = %d, want 1", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	parked := coord.Submit(e.rt, cctx, s, func(*machine, func(int16)) {}, fail)
	cancel()
	if got := parked(); got != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("op whose caller left = %d, want COORDINATOR_NOT_AVAILABLE", got)
	}
	if posted, answered := e.rt.Posted(), e.rt.Answered(); posted != 4 || answered != 3 {
		t.Errorf("posted %d answered %d, want 4 and 3", posted, answered)
	}
	parked = coord.Submit(e.rt, ctx, s, func(*machine, func(int16)) {}, fail)
	e.rt.Close()
	if got := parked(); got != kerr.NotCoordinator.Code {
		t.Errorf("op parked at Close = %d, want NOT_COORDINATOR", got)
	}
	if got := coord.Call(e.rt, ctx, s, func(m *machine, reply func(int16)) { reply(1) }, fail); got != kerr.NotCoordinator.Code {
		t.Errorf("op after Close = %d, want NOT_COORDINATOR", got)
	}
	if got := coord.Ready[int16](3)(); got != 3 {
		t.Errorf("Ready(3) = %d", got)
	}
}

// TestLoad: a load begins on the shard, replays on the caller, then
// finishes on the shard; a failed replay aborts it; a load overtaken by
// another is reported; partitions out of range are refused.
func TestLoad(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	steps := func(p int32, replayErr error, overtaken bool) coord.LoadSteps[*machine] {
		return coord.LoadSteps[*machine]{
			Begin: func(m *machine) uint64 {
				m.tokens++
				m.loaded[p] = m.tokens
				m.events = append(m.events, fmt.Sprintf("begin %d", p))
				return m.tokens
			},
			Replay: func() error { return replayErr },
			Abort: func(m *machine, token uint64) {
				m.events = append(m.events, fmt.Sprintf("abort %d", p))
			},
			Finish: func(m *machine, token uint64) bool {
				if overtaken {
					token++
				}
				m.events = append(m.events, fmt.Sprintf("finish %d %v", p, m.loaded[p] == token))
				return m.loaded[p] == token
			},
		}
	}
	e.events(1)
	if err := e.rt.Load(ctx, 1, steps(1, nil, false)); err != nil {
		t.Fatalf("load: %v", err)
	}
	bad := errors.New("bad record")
	if err := e.rt.Load(ctx, 1, steps(1, bad, false)); !errors.Is(err, bad) {
		t.Fatalf("load with a bad record = %v", err)
	}
	if err := e.rt.Load(ctx, 1, steps(1, nil, true)); err == nil || !strings.Contains(err.Error(), "__test-1: unloaded while loading") {
		t.Fatalf("overtaken load = %v", err)
	}
	e.quiesce()
	want := []string{"begin 1", "finish 1 true", "begin 1", "abort 1", "begin 1", "finish 1 false"}
	if got := e.events(1); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if err := e.rt.Load(ctx, 4, steps(4, nil, false)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("load of partition 4 of 4 = %v", err)
	}
	e.rt.Unload(3, func(m *machine) { m.events = append(m.events, "unload 3") })
	e.rt.Unload(9, func(m *machine) { t.Error("unloaded a partition out of range") })
	if got := e.events(3); !slices.Equal(got, []string{"unload 3"}) {
		t.Errorf("events = %v", got)
	}
	var each atomic.Int32
	e.rt.Each(func(*machine) { each.Add(1) })
	if each.Load() != 2 {
		t.Errorf("Each ran on %d shards, want 2", each.Load())
	}
	e.rt.Close()
	if err := e.rt.Load(ctx, 1, steps(1, nil, false)); err == nil || !strings.Contains(err.Error(), "coordinator stopped") {
		t.Errorf("load after Close = %v", err)
	}
	coordtest.NoGoroutinesLeft(t, 2*time.Second, "broker/coord.(*")
}
