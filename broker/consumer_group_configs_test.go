package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// consumerHeartbeat sends one ConsumerGroupHeartbeat v1 for group "ai" to
// the group's coordinator: a join (epoch 0) subscribing to topic, else a
// heartbeat reporting no owned partitions. It retries while the
// coordinator loads __consumer_offsets.
func consumerHeartbeat(t *testing.T, co *kgo.Broker, member string, epoch int32, topic string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "ai", member, epoch
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{topic}
	}
	resp := whileCoordinatorLoads(t, func() (*kmsg.ConsumerGroupHeartbeatResponse, int16) {
		resp, err := req.RequestWith(testContext(t), co)
		if err != nil {
			t.Fatalf("consumer heartbeat: %v", err)
		}
		return resp, resp.ErrorCode
	})
	if resp.ErrorCode != 0 {
		t.Fatalf("consumer heartbeat of %s at epoch %d: %s", member, epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// whileCoordinatorLoads repeats a group request for up to 20 s while its
// coordinator answers that it is loading or not there yet, as a client
// does just after the broker started, and returns the last answer.
func whileCoordinatorLoads[R any](t *testing.T, send func() (R, int16)) R {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, code := send()
		// NOT_COORDINATOR: FindCoordinator answers once the metadata
		// holds __consumer_offsets; the coordinator takes its partition
		// a moment later, and a client finds it again and retries.
		retriable := code == kerr.CoordinatorLoadInProgress.Code || code == kerr.CoordinatorNotAvailable.Code || code == kerr.NotCoordinator.Code
		if retriable && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return resp
	}
}

// describeGroupConfig reads one group config over DescribeConfigs: its
// value and source.
func describeGroupConfig(t *testing.T, cl *kgo.Client, group, name string) (string, int8) {
	t.Helper()
	d := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	dr.ConfigNames = []string{name}
	d.Resources = append(d.Resources, dr)
	resp, err := d.RequestWith(testContext(t), cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe %s of group %s: %v %+v", name, group, err, resp)
	}
	c := resp.Resources[0].Configs[0]
	return *c.Value, int8(c.Source)
}

// checkIntervalConfig sets a group's assignment interval config (name) to
// values outside the broker's bounds (0 and 15000 by default) and to one
// that is not a number, which fail with INVALID_CONFIG as Kafka's
// GroupConfig.validate, then to 10000, which DescribeConfigs then shows
// as the group's.
func checkIntervalConfig(t *testing.T, cl *kgo.Client, group, name string) {
	t.Helper()
	for _, v := range []string{"15001", "-1", "abc", "60000"} {
		resp, err := groupConfigRequest(group, name, v).RequestWith(testContext(t), cl)
		if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
			t.Fatalf("set %s=%s: %v %+v, want INVALID_CONFIG", name, v, err, resp)
		}
	}
	setGroupConfig(t, cl, group, name, "10000")
	if v, src := describeGroupConfig(t, cl, group, name); v != "10000" || src != sourceGroupConfig {
		t.Fatalf("described %s=%s (source %d), want 10000 from the group config", name, v, src)
	}
}

