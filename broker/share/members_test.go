package share

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reopen closes the env's coordinator and loads a new one from its store,
// as a restarted broker does.
func (e *env) reopen() {
	e.t.Helper()
	e.c.Close()
	c2, err := New(e.c.cfg, e.store, e.clock)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c2.Close)
	e.c = c2
	e.load()
}

func (e *env) heartbeat(member string, epoch int32) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
	return e.c.Heartbeat(context.Background(), ClientInfo{ClientID: "cl-" + member, ClientHost: "/10.0.0.1"}, req)()
}

func (e *env) describe() kmsg.ShareGroupDescribeResponseGroup {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"g"}
	return e.c.Describe(context.Background(), req)().Groups[0]
}

// TestMembershipReload: the group epoch, each member's epoch, metadata
// and assignment survive a reload of the coordinator; a member
// heartbeating at its epoch continues; a member silent since the reload
// is removed once a session timeout has passed from the load; one that
// left, and a deleted group, stay gone.
func TestMembershipReload(t *testing.T) {
	e := newEnv(t)
	ra, rb := e.join("a"), e.join("b")
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		t.Fatalf("join: %+v %+v", ra, rb)
	}
	if r := e.heartbeat("a", ra.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("a catches up: %+v", r)
	}
	e.join("c")
	if r := e.heartbeat("c", -1); r.ErrorCode != 0 {
		t.Fatalf("c leaves: %+v", r)
	}
	before := e.describe()
	if before.GroupEpoch != 4 || len(before.Members) != 2 {
		t.Fatalf("before reload: %+v", before)
	}

	e.reopen()
	after := e.describe()
	if after.ErrorCode != 0 || after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch || after.GroupState != "Stable" {
		t.Fatalf("after reload: %+v, before %+v", after, before)
	}
	if len(after.Members) != len(before.Members) {
		t.Fatalf("members after reload: %+v", after.Members)
	}
	for i, m := range after.Members {
		b := before.Members[i]
		if m.MemberID != b.MemberID || m.MemberEpoch != b.MemberEpoch || m.ClientID != b.ClientID || m.ClientHost != b.ClientHost ||
			!slices.Equal(m.SubscribedTopicNames, b.SubscribedTopicNames) || len(m.Assignment.TopicPartitions) != len(b.Assignment.TopicPartitions) {
			t.Fatalf("member %d after reload: %+v, before %+v", i, m, b)
		}
	}
	// a continues at its epoch, without a rejoin; b, two epochs behind
	// (its epoch is from before c came and went), is brought up to date.
	if r := e.heartbeat("a", before.Members[0].MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != 4 {
		t.Fatalf("a after reload: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	if r := e.heartbeat("b", 9); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("b at a wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := e.heartbeat("c", 4); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("c, which left: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Sessions restart at the load: a keeps heartbeating, b is silent
	// and is removed after its session timeout (3 s), which moves the
	// epoch.
	for range 4 {
		e.clock.Advance(time.Second, e.settle)
		e.heartbeat("a", 4)
	}
	if d := e.describe(); len(d.Members) != 1 || d.Members[0].MemberID != "a" || d.GroupEpoch != 5 {
		t.Fatalf("after b's session: %+v", d)
	}
	e.reopen()
	if d := e.describe(); len(d.Members) != 1 || d.GroupEpoch != 5 {
		t.Fatalf("second reload: %+v", d)
	}
	if r := e.heartbeat("a", -1); r.ErrorCode != 0 {
		t.Fatalf("a leaves: %+v", r)
	}
	if code := e.c.DeleteGroup(context.Background(), "g")(); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	e.reopen()
	if d := e.describe(); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group after reload: %+v", d)
	}
}

// TestMembershipRecordEncoding checks the records against Kafka's
// schemas, field by field: the key version is the record type, strings
// of keys have int16 lengths, values are version 0 in the flexible
// encoding (compact strings and arrays, tagged fields).
func TestMembershipRecordEncoding(t *testing.T) {
	rack := "r1"
	mem := &member{id: "m", epoch: 7, rack: &rack, clientID: "c", clientHost: "/h", subscribed: []string{"t"},
		assigned: assignment{{1}: {0, 2}}}
	r := memberMetadataRecord("g", mem)
	wantKey := []byte{0, 10, 0, 1, 'g', 0, 1, 'm'}
	wantValue := []byte{0, 0, 3, 'r', '1', 2, 'c', 3, '/', 'h', 2, 2, 't', 0}
	if !bytes.Equal(r.Key, wantKey) || !bytes.Equal(r.Value, wantValue) {
		t.Fatalf("member metadata: % x / % x", r.Key, r.Value)
	}
	r = currentAssignmentRecord("g", mem, 6)
	want := []byte{0, 0, 0, 0, 0, 7, 0, 0, 0, 6, 0, 2, 1}
	want = append(want, make([]byte, 15)...)
	want = append(want, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0)
	if !bytes.Equal(r.Key[:2], []byte{0, 14}) || !bytes.Equal(r.Value, want) {
		t.Fatalf("current assignment: % x", r.Value)
	}
	r = groupMetadataRecord("g", 3)
	if !bytes.Equal(r.Key, []byte{0, 11, 0, 1, 'g'}) || len(r.Value) != 2+4+8+1 || binary.BigEndian.Uint32(r.Value[2:]) != 3 {
		t.Fatalf("group metadata: % x / % x", r.Key, r.Value)
	}
	if r := targetMetadataRecord("g", 3, 0); !bytes.Equal(r.Key[:2], []byte{0, 12}) || !bytes.Equal(r.Value, []byte{0, 0, 0, 0, 0, 3, 0}) {
		t.Fatalf("target metadata: % x / % x", r.Key, r.Value)
	}
	// With its time, AssignmentTimestamp, tagged field 0 (KIP-1263).
	if r := targetMetadataRecord("g", 3, 0x0102); !bytes.Equal(r.Value, []byte{0, 0, 0, 0, 0, 3, 1, 0, 8, 0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("target metadata with its time: % x", r.Value)
	}
	groups := map[string]*loadedMembership{}
	for _, rec := range []struct {
		typ  int16
		k, v []byte
	}{
		{recMemberMetadata, memberMetadataRecord("g", mem).Key, memberMetadataRecord("g", mem).Value},
		{recCurrentAssignment, currentAssignmentRecord("g", mem, 6).Key, currentAssignmentRecord("g", mem, 6).Value},
		{recTargetMember, targetMemberRecord("g", "m", mem.assigned).Key, targetMemberRecord("g", "m", mem.assigned).Value},
		{recGroupMetadata, groupMetadataRecord("g", 7).Key, groupMetadataRecord("g", 7).Value},
		{recTargetMetadata, targetMetadataRecord("g", 6, 1234).Key, targetMetadataRecord("g", 6, 1234).Value},
	} {
		if err := replayMembership(groups, rec.typ, rec.k, rec.v); err != nil {
			t.Fatal(err)
		}
	}
	g := emptyGroup("g", 0)
	restoreMembership(g, groups["g"])
	got := g.members["m"]
	if g.epoch != 7 || got == nil || got.epoch != 7 || *got.rack != "r1" || got.clientHost != "/h" || !slices.Equal(got.subscribed, []string{"t"}) ||
		!slices.Equal(got.assigned[[16]byte{1}], []int32{0, 2}) || !slices.Equal(g.target["m"][[16]byte{1}], []int32{0, 2}) {
		t.Fatalf("replayed: %+v %+v", g, got)
	}
	if g.assignmentEpoch != 6 || g.assignmentTimestampMs != 1234 {
		t.Fatalf("replayed target at epoch %d, time %d; want 6 and 1234", g.assignmentEpoch, g.assignmentTimestampMs)
	}
}

// TestShareAssignmentInterval: with group.share.assignment.interval.ms
// (Kafka 4.4), a member joining within the interval of the last target
// takes that target's epoch and nothing, the group epoch moving ahead of
// the assignment epoch; the first heartbeat after the interval computes
// the next target. The target's time is in the log, so a reloaded
// coordinator keeps spacing them, and the group's
// share.assignment.interval.ms overrides the broker's.
func TestShareAssignmentInterval(t *testing.T) {
	var groupInterval atomic.Int32
	groupInterval.Store(-1)
	e := newEnvWith(t, func(c *Config) {
		c.AssignmentIntervalMs = 1000
		c.Topics = fixedTopics{"t": {ID: [16]byte{1}, Partitions: 4}}
		c.GroupConfig = func(group, name string) (string, bool) {
			if n := groupInterval.Load(); name == "share.assignment.interval.ms" && n >= 0 {
				return strconv.Itoa(int(n)), true
			}
			return "", false
		}
	})
	held := func(r *kmsg.ShareGroupHeartbeatResponse) int { // of the one topic
		if r.Assignment == nil || len(r.Assignment.TopicPartitions) == 0 {
			return 0
		}
		return len(r.Assignment.TopicPartitions[0].Partitions)
	}
	epochs := func(wantGroup, wantAssignment int32) {
		t.Helper()
		d := e.describe()
		if d.GroupEpoch != wantGroup || d.AssignmentEpoch != wantAssignment {
			t.Fatalf("group epoch %d, assignment epoch %d; want %d and %d", d.GroupEpoch, d.AssignmentEpoch, wantGroup, wantAssignment)
		}
	}
	if r := e.join("a"); r.ErrorCode != 0 || r.MemberEpoch != 1 || held(r) != 4 {
		t.Fatalf("a joins: %+v, %d partitions; want epoch 1 and all 4", r, held(r))
	}
	if r := e.join("b"); r.ErrorCode != 0 || r.MemberEpoch != 1 || held(r) != 0 {
		t.Fatalf("b joins within the interval: %+v, %d partitions; want epoch 1 and none", r, held(r))
	}
	epochs(2, 1)
	e.clock.Advance(999*time.Millisecond, e.settle)
	if r := e.heartbeat("b", 1); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("b before the interval ended: %+v, want epoch 1", r)
	}
	e.clock.Advance(time.Millisecond, e.settle)
	if r := e.heartbeat("b", 1); r.ErrorCode != 0 || r.MemberEpoch != 2 || held(r) != 2 {
		t.Fatalf("b after the interval: %+v, %d partitions; want epoch 2 and 2 partitions", r, held(r))
	}
	if r := e.heartbeat("a", 1); r.ErrorCode != 0 || r.MemberEpoch != 2 || held(r) != 2 {
		t.Fatalf("a after the interval: %+v, %d partitions; want epoch 2 and 2 partitions", r, held(r))
	}
	epochs(2, 2)

	// Reloaded, the coordinator knows when the target was computed: a
	// join right after still waits.
	e.settle()
	e.reopen()
	if r := e.join("c"); r.ErrorCode != 0 || r.MemberEpoch != 2 || held(r) != 0 {
		t.Fatalf("c joins after the reload, within the interval: %+v, %d partitions; want epoch 2 and none", r, held(r))
	}
	epochs(3, 2)
	// The group's own interval rules: 0 computes at once.
	groupInterval.Store(0)
	if r := e.heartbeat("c", 2); r.ErrorCode != 0 || r.MemberEpoch != 3 || held(r) == 0 {
		t.Fatalf("c with the group's interval at 0: %+v, %d partitions; want epoch 3 and some", r, held(r))
	}
	epochs(3, 3)
}
