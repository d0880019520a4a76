package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// cghClient sends raw ConsumerGroupHeartbeats straight to the one broker,
// which coordinates every group, so that requests a client library would
// refuse to build still reach it.
type cghClient struct {
	t  *testing.T
	cl *kgo.Client
}

// join is a valid first heartbeat of member in group, subscribed to topics.
func cghJoin(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = group
	req.MemberID = member
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = append([]string{}, topics...)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// send delivers req, retrying while the group's coordinator is not ready
// yet: the first FindCoordinator creates __consumer_offsets, whose
// partitions then load. None of the cases expects those codes.
func (c cghClient) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker := c.cl.SeedBrokers()[0]
	for {
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			c.t.Fatalf("ConsumerGroupHeartbeat %s/%s: %v", req.Group, req.MemberID, err)
		}
		switch kerr.ErrorForCode(resp.ErrorCode) {
		case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
			find := kmsg.NewPtrFindCoordinatorRequest()
			find.CoordinatorKey = req.Group
			find.CoordinatorKeys = []string{req.Group}
			if _, err := find.RequestWith(ctx, broker); err != nil {
				c.t.Fatalf("FindCoordinator %s: %v", req.Group, err)
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("ConsumerGroupHeartbeat %s/%s: coordinator not ready: %v", req.Group, req.MemberID, kerr.ErrorForCode(resp.ErrorCode))
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		return resp
	}
}

// expect sends req and fails unless the answer carries want.
func (c cghClient) expect(req *kmsg.ConsumerGroupHeartbeatRequest, want error) *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	resp := c.send(req)
	if got := kerr.ErrorForCode(resp.ErrorCode); got != want {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		c.t.Fatalf("ConsumerGroupHeartbeat %s/%s epoch %d: got %v (%q), want %v", req.Group, req.MemberID, req.MemberEpoch, got, msg, want)
	}
	return resp
}