// TestConsumerGroupAssignmentIntervalWire: consumer.assignment.interval.ms
// (Kafka 4.4) is checked as Kafka's GroupConfig (within
// group.consumer.min/max.assignment.interval.ms, 0 and 15000 by default),
// described as set and as the broker's default once deleted, and paces
// the group's target assignments over the wire: within the interval a
// joining member takes the last target's epoch and nothing, and once the
// group's interval is 0 the next heartbeat computes the target.
func TestConsumerGroupAssignmentIntervalWire(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t)
	checkIntervalConfig(t, cl, "ai", "consumer.assignment.interval.ms")

	createTopic(t, ts.admin(t), "ai-in", 4, nil)
	co := streamsCoordinator(t, cl, "ai")
	describe := func() (epoch, assignmentEpoch int32) {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"ai"}
		resp, err := req.RequestWith(testContext(t), co)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe group: %v %+v", err, resp)
		}
		return resp.Groups[0].Epoch, resp.Groups[0].AssignmentEpoch
	}
	held := func(r *kmsg.ConsumerGroupHeartbeatResponse) int { // of the one topic
		if r.Assignment == nil || len(r.Assignment.Topics) == 0 {
			return 0
		}
		return len(r.Assignment.Topics[0].Partitions)
	}

	// The group's first target comes at once.
	if r := consumerHeartbeat(t, co, "m1", 0, "ai-in"); r.MemberEpoch != 1 || held(r) != 4 {
		t.Fatalf("m1 joined: epoch %d, %d partitions; want epoch 1 and all 4", r.MemberEpoch, held(r))
	}
	// Within the group's 10 s interval, m2 joins the last target.
	if r := consumerHeartbeat(t, co, "m2", 0, "ai-in"); r.MemberEpoch != 1 || held(r) != 0 {
		t.Fatalf("m2 joined within the interval: epoch %d, %d partitions; want epoch 1 and none", r.MemberEpoch, held(r))
	}
	if e, a := describe(); e != 2 || a != 1 {
		t.Fatalf("group epoch %d, assignment epoch %d; want 2 and 1", e, a)
	}
	if r := consumerHeartbeat(t, co, "m2", 1, ""); r.MemberEpoch != 1 {
		t.Fatalf("m2 again within the interval: epoch %d, want 1", r.MemberEpoch)
	}

	// With the group's interval at 0 the next heartbeat computes it: m2's
	// half is still m1's, so m2 moves to epoch 2 holding nothing yet.
	setGroupConfig(t, cl, "ai", "consumer.assignment.interval.ms", "0")
	if v, _ := describeGroupConfig(t, cl, "ai", "consumer.assignment.interval.ms"); v != "0" {
		t.Fatalf("described %s after setting 0", v)
	}
	if r := consumerHeartbeat(t, co, "m2", 1, ""); r.MemberEpoch != 2 || held(r) != 0 {
		t.Fatalf("m2 with the group's interval at 0: epoch %d, %d partitions; want epoch 2 and none until m1 revokes", r.MemberEpoch, held(r))
	}
	if e, a := describe(); e != 2 || a != 2 {
		t.Fatalf("group epoch %d, assignment epoch %d; want 2 and 2", e, a)
	}

	// Deleted, the config describes as the broker's default.
	req := groupConfigRequest("ai", "consumer.assignment.interval.ms", "")
	req.Resources[0].Configs[0].Op = kmsg.IncrementalAlterConfigOpDelete
	req.Resources[0].Configs[0].Value = nil
	if resp, err := req.RequestWith(testContext(t), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("delete consumer.assignment.interval.ms: %v %+v", err, resp)
	}
	if v, src := describeGroupConfig(t, cl, "ai", "consumer.assignment.interval.ms"); v != "1000" || src != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Errorf("described %s (source %d) once deleted, want the default 1000", v, src)
	}
}

