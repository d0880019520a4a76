package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share-group requests of the authorization matrix. The matrix's
// share groups are sg (members join it) and sq (offsets only), neither
// of which has an ACL: only the super user passes with
// allow.everyone.if.no.acl.found off, everyone with it on, and the topic
// ACLs of t (bob denied everything) then decide.

var sessNF = kerr.ShareSessionNotFound.Code

// shareHeartbeatCode joins sg as a new member subscribed to topic and,
// once in, heartbeats until it is assigned topic's partition: Kafka
// assigns in the background, a heartbeat or two after the join (gregor
// at once), and ShareGroupDescribe's case needs the assignments.
func shareHeartbeatCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, who string) int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID = "sg", fmt.Sprintf("%s-%d", who, time.Now().UnixNano())
		req.SubscribedTopicNames = []string{topic}
		resp := send[*kmsg.ShareGroupHeartbeatResponse](t, cl, req)
		deadline := time.Now().Add(10 * time.Second)
		for resp.ErrorCode == 0 && (resp.Assignment == nil || len(resp.Assignment.TopicPartitions) == 0) {
			if time.Now().After(deadline) {
				t.Fatalf("share member %s of sg not assigned %s", req.MemberID, topic)
			}
			time.Sleep(100 * time.Millisecond)
			req.MemberEpoch, req.SubscribedTopicNames = resp.MemberEpoch, nil
			resp = send[*kmsg.ShareGroupHeartbeatResponse](t, cl, req)
		}
		return resp.ErrorCode
	}
}

func shareGroupDescribeCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"sg"}
	return send[*kmsg.ShareGroupDescribeResponse](t, cl, req).Groups[0].ErrorCode
}

// shareFetchCode continues a share session sq's member never opened.
func shareFetchCode(t *testing.T, cl *kgo.Client, who string) int16 {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("sq"), kmsg.StringPtr("m-"+who)
	req.ShareSessionEpoch, req.MaxBytes, req.MaxRecords = 1, 1<<20, 10
	return send[*kmsg.ShareFetchResponse](t, cl, req).ErrorCode
}

// shareAcknowledgeCode acknowledges in a share session never opened.
func shareAcknowledgeCode(t *testing.T, cl *kgo.Client, who string) int16 {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("sq"), kmsg.StringPtr("m-"+who)
	req.ShareSessionEpoch = 1
	return send[*kmsg.ShareAcknowledgeResponse](t, cl, req).ErrorCode
}

func describeShareOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = "sq"
	gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	gt.Topic, gt.Partitions = "t", []int32{0}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	rg := send[*kmsg.DescribeShareGroupOffsetsResponse](t, cl, req).Groups[0]
	if rg.ErrorCode != 0 || len(rg.Topics) == 0 {
		return rg.ErrorCode
	}
	return rg.Topics[0].Partitions[0].ErrorCode
}

// alterShareOffsetsCode starts sq (without members) over at offset 0 of
// t-0.
func alterShareOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = "sq"
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = "t"
	ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	at.Partitions = append(at.Partitions, ap)
	req.Topics = append(req.Topics, at)
	resp := send[*kmsg.AlterShareGroupOffsetsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// deleteShareOffsetsCode makes sq forget t, after the principal's
// AlterShareGroupOffsets gave sq state of t again where it may: Kafka
// answers UNKNOWN_TOPIC_OR_PARTITION for a topic the group has no state
// of (the principal before it deleted it).
func deleteShareOffsetsCode(t *testing.T, cl *kgo.Client, who string) int16 {
	alterShareOffsetsCode(t, cl, who)
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = "sq"
	req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "t"})
	resp := send[*kmsg.DeleteShareGroupOffsetsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].ErrorCode
}

// grant creates one ALLOW ACL as the super user.
func grant(t *testing.T, admin *kgo.Client, rt kmsg.ACLResourceType, name, principal string, op kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, aclCreation(rt, name, kmsg.ACLResourcePatternTypeLiteral, principal, op, kmsg.ACLPermissionTypeAllow))
	if r := send[*kmsg.CreateACLsResponse](t, admin, req).Results[0]; r.ErrorCode != 0 {
		t.Fatalf("create ACL %s %s %s: %v", name, principal, op, kerr.ErrorForCode(r.ErrorCode))
	}
}

// sharePart is a partition of a raw ShareFetch, with the offsets to
// ACCEPT in it.
type sharePart struct {
	topic       string
	first, last int64 // acknowledged when last >= first
}

