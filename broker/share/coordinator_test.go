package share

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

type fixedTopics map[string]TopicInfo

func (f fixedTopics) Topics() map[string]TopicInfo { return f }

// env is a coordinator on a fake clock and an in-memory store, serving
// one topic "t" of one partition whose high watermark the test sets.
type env struct {
	t     *testing.T
	c     *Coordinator
	clock *coordtest.FakeClock
	store *coordtest.MemStore
	hw    int64
	tid   [16]byte
}

func newEnv(t *testing.T) *env { return newEnvWith(t, func(*Config) {}) }

// newEnvWith is newEnv with changes to the configuration.
func newEnvWith(t *testing.T, change func(*Config)) *env {
	e := &env{t: t, clock: coordtest.NewFakeClock(), store: coordtest.NewMemStore(), tid: [16]byte{1}}
	cfg := DefaultConfig()
	cfg.StatePartitions = 1
	cfg.RecordLockDurationMs = 1000
	cfg.DeliveryCountLimit = 2
	cfg.SessionTimeoutMs = 3000
	cfg.HeartbeatIntervalMs = 1000
	// A target on every change; TestShareAssignmentInterval covers
	// group.share.assignment.interval.ms.
	cfg.AssignmentIntervalMs = 0
	cfg.Topics = fixedTopics{"t": {ID: e.tid, Partitions: 1}}
	cfg.Offsets = func(string, int32) (int64, int64, bool) { return 0, 0, true }
	change(&cfg)
	c, err := New(cfg, e.store, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c
	e.load()
	return e
}

func (e *env) load() {
	if err := e.c.Load(context.Background(), 0, coordtest.SeqOf(e.store.Records(0))); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) settle() { coordtest.Quiesce(e.t, e.c.rt, e.store.Held) }

func (e *env) join(member string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", member, []string{"t"}
	return e.c.Heartbeat(context.Background(), ClientInfo{}, req)()
}

func (e *env) ref() PartitionRef { return PartitionRef{TopicID: e.tid, Topic: "t"} }

// fetch runs both steps of a ShareFetch of offsets [0, n) as batches of
// one record, returning the plan and the acquired ranges.
func (e *env) fetch(member string, epoch int32, n int64, maxRecords int, acks ...Ack) (FetchPlan, []Acquired) {
	plan := e.c.StartFetch(context.Background(), FetchStart{Group: "g", Member: member, Epoch: epoch, Fetch: []PartitionRef{e.ref()}, Acks: acks})
	if plan.ErrorCode != 0 {
		return plan, nil
	}
	var bs []Batch
	for o := plan.Reads[0].Offset; o < n; o++ {
		bs = append(bs, Batch{First: o, Last: o})
	}
	got := e.c.Acquire(context.Background(), "g", member, []PartitionBatches{{Ref: e.ref(), From: plan.Reads[0].Offset, Batches: bs}}, maxRecords, false, nil)
	return plan, got.Acquired[e.ref()]
}

func (e *env) ack(first, last int64, typ int8) Ack {
	return Ack{Ref: e.ref(), Batches: []AckBatch{{First: first, Last: last, Types: []int8{typ}}}}
}

func (e *env) state() PartitionInfo {
	info, ok := e.c.Partition(context.Background(), "g", e.tid, 0)
	if !ok {
		e.t.Fatal("no share partition")
	}
	return info
}

// TestLockExpiryAndDeliveryLimit: records a member holds past the lock
// duration become available again with their delivery count; at the
// delivery limit they are archived and the start offset moves past them.
func TestLockExpiryAndDeliveryLimit(t *testing.T) {
	e := newEnv(t)
	if r := e.join("a"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %+v", r)
	}
	if _, got := e.fetch("a", 0, 4, 10); !slices.Equal(got, []Acquired{{0, 3, 1}}) {
		t.Fatalf("first fetch: %v", got)
	}
	e.clock.Advance(1500*time.Millisecond, e.settle)
	if st := e.state(); st.InFlight["AVAILABLE"] != 4 {
		t.Fatalf("after lock expiry: %+v", st)
	}
	if _, got := e.fetch("a", 1, 4, 10); !slices.Equal(got, []Acquired{{0, 3, 2}}) {
		t.Fatalf("redelivery: %v", got)
	}
	// Releasing at the limit archives.
	if plan, got := e.fetch("a", 2, 4, 10, e.ack(0, 3, ackRelease)); plan.AckErrors[e.ref()] != 0 || len(got) != 0 {
		t.Fatalf("release at limit: %+v %v", plan, got)
	}
	if st := e.state(); st.Start != 4 || len(st.InFlight) != 0 {
		t.Fatalf("after archive: %+v", st)
	}
}

// TestAcknowledgeRules: only the holder acknowledges its records; epochs
// of share sessions are checked; accepted records survive a reload and
// the records in flight come back available.
func TestAcknowledgeRules(t *testing.T) {
	e := newEnv(t)
	e.join("a")
	e.join("b")
	if _, got := e.fetch("a", 0, 6, 3); !slices.Equal(got, []Acquired{{0, 2, 1}}) {
		t.Fatalf("a: %v", got)
	}
	if _, got := e.fetch("b", 0, 6, 3); !slices.Equal(got, []Acquired{{3, 5, 1}}) {
		t.Fatalf("b: %v", got)
	}
	code, codes := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: "b", Epoch: 1, Acks: []Ack{e.ack(0, 0, ackAccept)}})
	if code != 0 || codes[e.ref()] != kerr.InvalidRecordState.Code {
		t.Fatalf("b acks a's record: %d %v", code, codes)
	}
	if code, _ := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: "b", Epoch: 7}); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %d", code)
	}
	if code, _ := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: "c", Epoch: 1}); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %d", code)
	}
	if code, codes := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: "a", Epoch: 1, Acks: []Ack{e.ack(0, 2, ackAccept)}}); code != 0 || codes[e.ref()] != 0 {
		t.Fatalf("a accepts: %d %v", code, codes)
	}
	if st := e.state(); st.Start != 3 || st.InFlight["ACQUIRED"] != 3 {
		t.Fatalf("after accept: %+v", st)
	}
	// A new coordinator over the same store: 0-2 stay done, 3-5 are
	// delivered again with their count.
	e.c.Close()
	c2, err := New(e.c.cfg, e.store, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	e.c = c2
	e.load()
	if st := e.state(); st.Start != 3 || st.InFlight["AVAILABLE"] != 3 {
		t.Fatalf("after reload: %+v", st)
	}
	e.join("a")
	if _, got := e.fetch("a", 0, 6, 10); !slices.Equal(got, []Acquired{{3, 5, 2}}) {
		t.Fatalf("after reload: %v", got)
	}
}

