package share

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// subscribe is a heartbeat of a member at its epoch that (re)states its
// subscription.
func (e *env) subscribe(member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", member, epoch, topics
	return e.c.Heartbeat(context.Background(), ClientInfo{ClientID: "cl-" + member, ClientHost: "/10.0.0.1"}, req)()
}

// membership is the group as ShareGroupDescribe shows it, in one line.
func (e *env) membership() string {
	d := e.describe()
	if d.ErrorCode != 0 {
		return kerr.ErrorForCode(d.ErrorCode).Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch %d/%d", d.GroupState, d.GroupEpoch, d.AssignmentEpoch)
	for _, m := range d.Members {
		fmt.Fprintf(&b, "; %s@%d %s %v", m.MemberID, m.MemberEpoch, m.ClientID, m.SubscribedTopicNames)
		for _, tp := range m.Assignment.TopicPartitions {
			fmt.Fprintf(&b, " %s%v", tp.Topic, tp.Partitions)
		}
	}
	return b.String()
}

func twoTopics(c *Config) {
	c.Topics = fixedTopics{"t": {ID: [16]byte{1}, Partitions: 2}, "u": {ID: [16]byte{2}, Partitions: 1}}
}

// TestMembershipRevertHeartbeat: while the log refuses writes, a join, a
// subscription change and a leave answer the error and leave the group
// exactly as it was; sent again once the log takes writes, each
// succeeds, and a reload shows what was answered.
func TestMembershipRevertHeartbeat(t *testing.T) {
	e := newEnvWith(t, twoTopics)
	ra := e.subscribe("a", 0, "t")
	if ra.ErrorCode != 0 || ra.MemberEpoch != 1 {
		t.Fatalf("a joins: %+v", ra)
	}
	before := e.membership()
	e.store.SetFail(kerr.NotLeaderForPartition)
	steps := []struct {
		name string
		hb   func() *kmsg.ShareGroupHeartbeatResponse
	}{
		{"b joins", func() *kmsg.ShareGroupHeartbeatResponse { return e.subscribe("b", 0, "t") }},
		{"a subscribes to u", func() *kmsg.ShareGroupHeartbeatResponse { return e.subscribe("a", 1, "t", "u") }},
		{"a leaves", func() *kmsg.ShareGroupHeartbeatResponse { return e.heartbeat("a", -1) }},
	}
	for _, s := range steps {
		if r := s.hb(); r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("%s with a failing log: %v", s.name, kerr.ErrorForCode(r.ErrorCode))
		}
		if got := e.membership(); got != before {
			t.Fatalf("after %s failed:\n got %s\nwant %s", s.name, got, before)
		}
	}
	e.store.SetFail(nil)
	if r := e.subscribe("b", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("b joins again: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	if r := e.subscribe("a", 1, "t", "u"); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("a subscribes to u again: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	want := "Stable epoch 3/3; a@3 cl-a [t u] t[0] u[0]; b@2 cl-b [t] t[1]"
	if got := e.membership(); got != want {
		t.Fatalf("after the retries:\n got %s\nwant %s", got, want)
	}
	if r := e.heartbeat("a", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("a leaves again: %+v", r)
	}
	want = "Stable epoch 4/4; b@2 cl-b [t] t[1]"
	if got := e.membership(); got != want {
		t.Fatalf("after a left:\n got %s\nwant %s", got, want)
	}
	e.reopen()
	if got := e.membership(); got != want {
		t.Fatalf("after a reload:\n got %s\nwant %s", got, want)
	}
}

// TestMembershipRevertNewGroup: the first join of a group whose records
// cannot be written leaves no group behind, nor share-partition state;
// sent again, it creates the group at epoch 1.
func TestMembershipRevertNewGroup(t *testing.T) {
	e := newEnv(t)
	e.store.SetFail(kerr.NotLeaderForPartition)
	if r := e.join("a"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join with a failing log: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := e.membership(); got != kerr.GroupIDNotFound.Error() {
		t.Fatalf("after the failed join: %s", got)
	}
	if sum := e.c.ReadStateSummary(context.Background(), StateKey{Group: "g", TopicID: e.tid})(); sum.StartOffset != -1 {
		t.Fatalf("share partition initialized by a failed join: %+v", sum)
	}
	e.store.SetFail(nil)
	if r := e.join("a"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join again: %+v", r)
	}
	if got, want := e.membership(), "Stable epoch 1/1; a@1  [t] t[0]"; got != want {
		t.Fatalf("after the join:\n got %s\nwant %s", got, want)
	}
	if sum := e.c.ReadStateSummary(context.Background(), StateKey{Group: "g", TopicID: e.tid})(); sum.StartOffset != 0 {
		t.Fatalf("share partition after the join: %+v", sum)
	}
}

// TestMembershipRevertSessionTimer: a heartbeat whose records cannot be
// written does not extend the member's session, and a leave that cannot
// be written leaves the session running: the member is removed when the
// session it had before ends.
func TestMembershipRevertSessionTimer(t *testing.T) {
	e := newEnvWith(t, twoTopics)
	e.subscribe("a", 0, "t")
	e.clock.Advance(2*time.Second, e.settle)
	if r := e.heartbeat("a", 1); r.ErrorCode != 0 {
		t.Fatalf("a heartbeats: %+v", r) // its session now ends at 5 s
	}
	e.clock.Advance(time.Second, e.settle)
	e.store.SetFail(kerr.NotLeaderForPartition)
	if r := e.subscribe("a", 1, "t", "u"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("subscription change with a failing log: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := e.heartbeat("a", -1); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("leave with a failing log: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	e.store.SetFail(nil)
	e.clock.Advance(1900*time.Millisecond, e.settle) // 4.9 s
	if d := e.describe(); len(d.Members) != 1 || d.GroupEpoch != 1 {
		t.Fatalf("at 4.9 s: %s", e.membership())
	}
	e.clock.Advance(200*time.Millisecond, e.settle) // 5.1 s
	if got, want := e.membership(), "Empty epoch 2/2"; got != want {
		t.Fatalf("at 5.1 s: got %s, want %s", got, want)
	}
}

// TestMembershipRevertExpiry: a session expiry that cannot be written
// leaves the members in the group; the expiry is tried again and, once
// the log takes writes, removes them.
func TestMembershipRevertExpiry(t *testing.T) {
	e := newEnvWith(t, twoTopics)
	e.subscribe("a", 0, "t")
	e.subscribe("b", 0, "t")
	before := e.membership()
	e.store.SetFail(kerr.NotLeaderForPartition)
	e.clock.Advance(4*time.Second, e.settle) // past the 3 s sessions, and a retry
	if got := e.membership(); got != before {
		t.Fatalf("after failed expiries:\n got %s\nwant %s", got, before)
	}
	e.store.SetFail(nil)
	e.clock.Advance(time.Second, e.settle)
	if got, want := e.membership(), "Empty epoch 4/4"; got != want {
		t.Fatalf("after the expiries: got %s, want %s", got, want)
	}
	e.reopen()
	if got, want := e.membership(), "Empty epoch 4/4"; got != want {
		t.Fatalf("after a reload: got %s, want %s", got, want)
	}
}

// TestMembershipRevertDelete: DeleteGroups of a group whose tombstones
// cannot be written answers the error and leaves the group, its share
// partition and its durable state; sent again, it deletes them for good.
func TestMembershipRevertDelete(t *testing.T) {
	e := newEnv(t)
	e.join("a")
	if _, got := e.fetch("a", 0, 4, 4); !slices.Equal(got, []Acquired{{0, 3, 1}}) {
		t.Fatalf("a: %v", got)
	}
	if top, code := e.ackNow("a", 1, e.ack(0, 1, ackAccept)); top != 0 || code != 0 {
		t.Fatalf("ack: %d %v", top, kerr.ErrorForCode(code))
	}
	if r := e.heartbeat("a", -1); r.ErrorCode != 0 {
		t.Fatalf("a leaves: %+v", r)
	}
	before, st := e.membership(), e.state()
	e.store.SetFail(kerr.NotLeaderForPartition)
	if code := e.c.DeleteGroup(context.Background(), "g")(); code != kerr.NotCoordinator.Code {
		t.Fatalf("delete with a failing log: %v", kerr.ErrorForCode(code))
	}
	if got := e.membership(); got != before {
		t.Fatalf("after the failed delete:\n got %s\nwant %s", got, before)
	}
	if got := e.state(); got.Start != st.Start || got.InFlight["AVAILABLE"] != st.InFlight["AVAILABLE"] {
		t.Fatalf("share partition after the failed delete: %+v, was %+v", got, st)
	}
	if sum := e.c.ReadStateSummary(context.Background(), StateKey{Group: "g", TopicID: e.tid})(); sum.StartOffset != 2 {
		t.Fatalf("durable state after the failed delete: %+v", sum)
	}
	e.store.SetFail(nil)
	if code := e.c.DeleteGroup(context.Background(), "g")(); code != 0 {
		t.Fatalf("delete again: %v", kerr.ErrorForCode(code))
	}
	if got := e.membership(); got != kerr.GroupIDNotFound.Error() {
		t.Fatalf("after the delete: %s", got)
	}
	e.reopen()
	if got := e.membership(); got != kerr.GroupIDNotFound.Error() {
		t.Fatalf("after a reload: %s", got)
	}
	if sum := e.c.ReadStateSummary(context.Background(), StateKey{Group: "g", TopicID: e.tid})(); sum.StartOffset != -1 {
		t.Fatalf("durable state after the delete and a reload: %+v", sum)
	}
}

// TestMembershipRevertChained: a join queued behind another join whose
// write is in flight is built on it; when both writes fail, both are
// reverted (the later first, then the earlier it waited for), as Kafka
// reverts every uncommitted change past a failed write.
func TestMembershipRevertChained(t *testing.T) {
	e := newEnvWith(t, twoTopics)
	e.subscribe("a", 0, "t")
	before := e.membership()
	e.store.Gate.Set(true)
	codes := make(chan int16, 2)
	go func() { codes <- e.subscribe("b", 0, "t").ErrorCode }()
	for e.store.Held() == 0 {
		time.Sleep(time.Millisecond)
	}
	go func() { codes <- e.subscribe("c", 0, "t").ErrorCode }()
	for !strings.Contains(e.membership(), "c@") {
		time.Sleep(time.Millisecond)
	}
	e.store.SetFail(kerr.NotLeaderForPartition)
	e.store.Gate.Set(false)
	for range 2 {
		if code := <-codes; code != kerr.NotCoordinator.Code {
			t.Fatalf("join with a failing log: %v", kerr.ErrorForCode(code))
		}
	}
	if got := e.membership(); got != before {
		t.Fatalf("after both joins failed:\n got %s\nwant %s", got, before)
	}
	e.store.SetFail(nil)
	if r := e.subscribe("b", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("b joins again: %+v", r)
	}
	if r := e.subscribe("c", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("c joins again: %+v", r)
	}
}
