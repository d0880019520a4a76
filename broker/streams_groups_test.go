package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// streamsWireTopology is a one-subtopology Streams application reading
// "sw-in" with a store whose changelog is "sw-app-store-changelog".
func streamsWireTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID = "0"
	s.SourceTopics = []string{"sw-in"}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "sw-app-store-changelog"
	c := kmsg.NewTopicInfoConfig()
	c.Key, c.Value = "cleanup.policy", "compact"
	cl.Configs = []kmsg.TopicInfoConfig{c}
	s.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s}
	return &t
}

// streamsCoordinator finds a group's coordinator: franz-go does not route
// the streams group APIs itself.
func streamsCoordinator(t *testing.T, cl *kgo.Client, group string) *kgo.Broker {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp, err := req.RequestWith(testContext(t), cl)
		if err == nil && resp.ErrorCode == 0 {
			return cl.Broker(int(resp.NodeID))
		}
		if time.Now().After(deadline) {
			t.Fatalf("find coordinator: %v %+v", err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streamsHeartbeat sends one StreamsGroupHeartbeat v1 over the wire.
func streamsHeartbeat(t *testing.T, cl *kgo.Broker, member string, epoch int32, owned []kmsg.TaskIDs) *kmsg.StreamsGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "sw-app", member, epoch
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topology = streamsWireTopology()
		pid := "process-" + member
		req.ProcessID = &pid
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	} else if owned != nil {
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = owned, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	}
	// The broker may still be loading __consumer_offsets just after start.
	return whileCoordinatorLoads(t, func() (*kmsg.StreamsGroupHeartbeatResponse, int16) {
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatalf("streams heartbeat: %v", err)
		}
		return resp, resp.ErrorCode
	})
}