// TestSessionTimeoutReleases: a member whose session ends loses what it
// holds to the others.
func TestSessionTimeoutReleases(t *testing.T) {
	e := newEnv(t)
	e.join("a")
	if _, got := e.fetch("a", 0, 2, 10); len(got) != 1 {
		t.Fatalf("a: %v", got)
	}
	e.clock.Advance(900*time.Millisecond, e.settle)
	e.join("b")
	e.clock.Advance(2500*time.Millisecond, e.settle) // a's session (3 s) ends; its locks had ended too
	if _, got := e.fetch("b", 0, 2, 10); !slices.Equal(got, []Acquired{{0, 1, 2}}) {
		t.Fatalf("b: %v", got)
	}
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"g"}
	d := e.c.Describe(context.Background(), req)()
	if len(d.Groups[0].Members) != 1 || d.Groups[0].Members[0].MemberID != "b" {
		t.Fatalf("describe: %+v", d.Groups[0])
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	v := snapshotValue{SnapshotEpoch: 3, StateEpoch: 1, LeaderEpoch: -1, StartOffset: 10, CreateTimestamp: 5, WriteTimestamp: 6,
		Batches: []StateBatch{{10, 12, stateAvailable, 1}, {13, 13, stateArchived, 2}}}
	got, err := parseSnapshotValue(v.encode())
	if err != nil || got.StartOffset != 10 || !slices.Equal(got.Batches, v.Batches) || got.SnapshotEpoch != 3 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	g, k, ver, err := parseKey(snapshotKey("grp", partKey{[16]byte{9}, 4}))
	if err != nil || g != "grp" || k.partition != 4 || k.topic[0] != 9 || ver != 0 {
		t.Fatalf("key: %s %+v %d %v", g, k, ver, err)
	}
}

// TestReloadAtDeliveryLimit: records written while acquired for their
// last allowed delivery come back from the snapshot AVAILABLE with the
// delivery count at the limit; after a reload they are archived, not
// delivered a time too many.
func TestReloadAtDeliveryLimit(t *testing.T) {
	e := newEnv(t) // delivery limit 2
	e.join("a")
	e.join("b")
	if _, got := e.fetch("a", 0, 2, 2); !slices.Equal(got, []Acquired{{0, 1, 1}}) {
		t.Fatalf("a: %v", got)
	}
	e.clock.Advance(1500*time.Millisecond, e.settle)
	if _, got := e.fetch("a", 1, 2, 2); !slices.Equal(got, []Acquired{{0, 1, 2}}) {
		t.Fatalf("a, last delivery: %v", got)
	}
	// b's accept writes a snapshot with 0-1 in it (as AVAILABLE, count 2).
	if _, got := e.fetch("b", 0, 4, 2); !slices.Equal(got, []Acquired{{2, 3, 1}}) {
		t.Fatalf("b: %v", got)
	}
	if code, codes := e.c.Acknowledge(context.Background(), AckStart{Group: "g", Member: "b", Epoch: 1, Acks: []Ack{e.ack(2, 3, ackAccept)}}); code != 0 || codes[e.ref()] != 0 {
		t.Fatalf("b accepts: %d %v", code, codes)
	}
	e.c.Close()
	c2, err := New(e.c.cfg, e.store, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	e.c = c2
	e.load()
	e.join("a")
	if _, got := e.fetch("a", 0, 6, 10); !slices.Equal(got, []Acquired{{4, 5, 1}}) {
		t.Fatalf("after reload: %v, want only 4-5", got)
	}
	if st := e.state(); st.Start != 4 {
		t.Fatalf("after reload: %+v, want start 4", st)
	}
}