// rawShareFetch sends a ShareFetch of parts at epoch and returns the
// answer by topic name (the test's topics) and partition 0.
func rawShareFetch(t *testing.T, cl *kgo.Client, group, member string, epoch int32, parts ...sharePart) (*kmsg.ShareFetchResponse, map[string]kmsg.ShareFetchResponseTopicPartition) {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	req.MaxBytes, req.MaxRecords, req.BatchSize = 1<<20, 100, 100
	for _, p := range parts {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicIDs[p.topic]
		rp := kmsg.NewShareFetchRequestTopicPartition()
		if p.last >= p.first {
			b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = p.first, p.last, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := send[*kmsg.ShareFetchResponse](t, cl, req)
	out := map[string]kmsg.ShareFetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for name, id := range topicIDs {
			if id == rt.TopicID && len(rt.Partitions) > 0 {
				out[name] = rt.Partitions[0]
			}
		}
	}
	return resp, out
}

// TestShareGroupAuthorization runs share groups over real sockets as PLAIN
// users with the StandardAuthorizer (allow.everyone.if.no.acl.found off):
// alice, with READ on group sa and on topic t, consumes t; a partition of
// free (no ACL) in her share session answers TOPIC_AUTHORIZATION_FAILED,
// is neither read nor acknowledged nor given share-partition state, until
// an ACL lets her read it at the next fetch; bob, denied everything on t,
// cannot subscribe, describe the group's t assignment, nor see, alter or
// delete t's share offsets; and each request answers in Kafka's shape.
func TestShareGroupAuthorization(t *testing.T) {
	s, clients := aclServer(t, false)
	if s == nil {
		t.Skip("reads the share coordinator of a gregor")
	}
	admin, alice, bob, anon := clients["admin"], clients["alice"], clients["bob"], clients["anonymous"]
	setUpACLs(t, admin)
	grant(t, admin, kmsg.ACLResourceTypeGroup, "sa", "User:alice", kmsg.ACLOperationRead)
	// From the start of the logs, so that what was produced is fetched.
	setGroupConfig(t, admin, "sa", "share.auto.offset.reset", "earliest")
	produceOneByOne(t, admin, "t", 3)
	produceOneByOne(t, admin, "free", 3)

	// ShareGroupHeartbeat: READ on the group, DESCRIBE on every topic
	// subscribed to.
	am := &shareMember{t: t, cl: alice, group: "sa", id: "alice-member"}
	if r := am.heartbeat(0, []string{"t", "free"}); r.ErrorCode != topicAF || r.ErrorMessage != nil {
		t.Fatalf("alice subscribing to t and free: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	// Straight to the broker: bob's client would ask FindCoordinator
	// first, which needs DESCRIBE on the group too.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sa", "bob-member", []string{"free"}
	if r := send[*kmsg.ShareGroupHeartbeatResponse](t, bob, hb); r.ErrorCode != groupAF || r.ErrorMessage != nil {
		t.Fatalf("bob joining sa: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := am.heartbeat(0, []string{"t"}); r.ErrorCode != 0 || r.MemberEpoch < 1 {
		t.Fatalf("alice joining sa: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}

	// ShareFetch: READ on the group, then on each topic of the session.
	if r, _ := rawShareFetch(t, bob, "sa", "bob-member", 0, sharePart{"t", 0, -1}); r.ErrorCode != groupAF || len(r.Topics) != 0 {
		t.Fatalf("bob fetching sa: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Topics)
	}
	_, parts := rawShareFetch(t, alice, "sa", "alice-member", 0, sharePart{"t", 0, -1}, sharePart{"free", 0, -1})
	if p := parts["t"]; p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].FirstOffset != 0 || p.AcquiredRecords[0].LastOffset != 2 {
		t.Fatalf("alice's fetch of t: %v %+v", kerr.ErrorForCode(p.ErrorCode), p.AcquiredRecords)
	}
	if p := parts["free"]; p.ErrorCode != topicAF || len(p.AcquiredRecords) != 0 || len(p.Records) != 0 || p.CurrentLeader.LeaderID != -1 {
		t.Fatalf("alice's fetch of free: %v %+v", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if _, ok := s.shares.coord.Partition(ctx10(t), "sa", topicIDs["free"], 0); ok {
		t.Fatal("share partition of free created for a principal that may not read it")
	}
	// The next fetch names no partition: free is in the session and still
	// refused; a piggy-backed acknowledgement of it is refused too.
	_, parts = rawShareFetch(t, alice, "sa", "alice-member", 1, sharePart{"free", 0, 0})
	if p := parts["free"]; p.ErrorCode != topicAF || p.AcknowledgeErrorCode != topicAF {
		t.Fatalf("alice's incremental fetch of free: %v ack %v", kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
	}

	// ShareAcknowledge: READ on the group, then on each topic.
	ack := func(cl *kgo.Client, member string, epoch int32, topics ...string) *kmsg.ShareAcknowledgeResponse {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("sa"), &member, epoch
		for _, name := range topics {
			rt := kmsg.NewShareAcknowledgeRequestTopic()
			rt.TopicID = topicIDs[name]
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = 0, 2, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return send[*kmsg.ShareAcknowledgeResponse](t, cl, req)
	}
	if r := ack(bob, "bob-member", 2, "t"); r.ErrorCode != groupAF || len(r.Topics) != 0 {
		t.Fatalf("bob acknowledging in sa: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := ack(alice, "alice-member", 2, "t", "free")
	codes := map[[16]byte]int16{}
	for _, rt := range r.Topics {
		codes[rt.TopicID] = rt.Partitions[0].ErrorCode
	}
	if r.ErrorCode != 0 || codes[topicIDs["t"]] != 0 || codes[topicIDs["free"]] != topicAF {
		t.Fatalf("alice acknowledging t and free: %v %v", kerr.ErrorForCode(r.ErrorCode), codes)
	}
	if info, ok := s.shares.coord.Partition(ctx10(t), "sa", topicIDs["t"], 0); !ok || info.Start != 3 {
		t.Fatalf("share partition of t after alice's acknowledgement: %+v %v", info, ok)
	}

	// An ACL takes effect at the next fetch: the session's free-0 is read.
	grant(t, admin, kmsg.ACLResourceTypeTopic, "free", "User:alice", kmsg.ACLOperationRead)
	_, parts = rawShareFetch(t, alice, "sa", "alice-member", 3)
	if p := parts["free"]; p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].LastOffset != 2 {
		t.Fatalf("alice's fetch of free once allowed: %v %+v", kerr.ErrorForCode(p.ErrorCode), p.AcquiredRecords)
	}

	// ShareGroupDescribe: DESCRIBE on the group, and on the topics its
	// members are assigned.
	describe := func(cl *kgo.Client) kmsg.ShareGroupDescribeResponseGroup {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs, req.IncludeAuthorizedOperations = []string{"sa"}, true
		return send[*kmsg.ShareGroupDescribeResponse](t, cl, req).Groups[0]
	}
	if g := describe(alice); g.ErrorCode != 0 || len(g.Members) != 1 || g.AuthorizedOperations != 1<<3|1<<8 {
		t.Fatalf("alice describing sa: %v members %d ops %b", kerr.ErrorForCode(g.ErrorCode), len(g.Members), g.AuthorizedOperations)
	}
	if g := describe(anon); g.ErrorCode != groupAF || g.GroupID != "sa" {
		t.Fatalf("anonymous describing sa: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	grant(t, admin, kmsg.ACLResourceTypeGroup, "sa", "User:bob", kmsg.ACLOperationRead)
	if g := describe(bob); g.ErrorCode != topicAF || len(g.Members) != 0 || g.ErrorMessage == nil || g.AuthorizedOperations != -2147483648 {
		t.Fatalf("bob describing sa, whose member is assigned t: %v %+v", kerr.ErrorForCode(g.ErrorCode), g)
	}

	// DescribeShareGroupOffsets: DESCRIBE on the group; of all topics
	// only those it may DESCRIBE, of those named the others refused.
	describeOffsets := func(cl *kgo.Client, topics ...string) kmsg.DescribeShareGroupOffsetsResponseGroup {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "sa"
		for _, name := range topics {
			gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			gt.Topic, gt.Partitions = name, []int32{0}
			g.Topics = append(g.Topics, gt)
		}
		req.Groups = append(req.Groups, g)
		return send[*kmsg.DescribeShareGroupOffsetsResponse](t, cl, req).Groups[0]
	}
	if g := describeOffsets(alice); g.ErrorCode != 0 || len(g.Topics) != 2 {
		t.Fatalf("alice describing all of sa's offsets: %v %+v", kerr.ErrorForCode(g.ErrorCode), g.Topics)
	}
	if g := describeOffsets(bob); g.ErrorCode != 0 || len(g.Topics) != 0 {
		t.Fatalf("bob describing all of sa's offsets: %v %+v", kerr.ErrorForCode(g.ErrorCode), g.Topics)
	}
	g := describeOffsets(bob, "t", "free")
	if g.ErrorCode != 0 || len(g.Topics) != 2 {
		t.Fatalf("bob describing sa's offsets of t and free: %v %+v", kerr.ErrorForCode(g.ErrorCode), g.Topics)
	}
	for _, rt := range g.Topics {
		p := rt.Partitions[0]
		if rt.TopicID != [16]byte{} || p.ErrorCode != topicAF || p.StartOffset != -1 || p.ErrorMessage == nil || *p.ErrorMessage != topicAuthzMessage {
			t.Errorf("bob's offsets of %s: %+v", rt.Topic, rt)
		}
	}
	if g := describeOffsets(anon, "t"); g.ErrorCode != groupAF || len(g.Topics) != 0 {
		t.Fatalf("anonymous describing sa's offsets: %v", kerr.ErrorForCode(g.ErrorCode))
	}

	// AlterShareGroupOffsets: READ on the group and on each topic, once
	// the group has no members.
	if r := am.heartbeat(-1, nil); r.ErrorCode != 0 {
		t.Fatalf("alice leaving: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	alter := func(cl *kgo.Client, topics ...string) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "sa"
		for _, name := range topics {
			at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			at.Topic = name
			ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			ap.StartOffset = 1
			at.Partitions = append(at.Partitions, ap)
			req.Topics = append(req.Topics, at)
		}
		return send[*kmsg.AlterShareGroupOffsetsResponse](t, cl, req)
	}
	if r := alter(anon, "free"); r.ErrorCode != groupAF || r.ErrorMessage == nil || *r.ErrorMessage != groupAuthzMessage || len(r.Topics) != 0 {
		t.Fatalf("anonymous altering sa: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	ar := alter(bob, "t", "free")
	if ar.ErrorCode != 0 || len(ar.Topics) != 2 {
		t.Fatalf("bob altering t and free: %v %+v", kerr.ErrorForCode(ar.ErrorCode), ar.Topics)
	}
	for _, rt := range ar.Topics {
		if p := rt.Partitions[0]; rt.TopicID != topicIDs[rt.Topic] || p.ErrorCode != topicAF || p.ErrorMessage == nil || *p.ErrorMessage != topicAuthzMessage {
			t.Errorf("bob's alter of %s: %+v", rt.Topic, rt)
		}
	}
	if ar := alter(alice, "t"); ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alice altering t: %v %+v", kerr.ErrorForCode(ar.ErrorCode), ar.Topics)
	}
	if info, _ := s.shares.coord.Partition(ctx10(t), "sa", topicIDs["t"], 0); info.Start != 1 {
		t.Fatalf("t's share partition starts at %d after alice's alter, want 1", info.Start)
	}

	// DeleteShareGroupOffsets: DELETE on the group, READ on each topic.
	del := func(cl *kgo.Client, topics ...string) *kmsg.DeleteShareGroupOffsetsResponse {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = "sa"
		for _, name := range topics {
			req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: name})
		}
		return send[*kmsg.DeleteShareGroupOffsetsResponse](t, cl, req)
	}
	if r := del(alice, "t"); r.ErrorCode != groupAF || r.ErrorMessage == nil || *r.ErrorMessage != groupAuthzMessage {
		t.Fatalf("alice deleting sa's offsets without DELETE: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	grant(t, admin, kmsg.ACLResourceTypeGroup, "sa", "User:bob", kmsg.ACLOperationDelete)
	dr := del(bob, "t", "free")
	if dr.ErrorCode != 0 || len(dr.Topics) != 2 {
		t.Fatalf("bob deleting t and free: %v %+v", kerr.ErrorForCode(dr.ErrorCode), dr.Topics)
	}
	for _, rt := range dr.Topics {
		if rt.ErrorCode != topicAF || rt.TopicID != [16]byte{} || rt.ErrorMessage == nil || *rt.ErrorMessage != topicAuthzMessage {
			t.Errorf("bob's delete of %s: %+v", rt.Topic, rt)
		}
	}
	if _, ok := s.shares.coord.Partition(ctx10(t), "sa", topicIDs["t"], 0); !ok {
		t.Fatal("t's share partition deleted by a principal that may not read t")
	}
	grant(t, admin, kmsg.ACLResourceTypeGroup, "sa", "User:alice", kmsg.ACLOperationDelete)
	if dr := del(alice, "t"); dr.ErrorCode != 0 || dr.Topics[0].ErrorCode != 0 {
		t.Fatalf("alice deleting t: %v %+v", kerr.ErrorForCode(dr.ErrorCode), dr.Topics)
	}
	if _, ok := s.shares.coord.Partition(ctx10(t), "sa", topicIDs["t"], 0); ok {
		t.Fatal("t's share partition still there after alice's delete")
	}
}

// TestShareStateRequestsNeedClusterAction: the share-state requests
// between brokers (InitializeShareGroupState, ReadShareGroupState,
// WriteShareGroupState, DeleteShareGroupState,
// ReadShareGroupStateSummary) need CLUSTER_ACTION on the cluster, as
// Kafka's KafkaApis checks: alice without it gets
// CLUSTER_AUTHORIZATION_FAILED for every partition; the super user, and
// alice once granted CLUSTER_ACTION, reach the share coordinator, which
// answers a read of a share partition never initialized INVALID_REQUEST
// and then serves what was initialized and written.
func TestShareStateRequestsNeedClusterAction(t *testing.T) {
	s, clients := aclServer(t, false)
	if s == nil {
		t.Skip("Kafka serves the share-state requests on its inter-broker listener only")
	}
	admin, alice := clients["admin"], clients["alice"]
	tid := [16]byte{9, 9}
	read := func(cl *kgo.Client) kmsg.ReadShareGroupStateResponseTopicPartition {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = "ss"
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.LeaderEpoch = 3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.ReadShareGroupStateResponse
		for try := 0; try < 50; try++ { // the first request creates __share_group_state
			resp = send[*kmsg.ReadShareGroupStateResponse](t, cl, req)
			if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.NotCoordinator.Code && c != kerr.CoordinatorLoadInProgress.Code {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return resp.Topics[0].Partitions[0]
	}
	initialize := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = "ss"
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.StartOffset = 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.InitializeShareGroupStateResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	write := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = "ss"
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.LeaderEpoch, rp.StartOffset = 3, 8
		b := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount = 8, 9, 0, 2
		rp.StateBatches = append(rp.StateBatches, b)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.WriteShareGroupStateResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	summary := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.GroupID = "ss"
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID = tid
		rt.Partitions = append(rt.Partitions, kmsg.NewReadShareGroupStateSummaryRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.ReadShareGroupStateSummaryResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	del := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = "ss"
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID = tid
		rt.Partitions = append(rt.Partitions, kmsg.NewDeleteShareGroupStateRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.DeleteShareGroupStateResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	caf := kerr.ClusterAuthorizationFailed.Code
	if c := read(alice).ErrorCode; c != caf {
		t.Fatalf("alice reading share state: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(c))
	}
	for name, f := range map[string]func(*kgo.Client) int16{"initialize": initialize, "write": write, "summary": summary, "delete": del} {
		if c := f(alice); c != caf {
			t.Errorf("alice: %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, kerr.ErrorForCode(c))
		}
	}
	if c := read(admin).ErrorCode; c != kerr.InvalidRequest.Code {
		t.Fatalf("reading a share partition never initialized: %v, want INVALID_REQUEST", kerr.ErrorForCode(c))
	}
	if c := initialize(admin); c != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(c))
	}
	grant(t, admin, kmsg.ACLResourceTypeCluster, "kafka-cluster", "User:alice", kmsg.ACLOperationClusterAction)
	var c int16
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c = write(alice); c != caf {
			break
		}
	}
	if c != 0 {
		t.Fatalf("alice writing with CLUSTER_ACTION: %v", kerr.ErrorForCode(c))
	}
	if st := read(alice); st.ErrorCode != 0 || st.StartOffset != 8 || len(st.StateBatches) != 1 || st.StateBatches[0].DeliveryCount != 2 {
		t.Fatalf("state read back: %v %+v", kerr.ErrorForCode(st.ErrorCode), st)
	}
	if c := summary(alice); c != 0 {
		t.Fatalf("summary: %v", kerr.ErrorForCode(c))
	}
	if c := del(alice); c != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(c))
	}
	if st := read(alice); st.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("read after delete: %v, want INVALID_REQUEST", kerr.ErrorForCode(st.ErrorCode))
	}
}
