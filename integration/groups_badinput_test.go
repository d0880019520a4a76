package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// grpRaw sends raw group requests straight to the one broker, so that what
// comes back is gregor's answer, not a client's retry of it.
type grpRaw struct {
	t *testing.T
	b *kgo.Broker
}

func (r grpRaw) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.b.Request(ctx, req)
	if err != nil {
		r.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func grpConsumerProtocol(name string, topics ...string) kmsg.JoinGroupRequestProtocol {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = name
	p.Metadata = meta.AppendTo(nil)
	return p
}

func (r grpRaw) joinReq(group, memberID, protocolType string, protocols ...kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupResponse {
	r.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType, req.Protocols = group, memberID, protocolType, protocols
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(grpSessionTimeout/time.Millisecond), 10_000
	return r.do(req).(*kmsg.JoinGroupResponse)
}

// join is a new member's whole join (KIP-394: the first JoinGroup hands
// out the member id); it fails the test unless the join succeeds.
func (r grpRaw) join(group string, protocols ...kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupResponse {
	r.t.Helper()
	first := r.joinReq(group, "", "consumer", protocols...)
	if err := kerr.ErrorForCode(first.ErrorCode); err != kerr.MemberIDRequired || first.MemberID == "" {
		r.t.Fatalf("first JoinGroup of %.40s: %v (member %q), want MEMBER_ID_REQUIRED with an id", group, err, first.MemberID)
	}
	resp := r.joinReq(group, first.MemberID, "consumer", protocols...)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		r.t.Fatalf("JoinGroup of %.40s: %v", group, err)
	}
	return resp
}

func (r grpRaw) sync(group, member string, gen int32, protocolType, protocol string, assign map[string][]byte) *kmsg.SyncGroupResponse {
	r.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	req.ProtocolType, req.Protocol = kmsg.StringPtr(protocolType), kmsg.StringPtr(protocol)
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return r.do(req).(*kmsg.SyncGroupResponse)
}

func (r grpRaw) heartbeat(group, member string, gen int32) error {
	r.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	return kerr.ErrorForCode(r.do(req).(*kmsg.HeartbeatResponse).ErrorCode)
}

func (r grpRaw) leave(group, member string) (top, each error) {
	r.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	mi := kmsg.NewLeaveGroupRequestMember()
	mi.MemberID = member
	req.Members = []kmsg.LeaveGroupRequestMember{mi}
	resp := r.do(req).(*kmsg.LeaveGroupResponse)
	if len(resp.Members) == 1 {
		each = kerr.ErrorForCode(resp.Members[0].ErrorCode)
	}
	return kerr.ErrorForCode(resp.ErrorCode), each
}

// commit commits offset on each topic/partition and returns the errors by
// "topic/partition".
func (r grpRaw) commit(group, member string, gen int32, offset int64, tps map[string][]int32) map[string]error {
	r.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	for topic, ps := range tps {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	out := make(map[string]error)
	for _, rt := range r.do(req).(*kmsg.OffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = kerr.ErrorForCode(rp.ErrorCode)
		}
	}
	return out
}

// fetch returns a group's committed offsets of topic partition 0..n-1
// (-1 for none).
func (r grpRaw) fetch(group, topic string) (error, map[int32]int64) {
	r.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp := r.do(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 {
		r.t.Fatalf("OffsetFetch answered %d groups", len(resp.Groups))
	}
	out := make(map[int32]int64)
	for _, t := range resp.Groups[0].Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return kerr.ErrorForCode(resp.Groups[0].ErrorCode), out
}

func (r grpRaw) describe(group string) kmsg.DescribeGroupsResponseGroup {
	r.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	return r.do(req).(*kmsg.DescribeGroupsResponse).Groups[0]
}

func (r grpRaw) deleteGroup(group string) error {
	r.t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	return kerr.ErrorForCode(r.do(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
}

func grpWant(t *testing.T, what string, got, want error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestGroupsBadInput sends the classic group APIs what a broken or
// hostile client might, with raw requests, and checks each answer against
// Kafka's error code: unknown groups and members, wrong generations, wrong
// protocol types and protocols, oversized member metadata, an assignment
// naming members not in the group, commits for unknown topics and
// partitions, and group ids of 0 and 10,000 characters. After all of it
// the group still works: its member heartbeats, a second member joins, and
// the group rebalances to Stable and is deleted once empty.
func TestGroupsBadInput(t *testing.T) {
	t.Parallel()
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	const topic, group = "bad", "bad-group"
	createTopic(t, p.addr, topic, 2)
	_, b := grpRawBroker(t, p.addr)
	r := grpRaw{t, b}
	grpWaitCoordinator(t, b, group)
	rangeProto := grpConsumerProtocol("range", topic)

	// A stable group of one member, whose leader assigned partitions to
	// members that do not exist: those entries are ignored, as Kafka
	// ignores them.
	j := r.join(group, rangeProto)
	m1, gen := j.MemberID, j.Generation
	if j.LeaderID != m1 || len(j.Members) != 1 {
		t.Fatalf("JoinGroup: leader %s, %d members; want %s alone", j.LeaderID, len(j.Members), m1)
	}
	assign := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = topic, []int32{0, 1}
	assign.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
	ab := assign.AppendTo(nil)
	s := r.sync(group, m1, gen, "consumer", "range", map[string][]byte{m1: ab, "ghost-1": ab, "ghost-2": {1, 2, 3}})
	grpWant(t, "SyncGroup naming members not in the group", kerr.ErrorForCode(s.ErrorCode), nil)
	if string(s.MemberAssignment) != string(ab) {
		t.Fatalf("SyncGroup gave the leader %x, it assigned itself %x", s.MemberAssignment, ab)
	}
	if d := r.describe(group); d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != m1 {
		t.Fatalf("DescribeGroups after the ghost assignment: %s with %d members", d.State, len(d.Members))
	}

	// Unknown groups and members, wrong generations.
	grpWant(t, "Heartbeat to an unknown group", r.heartbeat("bad-nope", "m", 1), kerr.UnknownMemberID)
	grpWant(t, "SyncGroup to an unknown group", kerr.ErrorForCode(r.sync("bad-nope", "m", 1, "consumer", "range", nil).ErrorCode), kerr.UnknownMemberID)
	if top, each := r.leave("bad-nope", "m"); top != nil || each != kerr.UnknownMemberID {
		t.Fatalf("LeaveGroup from an unknown group: %v / %v, want UNKNOWN_MEMBER_ID for the member", top, each)
	}
	grpWant(t, "OffsetCommit v9 with a generation to an unknown group",
		r.commit("bad-nope", "m", 3, 1, map[string][]int32{topic: {0}})[topic+"/0"], kerr.GroupIDNotFound)
	grpWant(t, "Heartbeat of an unknown member", r.heartbeat(group, "nobody", gen), kerr.UnknownMemberID)
	grpWant(t, "Heartbeat with the next generation", r.heartbeat(group, m1, gen+1), kerr.IllegalGeneration)
	grpWant(t, "Heartbeat with the previous generation", r.heartbeat(group, m1, gen-1), kerr.IllegalGeneration)
	grpWant(t, "SyncGroup with a wrong generation", kerr.ErrorForCode(r.sync(group, m1, gen+5, "consumer", "range", nil).ErrorCode), kerr.IllegalGeneration)
	grpWant(t, "OffsetCommit with a wrong generation", r.commit(group, m1, gen+1, 1, map[string][]int32{topic: {0}})[topic+"/0"], kerr.IllegalGeneration)
	grpWant(t, "OffsetCommit of an unknown member", r.commit(group, "nobody", gen, 1, map[string][]int32{topic: {0}})[topic+"/0"], kerr.UnknownMemberID)
	grpWant(t, "OffsetCommit without a member into a live group", r.commit(group, "", -1, 1, map[string][]int32{topic: {0}})[topic+"/0"], kerr.UnknownMemberID)

	// Wrong protocol type and protocols.
	grpWant(t, "JoinGroup of protocol type connect into a consumer group",
		kerr.ErrorForCode(r.joinReq(group, "", "connect", rangeProto).ErrorCode), kerr.InconsistentGroupProtocol)
	grpWant(t, "JoinGroup with no protocol in common",
		kerr.ErrorForCode(r.joinReq(group, "", "consumer", grpConsumerProtocol("roundrobin", topic)).ErrorCode), kerr.InconsistentGroupProtocol)
	grpWant(t, "JoinGroup with no protocols",
		kerr.ErrorForCode(r.joinReq(group, "", "consumer").ErrorCode), kerr.InconsistentGroupProtocol)
	grpWant(t, "SyncGroup with protocol type connect",
		kerr.ErrorForCode(r.sync(group, m1, gen, "connect", "range", nil).ErrorCode), kerr.InconsistentGroupProtocol)
	grpWant(t, "SyncGroup with protocol roundrobin",
		kerr.ErrorForCode(r.sync(group, m1, gen, "consumer", "roundrobin", nil).ErrorCode), kerr.InconsistentGroupProtocol)
	short := kmsg.NewPtrJoinGroupRequest()
	short.Group, short.ProtocolType, short.Protocols = group, "consumer", []kmsg.JoinGroupRequestProtocol{rangeProto}
	short.SessionTimeoutMillis, short.RebalanceTimeoutMillis = 10, 10_000
	grpWant(t, "JoinGroup with a session timeout below group.min.session.timeout.ms",
		kerr.ErrorForCode(r.do(short).(*kmsg.JoinGroupResponse).ErrorCode), kerr.InvalidSessionTimeout)

	// Commits for topics and partitions that do not exist fail alone.
	got := r.commit(group, m1, gen, 7, map[string][]int32{topic: {0, 1, 12}, "bad-no-topic": {0}})
	for tp, want := range map[string]error{topic + "/0": nil, topic + "/1": nil, topic + "/12": kerr.UnknownTopicOrPartition, "bad-no-topic/0": kerr.UnknownTopicOrPartition} {
		grpWant(t, "OffsetCommit of "+tp, got[tp], want)
	}
	if err, offs := r.fetch(group, topic); err != nil || len(offs) != 2 || offs[0] != 7 || offs[1] != 7 {
		t.Fatalf("OffsetFetch after the partial commit: %v %v", err, offs)
	}
	if _, offs := r.fetch(group, "bad-no-topic"); len(offs) != 0 {
		t.Fatalf("OffsetFetch of the unknown topic: %v", offs)
	}

	// Oversized member metadata: a member whose metadata makes the
	// group's record larger than __consumer_offsets takes. Its join
	// succeeds (metadata is only kept in memory) and the leader's sync,
	// which writes the group record, fails, as Kafka fails it
	// (RECORD_LIST_TOO_LARGE, answered as UNKNOWN_SERVER_ERROR); the
	// group itself is not stuck.
	grpOversized(t, r, topic)

	// Group ids of 0 characters: INVALID_GROUP_ID where Kafka checks;
	// Kafka keeps offsets of the empty group id for old clients.
	grpWant(t, "JoinGroup with group id \"\"", kerr.ErrorForCode(r.joinReq("", "", "consumer", rangeProto).ErrorCode), kerr.InvalidGroupID)
	grpWant(t, "SyncGroup with group id \"\"", kerr.ErrorForCode(r.sync("", "m", 1, "consumer", "range", nil).ErrorCode), kerr.InvalidGroupID)
	grpWant(t, "Heartbeat with group id \"\"", r.heartbeat("", "m", 1), kerr.InvalidGroupID)
	if top, _ := r.leave("", "m"); top != kerr.InvalidGroupID {
		t.Fatalf("LeaveGroup with group id \"\": %v, want INVALID_GROUP_ID", top)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = topic
	odt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = []kmsg.OffsetDeleteRequestTopic{odt}
	grpWant(t, "OffsetDelete with group id \"\"", kerr.ErrorForCode(r.do(od).(*kmsg.OffsetDeleteResponse).ErrorCode), kerr.InvalidGroupID)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{""}
	if c := r.do(fc).(*kmsg.FindCoordinatorResponse).Coordinators; len(c) != 1 || c[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator of group id \"\": %+v, want the coordinator of __consumer_offsets-0", c)
	}
	grpWant(t, "OffsetCommit into group id \"\"", r.commit("", "", -1, 3, map[string][]int32{topic: {1}})[topic+"/1"], nil)
	if err, offs := r.fetch("", topic); err != nil || offs[1] != 3 {
		t.Fatalf("OffsetFetch of group id \"\": %v %v", err, offs)
	}
	grpWant(t, "DeleteGroups of group id \"\"", r.deleteGroup(""), nil)

	// A group id of 10,000 characters is an ordinary group id.
	long := strings.Repeat("g", 10_000)
	grpWaitCoordinator(t, b, long)
	lj := r.join(long, rangeProto)
	ls := r.sync(long, lj.MemberID, lj.Generation, "consumer", "range", map[string][]byte{lj.MemberID: ab})
	grpWant(t, "SyncGroup of the long group", kerr.ErrorForCode(ls.ErrorCode), nil)
	grpWant(t, "Heartbeat of the long group", r.heartbeat(long, lj.MemberID, lj.Generation), nil)
	grpWant(t, "OffsetCommit of the long group", r.commit(long, lj.MemberID, lj.Generation, 9, map[string][]int32{topic: {0}})[topic+"/0"], nil)
	if err, offs := r.fetch(long, topic); err != nil || offs[0] != 9 {
		t.Fatalf("OffsetFetch of the long group: %v %v", err, offs)
	}
	if d := r.describe(long); d.Group != long || d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("DescribeGroups of the long group: %.20s... %s, %d members", d.Group, d.State, len(d.Members))
	}
	grpWant(t, "DeleteGroups of the long group with a member", r.deleteGroup(long), kerr.NonEmptyGroup)
	if top, each := r.leave(long, lj.MemberID); top != nil || each != nil {
		t.Fatalf("LeaveGroup of the long group: %v / %v", top, each)
	}
	grpWant(t, "DeleteGroups of the long group", r.deleteGroup(long), nil)

	// Nothing above disturbed the group: its member still heartbeats,
	// a second member's join rebalances it, and both end up Stable.
	grpWant(t, "Heartbeat after the bad input", r.heartbeat(group, m1, gen), nil)
	// The second member and the follower's SyncGroup get connections of
	// their own: a connection's group requests are served one at a time,
	// as on Kafka, so a parked JoinGroup or a follower's SyncGroup would
	// hold back the first member's requests.
	_, b2 := grpRawBroker(t, p.addr)
	_, b3 := grpRawBroker(t, p.addr)
	var wg sync.WaitGroup
	var j2 *kmsg.JoinGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		r2 := grpRaw{t, b2}
		first := r2.joinReq(group, "", "consumer", rangeProto)
		j2 = r2.joinReq(group, first.MemberID, "consumer", rangeProto)
	}()
	grpWaitFor(t, 10*time.Second, "the second member's join to start a rebalance", func() bool {
		return r.heartbeat(group, m1, gen) == kerr.RebalanceInProgress
	})
	rj := r.joinReq(group, m1, "consumer", rangeProto)
	wg.Wait()
	if kerr.ErrorForCode(rj.ErrorCode) != nil || kerr.ErrorForCode(j2.ErrorCode) != nil || rj.Generation != gen+1 || j2.Generation != gen+1 {
		t.Fatalf("rejoin: %v gen %d; second member: %v gen %d; want generation %d", kerr.ErrorForCode(rj.ErrorCode), rj.Generation,
			kerr.ErrorForCode(j2.ErrorCode), j2.Generation, gen+1)
	}
	leader, follower := rj, j2
	if j2.LeaderID == j2.MemberID {
		leader, follower = j2, rj
	}
	var fs *kmsg.SyncGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		fs = grpRaw{t, b3}.sync(group, follower.MemberID, follower.Generation, "consumer", "range", nil)
	}()
	ls2 := r.sync(group, leader.MemberID, leader.Generation, "consumer", "range", map[string][]byte{leader.MemberID: ab, follower.MemberID: {}})
	wg.Wait()
	if ls2.ErrorCode != 0 || fs.ErrorCode != 0 {
		t.Fatalf("sync after the rebalance: leader %v, follower %v", kerr.ErrorForCode(ls2.ErrorCode), kerr.ErrorForCode(fs.ErrorCode))
	}
	if d := r.describe(group); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("after the rebalance: %s with %d members", d.State, len(d.Members))
	}
	for _, id := range []string{leader.MemberID, follower.MemberID} {
		if top, each := r.leave(group, id); top != nil || each != nil {
			t.Fatalf("LeaveGroup: %v / %v", top, each)
		}
	}
	grpWant(t, "DeleteGroups of the emptied group", r.deleteGroup(group), nil)
}

// grpOversized joins a member with 2 MiB of metadata, more than one
// __consumer_offsets record may hold (max.message.bytes 1 MiB by default).
func grpOversized(t *testing.T, r grpRaw, topic string) {
	t.Helper()
	const group = "bad-oversized"
	big := kmsg.NewJoinGroupRequestProtocol()
	big.Name = "range"
	big.Metadata = make([]byte, 2<<20)
	j := r.join(group, big)
	if len(j.Members) != 1 || len(j.Members[0].ProtocolMetadata) != 2<<20 {
		t.Fatalf("JoinGroup with 2 MiB metadata: %d members", len(j.Members))
	}
	s := r.sync(group, j.MemberID, j.Generation, "consumer", "range", map[string][]byte{j.MemberID: {}})
	grpWant(t, "SyncGroup of a group with 2 MiB member metadata", kerr.ErrorForCode(s.ErrorCode), kerr.UnknownServerError)
	// The member leaves; the group takes an ordinary member.
	r.leave(group, j.MemberID)
	j2 := r.join(group, grpConsumerProtocol("range", topic))
	s2 := r.sync(group, j2.MemberID, j2.Generation, "consumer", "range", map[string][]byte{j2.MemberID: {}})
	grpWant(t, "SyncGroup after the oversized member left", kerr.ErrorForCode(s2.ErrorCode), nil)
	if top, each := r.leave(group, j2.MemberID); top != nil || each != nil {
		t.Fatalf("LeaveGroup: %v / %v", top, each)
	}
	grpWant(t, "DeleteGroups of the oversized member's group", r.deleteGroup(group), nil)
}