// TestConsumerGroupHeartbeatBadInput: each malformed or out-of-turn
// ConsumerGroupHeartbeat gets the error code Kafka's GroupMetadataManager
// answers (throwIfConsumerGroupHeartbeatRequestIsInvalid, the member and
// epoch checks, static membership), and none of them changes the group.
func TestConsumerGroupHeartbeatBadInput(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		c.GroupInitialRebalanceDelayMs = 0
		// Each subscription change below gets its target at once.
		c.GroupConsumerAssignmentIntervalMs = 0
	})
	for _, topic := range []string{"bad848", "bad848b", "bad848c"} {
		createTopic(t, ts.admin(t), topic, 2, nil)
	}
	c := cghClient{t, ts.client(t)}
	str := func(s string) *string { return &s }

	// Malformed requests, each checked before any group is looked at.
	invalid := []struct {
		name string
		edit func(r *kmsg.ConsumerGroupHeartbeatRequest)
	}{
		{"empty group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }},
		{"blank group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "   " }},
		{"empty member id from v1", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }},
		{"empty member id with an epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch = "", 3 }},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = str("") }},
		{"empty rack id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = str(" ") }},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }},
		{"join with null owned partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}},
		{"static leave without instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }},
		{"epoch below -2", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }},
		{"oversized group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = strings.Repeat("g", 40000) }},
	}
	for i, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			req := cghJoin(fmt.Sprintf("bad-%d", i), fmt.Sprintf("m-%d", i), "bad848")
			tc.edit(req)
			c := cghClient{t, c.cl}
			c.expect(req, kerr.InvalidRequest)
		})
	}

	t.Run("unsupported assignor", func(t *testing.T) {
		c := cghClient{t, c.cl}
		req := cghJoin("assignor", "m1", "bad848")
		req.ServerAssignor = str("sticky")
		c.expect(req, kerr.UnsupportedAssignor)
		req.ServerAssignor = str("range")
		c.expect(req, nil)
	})

	t.Run("invalid regex", func(t *testing.T) {
		c := cghClient{t, c.cl}
		req := cghJoin("regex", "m1", "bad848")
		req.SubscribedTopicNames = nil
		req.SubscribedTopicRegex = str("bad848-(")
		c.expect(req, kerr.InvalidRegularExpression)
		// Kafka looks at the regex after the member: an unknown member
		// hears that first.
		req.MemberEpoch = 4
		c.expect(req, kerr.GroupIDNotFound)
		ok := cghJoin("regex", "m2", "bad848")
		c.expect(ok, nil)
		req.MemberID = "nobody"
		c.expect(req, kerr.UnknownMemberID)
	})

	t.Run("unknown group and member", func(t *testing.T) {
		c := cghClient{t, c.cl}
		hb := cghJoin("nogroup", "m1", "bad848")
		hb.MemberEpoch = 1
		c.expect(hb, kerr.GroupIDNotFound)
		c.expect(cghJoin("members", "m1", "bad848"), nil)
		hb = cghJoin("members", "stranger", "bad848")
		hb.MemberEpoch = 1
		c.expect(hb, kerr.UnknownMemberID)
		hb.MemberEpoch = -1
		c.expect(hb, kerr.UnknownMemberID)
	})

	t.Run("fenced member epoch", func(t *testing.T) {
		c := cghClient{t, c.cl}
		resp := c.expect(cghJoin("fenced", "m1", "bad848"), nil)
		if resp.MemberEpoch != 1 || resp.Assignment == nil {
			t.Fatalf("join: epoch %d assignment %v, want epoch 1 with an assignment", resp.MemberEpoch, resp.Assignment)
		}
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch = "fenced", "m1", 9
		c.expect(hb, kerr.FencedMemberEpoch)
		// Two subscription changes that only add partitions take m1 to
		// epoch 3, with 2 as its previous epoch.
		epoch := resp.MemberEpoch
		var owned []kmsg.ConsumerGroupHeartbeatRequestTopic
		for _, topics := range [][]string{{"bad848", "bad848b"}, {"bad848", "bad848b", "bad848c"}} {
			sub := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			sub.Group, sub.MemberID, sub.MemberEpoch, sub.SubscribedTopicNames = "fenced", "m1", epoch, topics
			r := c.expect(sub, nil)
			if r.MemberEpoch != epoch+1 || r.Assignment == nil {
				t.Fatalf("subscribing to %v: epoch %d assignment %v, want epoch %d", topics, r.MemberEpoch, r.Assignment, epoch+1)
			}
			epoch = r.MemberEpoch
			owned = owned[:0]
			for _, at := range r.Assignment.Topics {
				owned = append(owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
			}
		}
		// Smaller than the current epoch and not the previous one.
		hb.MemberEpoch = epoch - 2
		c.expect(hb, kerr.FencedMemberEpoch)
		// The previous epoch owning more than the assignment.
		hb.MemberEpoch = epoch - 1
		hb.Topics = append(append([]kmsg.ConsumerGroupHeartbeatRequestTopic{}, owned...),
			kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: [16]byte{1}, Partitions: []int32{0}})
		c.expect(hb, kerr.FencedMemberEpoch)
		// The previous epoch owning a subset is accepted: the answer that
		// bumped it may have been lost.
		hb.Topics = owned[:1]
		if r := c.expect(hb, nil); r.MemberEpoch != epoch {
			t.Fatalf("previous-epoch heartbeat answered epoch %d, want %d", r.MemberEpoch, epoch)
		}
	})

	t.Run("static members", func(t *testing.T) {
		c := cghClient{t, c.cl}
		first := cghJoin("static", "s1", "bad848")
		first.InstanceID = str("instance-a")
		resp := c.expect(first, nil)
		// Another member id cannot take a live instance id.
		second := cghJoin("static", "s2", "bad848")
		second.InstanceID = str("instance-a")
		c.expect(second, kerr.UnreleasedInstanceID)
		// Heartbeating as the instance under another member id is fenced.
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.InstanceID = "static", "s2", resp.MemberEpoch, str("instance-a")
		c.expect(hb, kerr.FencedInstanceID)
		// An instance id the group does not know.
		hb.MemberID, hb.InstanceID = "s1", str("instance-b")
		c.expect(hb, kerr.UnknownMemberID)
		leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		leave.Group, leave.MemberID, leave.MemberEpoch, leave.InstanceID = "static", "s9", -2, str("instance-z")
		c.expect(leave, kerr.UnknownMemberID)
		// After a temporary leave (-2) the instance is released and a new
		// member id takes it over, with the old assignment.
		leave.MemberID, leave.InstanceID = "s1", str("instance-a")
		c.expect(leave, nil)
		back := c.expect(second, nil)
		if back.Assignment == nil || len(back.Assignment.Topics) != 1 || len(back.Assignment.Topics[0].Partitions) != 2 {
			t.Fatalf("the replacing static member got %+v, want the two partitions back", back.Assignment)
		}
	})

	t.Run("group of another type", func(t *testing.T) {
		c := cghClient{t, c.cl}
		broker := c.cl.SeedBrokers()[0]
		// A classic group of another protocol type is never a consumer
		// group (validateOnlineUpgrade).
		waitCoordinator(t, broker, "typed")
		connect := &classicMember{t: t, broker: broker, group: "typed", protocolType: "connect"}
		if r, err := connect.join(testContext(t), 30000); err != nil || r.ErrorCode != 0 {
			t.Fatalf("connect join: %+v %v", r, err)
		}
		c.expect(cghJoin("typed", "m1", "bad848"), kerr.GroupIDNotFound)
		// Only a joining member (epoch 0) may convert a group.
		hb := cghJoin("typed", "m1", "bad848")
		hb.MemberEpoch = 3
		c.expect(hb, kerr.GroupIDNotFound)

		// A classic member of another protocol type cannot join a
		// consumer group; one of the consumer type can.
		c.expect(cghJoin("typed848", "m1", "bad848"), nil)
		waitCoordinator(t, broker, "typed848")
		other := &classicMember{t: t, broker: broker, group: "typed848", protocolType: "connect"}
		if r, err := other.join(testContext(t), 30000); err != nil || r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("connect join into a consumer group: %+v %v, want INCONSISTENT_GROUP_PROTOCOL", r, err)
		}
		classic := &classicMember{t: t, broker: broker, group: "typed848"}
		r, err := classic.join(testContext(t), 30000)
		if err != nil || r.ErrorCode != 0 || r.LeaderID != "" || r.Generation < 1 {
			t.Fatalf("classic join into a consumer group: %+v %v, want a generation and no leader", r, err)
		}
		if err := classic.heartbeat(r.Generation + 1); err != kerr.IllegalGeneration {
			t.Fatalf("classic heartbeat of a wrong generation: %v, want ILLEGAL_GENERATION", err)
		}
		// A consumer-protocol member does not speak the classic protocol.
		m1 := &classicMember{t: t, broker: broker, group: "typed848", id: "m1"}
		if err := m1.heartbeat(1); err != kerr.UnknownMemberID {
			t.Fatalf("classic heartbeat of a consumer-protocol member: %v, want UNKNOWN_MEMBER_ID", err)
		}
	})
}

// waitGroupState polls DescribeGroups until group is in state.
func waitGroupState(t *testing.T, ts *testServer, group, state string) {
	t.Helper()
	adm := ts.admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := adm.DescribeGroups(testContext(t), group)
		if err == nil && d[group].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not reach %s: %v %+v", group, state, err, d[group])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