// TestStreamsGroupWire drives a streams group with raw StreamsGroupHeartbeat
// and StreamsGroupDescribe requests: the first heartbeat reports the
// changelog topic missing and the broker creates it with the source
// topic's partition count and the topology's configs; tasks follow;
// offsets commit against the member epoch; the group is listed as
// "streams" and survives a restart of the broker.
func TestStreamsGroupWire(t *testing.T) {
	dir := t.TempDir()
	// The first heartbeat computes an (empty) target assignment; without
	// an assignment interval the second one assigns at once.
	noDelay := func(c *config.Broker) {
		c.GroupStreamsInitialRebalanceDelay = 0
		c.GroupStreamsAssignmentIntervalMs = 0
	}
	ts := startServer(t, dir, noDelay)
	createTopic(t, ts.admin(t), "sw-in", 3, nil)
	cl := ts.client(t)
	co := streamsCoordinator(t, cl, "sw-app")

	r := streamsHeartbeat(t, co, "m1", 0, nil)
	if r.ErrorCode != 0 || len(r.Status) != 1 || r.Status[0].StatusCode != 3 {
		t.Fatalf("join: error %d status %+v", r.ErrorCode, r.Status)
	}
	if r.HeartbeatIntervalMillis != 5000 || r.AcceptableRecoveryLag != 10000 || r.TaskOffsetIntervalMillis != 60000 {
		t.Errorf("intervals %d %d %d", r.HeartbeatIntervalMillis, r.AcceptableRecoveryLag, r.TaskOffsetIntervalMillis)
	}
	td, err := ts.admin(t).ListTopics(testContext(t), "sw-app-store-changelog")
	if err != nil || td["sw-app-store-changelog"].Err != nil || len(td["sw-app-store-changelog"].Partitions) != 3 {
		t.Fatalf("changelog topic: %v %+v", err, td)
	}
	cfgs, err := ts.admin(t).DescribeTopicConfigs(testContext(t), "sw-app-store-changelog")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfgs.On("sw-app-store-changelog", nil)
	compact := false
	for _, c := range rc.Configs {
		compact = compact || c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact"
	}
	if !compact {
		t.Errorf("changelog topic is not compacted")
	}

	epoch := r.MemberEpoch
	r = streamsHeartbeat(t, co, "m1", epoch, []kmsg.TaskIDs{})
	if r.ErrorCode != 0 || len(r.Status) != 0 || len(r.ActiveTasks) != 1 || !slices.Equal(r.ActiveTasks[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("second heartbeat: error %d status %+v active %+v", r.ErrorCode, r.Status, r.ActiveTasks)
	}
	epoch = r.MemberEpoch
	owned := r.ActiveTasks

	d := kmsg.NewPtrStreamsGroupDescribeRequest()
	d.Version = 1
	d.Groups = []string{"sw-app", "sw-none"}
	d.IncludeAuthorizedOperations = true
	dr, err := d.RequestWith(testContext(t), co)
	if err != nil {
		t.Fatal(err)
	}
	g := dr.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != epoch || len(g.Members) != 1 || g.Members[0].ProcessID != "process-m1" ||
		g.Topology == nil || g.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions != 3 || g.AssignorName == nil || *g.AssignorName != "sticky" {
		t.Fatalf("describe: %+v", g)
	}
	if dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe unknown group: %d", dr.Groups[1].ErrorCode)
	}

	commit := func(gen int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "sw-app", "m1", gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "sw-in"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 1, 7, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(epoch + 1); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("commit with a wrong epoch: %d", code)
	}
	if code := commit(epoch); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lr, err := lg.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range lr.Groups {
		found = found || g.Group == "sw-app" && g.GroupType == "streams" && g.ProtocolType == "streams" && g.GroupState == "Stable"
	}
	if !found {
		t.Errorf("list groups: %+v", lr.Groups)
	}

	// The broker restarts: the member goes on with its epoch and tasks.
	cl.Close()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir, noDelay)
	cl = ts.client(t)
	co = streamsCoordinator(t, cl, "sw-app")
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = streamsHeartbeat(t, co, "m1", epoch, owned)
		if r.ErrorCode == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the coordinator is loading
	}
	if r.ErrorCode != 0 || r.MemberEpoch != epoch {
		t.Fatalf("heartbeat after restart: error %d epoch %d, want %d", r.ErrorCode, r.MemberEpoch, epoch)
	}
	ofr := kmsg.NewPtrOffsetFetchRequest()
	ofr.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "sw-app"
	fg.MemberID, fg.MemberEpoch = kmsg.StringPtr("m1"), epoch
	ofr.Groups = append(ofr.Groups, fg)
	fr, err := ofr.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Groups) != 1 || fr.Groups[0].ErrorCode != 0 || len(fr.Groups[0].Topics) != 1 || fr.Groups[0].Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("offset fetch after restart: %+v", fr.Groups)
	}

	// Leaving empties the group, which DeleteGroups then removes.
	if r = streamsHeartbeat(t, co, "m1", -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %d %d", r.ErrorCode, r.MemberEpoch)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version = 2
	dg.Groups = []string{"sw-app"}
	dgr, err := dg.RequestWith(context.Background(), cl)
	if err != nil || dgr.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %v %+v", err, dgr)
	}
}