// TestShareGroupAssignmentIntervalWire: share.assignment.interval.ms
// (Kafka 4.4) is checked within group.share.min/max.assignment.interval.ms,
// described as set, and paces the share group's target assignments: a
// member joining within the interval takes the last target's epoch and
// nothing, until the group's interval allows the next target.
func TestShareGroupAssignmentIntervalWire(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	cl := ts.client(t)
	checkIntervalConfig(t, cl, "sai", "share.assignment.interval.ms")
	createTopic(t, ts.admin(t), "sai-in", 4, nil)
	a, b := newShareMember(t, ts, "sai", "a"), newShareMember(t, ts, "sai", "b")
	held := func(r *kmsg.ShareGroupHeartbeatResponse) int { // of the one topic
		if r.Assignment == nil || len(r.Assignment.TopicPartitions) == 0 {
			return 0
		}
		return len(r.Assignment.TopicPartitions[0].Partitions)
	}
	if r := a.heartbeat(0, []string{"sai-in"}); r.ErrorCode != 0 || r.MemberEpoch != 1 || held(r) != 4 {
		t.Fatalf("a joins: error %d, epoch %d, %d partitions; want epoch 1 and all 4", r.ErrorCode, r.MemberEpoch, held(r))
	}
	if r := b.heartbeat(0, []string{"sai-in"}); r.ErrorCode != 0 || r.MemberEpoch != 1 || held(r) != 0 {
		t.Fatalf("b joins within the interval: error %d, epoch %d, %d partitions; want epoch 1 and none", r.ErrorCode, r.MemberEpoch, held(r))
	}
	setGroupConfig(t, cl, "sai", "share.assignment.interval.ms", "0")
	if v, _ := describeGroupConfig(t, cl, "sai", "share.assignment.interval.ms"); v != "0" {
		t.Fatalf("described %s after setting 0", v)
	}
	if r := b.heartbeat(1, nil); r.ErrorCode != 0 || r.MemberEpoch != 2 || held(r) != 2 {
		t.Fatalf("b with the group's interval at 0: error %d, epoch %d, %d partitions; want epoch 2 and 2 partitions", r.ErrorCode, r.MemberEpoch, held(r))
	}
}

// TestConsumerGroupSessionConfigsWire: consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms as group configs (Kafka's GroupConfig):
// checked within group.consumer.min/max.session.timeout.ms and
// group.consumer.min/max.heartbeat.interval.ms, the session above the
// interval, then applied over the wire: a member is told the group's
// heartbeat interval and, silent, is removed after the group's session
// timeout rather than the broker's 45 s.
func TestConsumerGroupSessionConfigsWire(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		c.GroupConsumerMinSessionTimeoutMs = 500
		c.GroupConsumerMinHeartbeatIntervalMs = 100
	})
	cl := ts.client(t)
	for _, c := range []struct{ name, value string }{
		{"consumer.session.timeout.ms", "499"},
		{"consumer.session.timeout.ms", "60001"},
		{"consumer.heartbeat.interval.ms", "99"},
		{"consumer.heartbeat.interval.ms", "15001"},
		{"consumer.session.timeout.ms", "abc"},
		// Above the broker's 5 s default interval, but no greater.
		{"consumer.session.timeout.ms", "5000"},
	} {
		resp, err := groupConfigRequest("ai", c.name, c.value).RequestWith(testContext(t), cl)
		if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
			t.Fatalf("set %s=%s: %v %+v, want INVALID_CONFIG", c.name, c.value, err, resp)
		}
	}
	setGroupConfig(t, cl, "ai", "consumer.heartbeat.interval.ms", "300")
	setGroupConfig(t, cl, "ai", "consumer.session.timeout.ms", "1000")
	resp, err := groupConfigRequest("ai", "consumer.heartbeat.interval.ms", "1000").RequestWith(testContext(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("heartbeat interval equal to the group's session timeout: %v %+v, want INVALID_CONFIG", err, resp)
	}
	if v, src := describeGroupConfig(t, cl, "ai", "consumer.session.timeout.ms"); v != "1000" || src != sourceGroupConfig {
		t.Fatalf("described session timeout %s (source %d)", v, src)
	}

	createTopic(t, ts.admin(t), "cs-in", 2, nil)
	co := streamsCoordinator(t, cl, "ai")
	if r := consumerHeartbeat(t, co, "m1", 0, "cs-in"); r.HeartbeatIntervalMillis != 300 {
		t.Fatalf("heartbeat interval told to the member: %d, want the group's 300", r.HeartbeatIntervalMillis)
	}
	members := func() int {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"ai"}
		resp, err := req.RequestWith(testContext(t), co)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe group: %v %+v", err, resp)
		}
		return len(resp.Groups[0].Members)
	}
	if n := members(); n != 1 {
		t.Fatalf("%d members after the join", n)
	}
	start := time.Now()
	for members() != 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the silent member is still in the group after 10 s; its session timeout is the group's 1 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("member removed after %v, before its 1 s session", d)
	}
}