// TestStreamsGroupRefusesInternalTopics: a topology naming a Kafka
// internal topic answers STREAMS_INVALID_TOPOLOGY before the coordinator.
func TestStreamsGroupRefusesInternalTopics(t *testing.T) {
	ts := startServer(t, "")
	co := streamsCoordinator(t, ts.client(t), "sw-bad")
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = "sw-bad", "m", 30000
	req.Topology = streamsWireTopology()
	req.Topology.Subtopologies[0].SourceTopics = []string{"__consumer_offsets"}
	resp, err := req.RequestWith(testContext(t), co)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.StreamsInvalidTopology.Code || resp.ErrorMessage == nil ||
		*resp.ErrorMessage != "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited." {
		t.Fatalf("error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
}

// TestStreamsGroupProtocolDisabled: without streams among
// group.coordinator.rebalance.protocols both APIs answer
// UNSUPPORTED_VERSION, as Kafka's KafkaApis.
func TestStreamsGroupProtocolDisabled(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupCoordinatorRebalanceProtocols = []string{"classic", "consumer"} })
	co := streamsCoordinator(t, ts.client(t), "sw-off")
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = "sw-off", "m", 30000
	req.Topology = streamsWireTopology()
	resp, err := req.RequestWith(testContext(t), co)
	if err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat: %v %+v", err, resp)
	}
	d := kmsg.NewPtrStreamsGroupDescribeRequest()
	d.Groups = []string{"sw-off"}
	dr, err := d.RequestWith(testContext(t), co)
	if err != nil || len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("describe: %v %+v", err, dr)
	}
}

// TestStreamsGroupConfigsWire: the group forms of the assignment interval
// and the rack-aware assignment tags are checked as Kafka 4.4's
// GroupConfig (the interval within group.streams.min/max.assignment.interval.ms,
// tags without duplicates), described as set, and a member lacking a
// listed tag gets MISSING_CLIENT_TAGS over the wire.
func TestStreamsGroupConfigsWire(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupStreamsInitialRebalanceDelay = 0 })
	cl := ts.client(t)
	for _, c := range []struct {
		name, value string
		code        int16
	}{
		{"streams.assignment.interval.ms", "15001", kerr.InvalidConfig.Code},
		{"streams.assignment.interval.ms", "-1", kerr.InvalidConfig.Code},
		{"streams.assignment.interval.ms", "5000", 0},
		{"streams.rack.aware.assignment.tags", "zone,zone", kerr.InvalidConfig.Code},
		{"streams.rack.aware.assignment.tags", "Zone, rack", 0},
		{"streams.task.offset.interval.ms", "14999", kerr.InvalidConfig.Code},
		{"streams.task.offset.interval.ms", "20000", 0},
		{"streams.acceptable.recovery.lag", "-1", kerr.InvalidConfig.Code},
		{"streams.acceptable.recovery.lag", "500", 0},
	} {
		resp, err := groupConfigRequest("sw-app", c.name, c.value).RequestWith(testContext(t), cl)
		if err != nil || resp.Resources[0].ErrorCode != c.code {
			t.Fatalf("set %s=%s: %v %+v, want error %d", c.name, c.value, err, resp, c.code)
		}
	}
	d := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sw-app"
	dr.ConfigNames = []string{"streams.assignment.interval.ms", "streams.rack.aware.assignment.tags"}
	d.Resources = append(d.Resources, dr)
	resp, err := d.RequestWith(testContext(t), cl)
	if err != nil || len(resp.Resources[0].Configs) != 2 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	got := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	if got["streams.assignment.interval.ms"] != "5000" || got["streams.rack.aware.assignment.tags"] != "Zone, rack" {
		t.Errorf("described %v", got)
	}

	createTopic(t, ts.admin(t), "sw-in", 3, nil)
	co := streamsCoordinator(t, cl, "sw-app")
	r := streamsHeartbeat(t, co, "m1", 0, nil)
	want := "Missing required client tags for rack-aware standby assignment: [Zone, rack]. Configure them via 'client.tag.<tagKey>' in your Streams config."
	found := false
	for _, s := range r.Status {
		found = found || s.StatusCode == 6 && s.StatusDetail == want
	}
	if r.ErrorCode != 0 || !found {
		t.Fatalf("join without tags: error %d status %+v", r.ErrorCode, r.Status)
	}
	if r.TaskOffsetIntervalMillis != 20000 || r.AcceptableRecoveryLag != 500 {
		t.Errorf("task offset interval %d, acceptable recovery lag %d: want the group's 20000 and 500", r.TaskOffsetIntervalMillis, r.AcceptableRecoveryLag)
	}
}
