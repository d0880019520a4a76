package group

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsTestTopology is a two-subtopology application: subtopology 0
// reads "in" and writes the repartition topic "app-rep"; subtopology 1
// reads it and keeps a store with changelog "app-store-changelog".
func streamsTestTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	t.Epoch = 0
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID = "0"
	s0.SourceTopics = []string{"in"}
	s0.RepartitionSinkTopics = []string{"app-rep"}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s1.SubtopologyID = "1"
	s1.SourceTopics = []string{"app-rep"}
	rep := kmsg.NewTopicInfo()
	rep.Topic = "app-rep"
	s1.RepartitionSourceTopics = []kmsg.TopicInfo{rep}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "app-store-changelog"
	cfg := kmsg.NewTopicInfoConfig()
	cfg.Key, cfg.Value = "cleanup.policy", "compact"
	cl.Configs = []kmsg.TopicInfoConfig{cfg}
	s1.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	return &t
}

// streamsConfig is the test config without the initial rebalance delay
// and the assignment interval, so that tasks come on the first
// heartbeats.
func streamsConfig() Config {
	cfg := testConfig()
	cfg.StreamsGroupInitialRebalanceDelayMs = 0
	cfg.StreamsGroupAssignmentIntervalMs = 0
	return cfg
}

type streamsClient struct {
	h       *harness
	group   string
	id      string
	process string
	// instance is the group.instance.id of a static member; nil when
	// dynamic.
	instance *string
	// tags are the client tags sent when joining.
	tags   map[string]string
	epoch  int32
	owned  tasksTuple
	last   *kmsg.StreamsGroupHeartbeatResponse
	create []InternalTopic
}

func newStreamsClient(h *harness, group, id, process string) *streamsClient {
	return &streamsClient{h: h, group: group, id: id, process: process, owned: emptyTasks()}
}

func toTaskSet(ts []kmsg.TaskIDs) taskSet {
	out := taskSet{}
	for _, t := range ts {
		out.add(t.SubtopologyID, t.Partitions...)
	}
	return out
}

func fromTaskSet(s taskSet) []kmsg.TaskIDs { return responseTasks(s) }

// heartbeat sends a heartbeat reporting the tasks the client owns and
// takes over what the answer assigns, as a Streams client does.
func (c *streamsClient) heartbeat(t *testing.T) *kmsg.StreamsGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = c.group, c.id, c.epoch
	req.InstanceID = c.instance
	if c.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topology = streamsTestTopology()
		pid := c.process
		req.ProcessID = &pid
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		for _, k := range sortedKeys(c.tags) {
			tag := kmsg.NewStreamsGroupHeartbeatRequestClientTag()
			tag.Key, tag.Value = k, c.tags[k]
			req.ClientTags = append(req.ClientTags, tag)
		}
	} else {
		req.ActiveTasks = fromTaskSet(c.owned.active)
		req.StandbyTasks = fromTaskSet(c.owned.standby)
		req.WarmupTasks = fromTaskSet(c.owned.warmup)
	}
	res := c.h.c.StreamsGroupHeartbeat(context.Background(), ClientInfo{ClientID: "app", ClientHost: "/127.0.0.1"}, req)()
	c.h.quiesce()
	r := res.Response
	c.last, c.create = r, res.CreateTopics
	if r.ErrorCode != 0 {
		return r
	}
	c.epoch = r.MemberEpoch
	if r.ActiveTasks != nil {
		c.owned = tasksTuple{active: toTaskSet(r.ActiveTasks), standby: toTaskSet(r.StandbyTasks), warmup: toTaskSet(r.WarmupTasks)}
	}
	return r
}

func (c *streamsClient) leave(t *testing.T) {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = c.group, c.id, -1
	r := c.h.c.StreamsGroupHeartbeat(context.Background(), ClientInfo{}, req)().Response
	c.h.quiesce()
	if r.ErrorCode != 0 {
		t.Fatalf("leave: error %d", r.ErrorCode)
	}
}

func statusCodes(r *kmsg.StreamsGroupHeartbeatResponse) []int8 {
	var out []int8
	for _, s := range r.Status {
		out = append(out, s.StatusCode)
	}
	return out
}

func showTasks(s taskSet) string {
	var parts []string
	for _, sub := range sortedKeys(s) {
		parts = append(parts, fmt.Sprintf("%s:%v", sub, s[sub]))
	}
	return strings.Join(parts, " ")
}

// streamsReady starts a group whose internal topics the test creates as
// the broker would, and returns its first member once it runs every task.
func streamsReady(t *testing.T, h *harness) *streamsClient {
	t.Helper()
	h.topics.set("in:4")
	h.c.TopicsChanged()
	a := newStreamsClient(h, "app", "a", "p1")
	r := a.heartbeat(t)
	if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{statusMissingInternalTopics}) {
		t.Fatalf("first heartbeat: error %d status %v", r.ErrorCode, r.Status)
	}
	want := []InternalTopic{
		{Name: "app-rep", Partitions: 4, ReplicationFactor: -1, Configs: map[string]string{}},
		{Name: "app-store-changelog", Partitions: 4, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "compact"}},
	}
	if fmt.Sprint(a.create) != fmt.Sprint(want) {
		t.Fatalf("topics to create %v, want %v", a.create, want)
	}
	if a.owned.size() != 0 {
		t.Fatalf("tasks assigned before the internal topics exist: %v", a.owned)
	}
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	r = a.heartbeat(t)
	if r.ErrorCode != 0 || len(r.Status) != 0 {
		t.Fatalf("heartbeat after creating topics: error %d status %v", r.ErrorCode, r.Status)
	}
	if got := showTasks(a.owned.active); got != "0:[0 1 2 3] 1:[0 1 2 3]" {
		t.Fatalf("active tasks %s", got)
	}
	return a
}

func (t tasksTuple) size() int { return t.active.size() + t.standby.size() + t.warmup.size() }

// TestStreamsHeartbeatInternalTopics: the first member's topology makes
// the group ask for its repartition and changelog topics with the
// partition counts Kafka's rules give (the most partitions of the
// upstream source topics), and tasks come once they exist.
func TestStreamsHeartbeatInternalTopics(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	if a.epoch < 2 {
		t.Errorf("member epoch %d", a.epoch)
	}
	d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 1, false)()[0]
	if d.ErrorCode != 0 || d.State != "Stable" || d.Topology == nil || len(d.Topology.Subtopologies) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	if n := d.Topology.Subtopologies[1].StateChangelogTopics[0].NumPartitions; n != 4 {
		t.Errorf("described changelog partitions %d", n)
	}
}

// TestStreamsMissingSourceTopics: without its source topic the group is
// NotReady and says so.
func TestStreamsMissingSourceTopics(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := newStreamsClient(h, "app", "a", "p1")
	r := a.heartbeat(t)
	if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{statusMissingSourceTopics}) || r.Status[0].StatusDetail != "Source topics in are missing." {
		t.Fatalf("error %d status %v", r.ErrorCode, r.Status)
	}
	d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if d.State != "NotReady" {
		t.Errorf("state %s", d.State)
	}
}

// TestStreamsScaleOutAndIn: a second process gets tasks only after the
// first revoked them; when it leaves, the first takes everything back.
func TestStreamsScaleOutAndIn(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	b := newStreamsClient(h, "app", "b", "p2")
	b.heartbeat(t)
	if b.owned.size() != 0 {
		t.Fatalf("b got %v before a revoked", b.owned)
	}
	// a is told to give up half; until it says it did, b waits.
	a.heartbeat(t)
	if got := showTasks(a.owned.active); got == "0:[0 1 2 3] 1:[0 1 2 3]" {
		t.Fatalf("a kept everything: %s", got)
	}
	d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if d.State != "Reconciling" {
		t.Errorf("state %s while a revokes", d.State)
	}
	a.heartbeat(t) // reports the smaller set: revocation done
	b.heartbeat(t)
	if a.owned.active.size() != 4 || b.owned.active.size() != 4 || a.owned.active.containsAny(b.owned.active) {
		t.Fatalf("a %s b %s", showTasks(a.owned.active), showTasks(b.owned.active))
	}
	a.heartbeat(t)
	d = h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if d.State != "Stable" || a.epoch != b.epoch || a.epoch != d.AssignmentEpoch {
		t.Errorf("state %s epochs a %d b %d assignment %d", d.State, a.epoch, b.epoch, d.AssignmentEpoch)
	}
	b.leave(t)
	a.heartbeat(t)
	if a.owned.active.size() != 8 {
		t.Fatalf("a after b left: %s", showTasks(a.owned.active))
	}
}

// TestStreamsSessionTimeout: a member that stops heartbeating is fenced
// after group.streams.session.timeout.ms and its tasks move.
func TestStreamsSessionTimeout(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	b := newStreamsClient(h, "app", "b", "p2")
	b.heartbeat(t)
	a.heartbeat(t)
	a.heartbeat(t)
	b.heartbeat(t)
	if b.owned.active.size() != 4 {
		t.Fatalf("b %s", showTasks(b.owned.active))
	}
	for range 10 {
		h.advance(5 * time.Second)
		a.heartbeat(t)
	}
	if a.owned.active.size() != 8 {
		t.Fatalf("a after b's session expired: %s", showTasks(a.owned.active))
	}
	if r := b.heartbeat(t); r.ErrorCode != errUnknownMemberID {
		t.Errorf("fenced member heartbeat: error %d", r.ErrorCode)
	}
}

// TestStreamsStandbyReplicas: with num.standby.replicas 1 each stateful
// task gets a standby on the other process; stateless tasks none.
func TestStreamsStandbyReplicas(t *testing.T) {
	cfg := streamsConfig()
	cfg.StreamsGroupNumStandbyReplicas = 1
	h := newHarness(t, cfg)
	a := streamsReady(t, h)
	b := newStreamsClient(h, "app", "b", "p2")
	for range 4 {
		b.heartbeat(t)
		a.heartbeat(t)
	}
	all := taskSet{}
	for _, c := range []*streamsClient{a, b} {
		for sub, ps := range c.owned.standby {
			if c.owned.active.containsAny(taskSet{sub: ps}) {
				t.Errorf("%s has a standby of its own active task", c.id)
			}
			all.add(sub, ps...)
		}
	}
	// Only subtopology 1 has state; each of its tasks has one standby.
	if showTasks(all) != "1:[0 1 2 3]" || a.owned.standby.size()+b.owned.standby.size() != 4 {
		t.Errorf("standbys a %s b %s", showTasks(a.owned.standby), showTasks(b.owned.standby))
	}
}

// TestStreamsRestart: the group comes back from __consumer_offsets with
// its topology, members, epochs and assignments.
func TestStreamsRestart(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	b := newStreamsClient(h, "app", "b", "p2")
	for range 3 {
		b.heartbeat(t)
		a.heartbeat(t)
	}
	before := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 1, false)()[0]
	h.restart()
	a.heartbeat(t)
	b.heartbeat(t)
	if a.last.ErrorCode != 0 || b.last.ErrorCode != 0 {
		t.Fatalf("after restart: a %d b %d", a.last.ErrorCode, b.last.ErrorCode)
	}
	after := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 1, false)()[0]
	if before.Epoch != after.Epoch || before.AssignmentEpoch != after.AssignmentEpoch || len(after.Members) != 2 {
		t.Fatalf("before epoch %d/%d, after %d/%d with %d members", before.Epoch, before.AssignmentEpoch, after.Epoch, after.AssignmentEpoch, len(after.Members))
	}
	for i := range after.Members {
		bm, am := before.Members[i], after.Members[i]
		if bm.MemberID != am.MemberID || bm.MemberEpoch != am.MemberEpoch || bm.ProcessID != am.ProcessID ||
			fmt.Sprint(bm.Assignment) != fmt.Sprint(am.Assignment) || fmt.Sprint(bm.TargetAssignment) != fmt.Sprint(am.TargetAssignment) {
			t.Errorf("member %d before %+v after %+v", i, bm, am)
		}
	}
	if after.Topology == nil || after.Topology.Epoch != 0 || len(after.Topology.Subtopologies) != 2 {
		t.Errorf("topology after restart %+v", after.Topology)
	}
}

// TestStreamsOffsetCommit: commits are checked against the streams member
// epoch; the group lists, describes and deletes as Kafka's.
func TestStreamsOffsetCommit(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	commit := func(version int16, member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = version
		req.Group, req.MemberID, req.Generation = "app", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.OffsetCommit(context.Background(), req)().Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(9, "a", a.epoch-1); code != errStaleMemberEpoch {
		t.Errorf("stale epoch: %d", code)
	}
	if code := commit(8, "a", a.epoch); code != errUnsupportedVersion {
		t.Errorf("v8: %d", code)
	}
	if code := commit(9, "x", a.epoch); code != errUnknownMemberID {
		t.Errorf("unknown member: %d", code)
	}
	if code := commit(9, "a", a.epoch); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "app"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = "in"
	odp := kmsg.NewOffsetDeleteRequestTopicPartition()
	odt.Partitions = append(odt.Partitions, odp)
	od.Topics = append(od.Topics, odt)
	if r := h.c.OffsetDelete(context.Background(), od)(); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic {
		t.Errorf("offset delete of a topic the topology reads: %d/%d", r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode)
	}
	dg := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"app"}})()
	if dg.Groups[0].ErrorCode != errGroupIDNotFound || dg.Groups[0].ErrorMessage == nil || *dg.Groups[0].ErrorMessage != "Group app is not a classic group." {
		t.Errorf("describe groups: %+v", dg.Groups[0])
	}
	lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"streams"}})()
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "streams" || lg.Groups[0].GroupState != "Stable" {
		t.Errorf("list groups %+v", lg.Groups)
	}
	del := h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"app"}})()
	if del.Groups[0].ErrorCode != errNonEmptyGroup {
		t.Errorf("delete live group: %d", del.Groups[0].ErrorCode)
	}
	// A consumer group heartbeat for the id finds no consumer group.
	chb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	chb.Version = 1
	chb.Group, chb.MemberID, chb.RebalanceTimeoutMillis = "app", "c", 30000
	chb.SubscribedTopicNames, chb.Topics = []string{"in"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := h.c.ConsumerGroupHeartbeat(context.Background(), ClientInfo{}, chb)(); r.ErrorCode != errGroupIDNotFound {
		t.Errorf("consumer heartbeat on a streams group: %d", r.ErrorCode)
	}
	a.leave(t)
	h.restart()
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "app"
	fetch.Groups = append(fetch.Groups, fg)
	fr := h.c.OffsetFetch(context.Background(), fetch)()
	if fr.Groups[0].ErrorCode != 0 || len(fr.Groups[0].Topics) != 1 || fr.Groups[0].Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("offset fetch after restart: %+v", fr.Groups[0])
	}
	del = h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"app"}})()
	if del.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty group: %d", del.Groups[0].ErrorCode)
	}
	d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if d.ErrorCode != errGroupIDNotFound {
		t.Errorf("describe deleted group: %d", d.ErrorCode)
	}
}

// TestStreamsHeartbeatValidation: requests Kafka refuses are refused with
// its codes.
func TestStreamsHeartbeatValidation(t *testing.T) {
	h := newHarness(t, streamsConfig())
	h.topics.set("in:4")
	h.c.TopicsChanged()
	send := func(mut func(r *kmsg.StreamsGroupHeartbeatRequest)) *kmsg.StreamsGroupHeartbeatResponse {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.RebalanceTimeoutMillis = "v", "m", 30000
		req.Topology = streamsTestTopology()
		mut(req)
		return h.c.StreamsGroupHeartbeat(context.Background(), ClientInfo{}, req)().Response
	}
	tests := []struct {
		name string
		mut  func(r *kmsg.StreamsGroupHeartbeatRequest)
		code int16
	}{
		{"no topology", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.Topology = nil }, errInvalidRequest},
		{"no rebalance timeout", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, errInvalidRequest},
		{"empty member", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberID = " " }, errInvalidRequest},
		{"changelog partitions", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology.Subtopologies[1].StateChangelogTopics[0].NumPartitions = 3
		}, errStreamsInvalidTopology},
		{"unknown member", func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch, r.Topology = 3, nil }, errGroupIDNotFound},
		{"repartition never written", func(r *kmsg.StreamsGroupHeartbeatRequest) {
			r.Topology.Subtopologies[0].RepartitionSinkTopics = nil
		}, errStreamsInvalidTopology},
	}
	for _, tt := range tests {
		if r := send(tt.mut); r.ErrorCode != tt.code {
			t.Errorf("%s: error %d, want %d (%v)", tt.name, r.ErrorCode, tt.code, r.ErrorMessage)
		}
	}
	// A joined member with a wrong epoch is fenced.
	if r := send(func(*kmsg.StreamsGroupHeartbeatRequest) {}); r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	if r := send(func(r *kmsg.StreamsGroupHeartbeatRequest) { r.MemberEpoch, r.Topology = 99, nil }); r.ErrorCode != errFencedMemberEpoch {
		t.Errorf("epoch ahead: %d", r.ErrorCode)
	}
}

// TestStreamsCopartitioning: repartition topics copartitioned with a
// source topic take its partition count; source topics of one copartition
// group with different counts are reported, not assigned.
func TestStreamsCopartitioning(t *testing.T) {
	topo := &streamsTopology{subtopologies: []streamsSubtopology{
		{id: "0", sourceTopics: []string{"a"}, repartitionSinkTopics: []string{"r"}},
		{id: "1", sourceTopics: []string{"b", "r"}, repartitionSourceTopics: []streamsTopicInfo{{name: "r"}},
			copartitionGroups: []copartitionGroup{{sourceTopics: []int16{0}, repartitionSourceTopics: []int16{0}}}},
	}}
	c, err := configureTopology(topo, map[string]TopicInfo{"a": {Partitions: 6}, "b": {Partitions: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if c.partitions["r"] != 3 || c.tasks["1"] != 3 || c.tasks["0"] != 6 {
		t.Errorf("decided %v tasks %v", c.partitions, c.tasks)
	}
	topo.subtopologies[1].copartitionGroups = []copartitionGroup{{sourceTopics: []int16{0, 1}}}
	topo.subtopologies[1].sourceTopics = []string{"b", "c"}
	topo.subtopologies[1].repartitionSourceTopics = nil
	topo.subtopologies[0].repartitionSinkTopics = nil
	c, err = configureTopology(topo, map[string]TopicInfo{"a": {Partitions: 6}, "b": {Partitions: 3}, "c": {Partitions: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if c.ready() || c.problem == nil || c.problem.code != statusIncorrectlyPartitioned {
		t.Errorf("copartition mismatch: %+v", c.problem)
	}
}

// TestStreamsRecordsRoundTrip: every streams record decodes to what was
// encoded.
func TestStreamsRecordsRoundTrip(t *testing.T) {
	rack := "r1"
	m := &streamsMember{id: "m", rackID: &rack, clientID: "c", clientHost: "/h", rebalanceTimeoutMs: 300, topologyEpoch: 2, processID: "p",
		endpoint: &streamsEndpoint{"host", 8080}, clientTags: map[string]string{"zone": "a"},
		epoch: 5, previousEpoch: 4, state: memberUnrevokedPartitions,
		assigned: tasksTuple{taskSet{"0": {1, 2}}, taskSet{"1": {0}}, taskSet{}}, revoking: tasksTuple{taskSet{"0": {3}}, taskSet{}, taskSet{}},
		activeEpochs: map[streamsTask]int32{{"0", 1}: 3, {"0", 2}: 5, {"0", 3}: 2}}
	var got streamsMember
	if err := decodeSGMember(sgMemberRecord("g", m).Value, &got); err != nil {
		t.Fatal(err)
	}
	if err := decodeSGCurrentAssignment(sgCurrentAssignmentRecord("g", m).Value, &got); err != nil {
		t.Fatal(err)
	}
	got.id = "m"
	if !got.sameMetadata(m) || !got.sameAssignment(m) {
		t.Errorf("member round trip: %+v", got)
	}
	topo := topologyFromRequest(streamsTestTopology())
	back, err := decodeSGTopology(sgTopologyRecord("g", topo).Value)
	if err != nil || !equalTopology(topo, back) {
		t.Errorf("topology round trip: %v %+v", err, back)
	}
	g := newStreamsGroup("g", 0)
	g.epoch, g.metadataHash, g.validatedTopologyEpoch, g.standbyReplicas = 7, -99, 3, 1
	v, err := decodeSGEpoch(sgEpochRecord(g).Value)
	if err != nil || v != (sgEpochValue{epoch: 7, validated: 3, hash: -99, standbys: 1}) {
		t.Errorf("epoch round trip: %v %+v", err, v)
	}
	g.rackAwareTags = "zone,rack"
	v, err = decodeSGEpoch(sgEpochRecord(g).Value)
	if err != nil || v != (sgEpochValue{epoch: 7, validated: 3, hash: -99, standbys: 1, rackTags: "zone,rack"}) {
		t.Errorf("epoch round trip with rack tags: %v %+v", err, v)
	}
	g.assignmentEpoch = 6
	epoch, ts, err := decodeTargetEpoch(sgTargetEpochRecord(g, 1234567).Value)
	if err != nil || epoch != 6 || ts != 1234567 {
		t.Errorf("target assignment metadata round trip: %v epoch %d timestamp %d", err, epoch, ts)
	}
}

// TestStreamsRebalanceTimeout: a member that keeps its tasks past its
// rebalance timeout after being told to revoke them is fenced, and the
// tasks go to the others.
func TestStreamsRebalanceTimeout(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	all := a.owned.clone()
	b := newStreamsClient(h, "app", "b", "p2")
	b.heartbeat(t)
	a.heartbeat(t) // told to revoke half
	a.owned = all  // but keeps reporting everything
	for range 7 {
		h.advance(5 * time.Second)
		a.owned = all
		a.heartbeat(t)
		b.heartbeat(t)
		if a.last.ErrorCode != 0 {
			break
		}
	}
	if a.last.ErrorCode != errUnknownMemberID {
		t.Fatalf("a still in the group after its rebalance timeout: error %d", a.last.ErrorCode)
	}
	b.heartbeat(t)
	if b.owned.active.size() != 8 {
		t.Fatalf("b after a was fenced: %s", showTasks(b.owned.active))
	}
}

// TestStreamsStandbyReleasedBeforeActive: a task whose standby sits on
// the process that is to run it actively is withheld until that standby
// is revoked (UNRELEASED_TASKS), as Kafka's CurrentAssignmentBuilder.
func TestStreamsStandbyReleasedBeforeActive(t *testing.T) {
	g := newStreamsGroup("g", 0)
	g.assignmentEpoch = 3
	g.members["s"] = &streamsMember{id: "s", processID: "p", epoch: 2, state: memberStable,
		assigned: tasksTuple{taskSet{}, taskSet{"0": {1}}, taskSet{}}, revoking: emptyTasks()}
	a := &streamsMember{id: "a", processID: "p", epoch: 2, state: memberStable, assigned: emptyTasks(), revoking: emptyTasks()}
	g.members["a"] = a
	g.target["a"] = tasksTuple{taskSet{"0": {0, 1}}, taskSet{}, taskSet{}}
	owned := emptyTasks()
	next := reconcileStreams(g, a, &owned, 3)
	if next.state != memberUnreleasedPartitions || next.epoch != 3 || showTasks(next.assigned.active) != "0:[0]" {
		t.Fatalf("state %v epoch %d active %s", next.state, next.epoch, showTasks(next.assigned.active))
	}
	// Once the standby is gone, the member takes the task.
	g.members["s"].assigned = emptyTasks()
	g.members["a"] = next
	next = reconcileStreams(g, next, &owned, 3)
	if next.state != memberStable || showTasks(next.assigned.active) != "0:[0 1]" {
		t.Fatalf("after release: state %v active %s", next.state, showTasks(next.assigned.active))
	}
}

// TestStreamsInitialRebalanceDelay: the first assignment of a new group
// waits group.streams.initial.rebalance.delay.ms (ASSIGNMENT_DELAYED
// meanwhile) and then covers every member that joined.
func TestStreamsInitialRebalanceDelay(t *testing.T) {
	cfg := testConfig() // Kafka's default delay, 3 s
	h := newHarness(t, cfg)
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	a := newStreamsClient(h, "app", "a", "p1")
	b := newStreamsClient(h, "app", "b", "p2")
	for _, c := range []*streamsClient{a, b} {
		r := c.heartbeat(t)
		if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{statusAssignmentDelayed}) || c.owned.size() != 0 || r.MemberEpoch == 0 {
			t.Fatalf("%s during the delay: error %d epoch %d status %v tasks %v", c.id, r.ErrorCode, r.MemberEpoch, r.Status, c.owned)
		}
	}
	h.advance(3 * time.Second)
	a.heartbeat(t)
	b.heartbeat(t)
	if a.owned.active.size() != 4 || b.owned.active.size() != 4 || len(a.last.Status) != 0 {
		t.Fatalf("after the delay: a %s b %s status %v", showTasks(a.owned.active), showTasks(b.owned.active), a.last.Status)
	}
}

// TestStreamsAssignmentInterval: after a target assignment the next waits
// group.streams.assignment.interval.ms, as Kafka 4.4: a member joining
// meanwhile gets no tasks and the ASSIGNMENT_DELAYED status, the others
// keep theirs, and the first heartbeat after the interval reassigns.
func TestStreamsAssignmentInterval(t *testing.T) {
	cfg := streamsConfig()
	cfg.StreamsGroupAssignmentIntervalMs = 1000
	h := newHarness(t, cfg)
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	a := newStreamsClient(h, "app", "a", "p1")
	if r := a.heartbeat(t); r.ErrorCode != 0 || len(r.Status) != 0 || a.owned.active.size() != 8 {
		t.Fatalf("first member: error %d status %v tasks %s", r.ErrorCode, r.Status, showTasks(a.owned.active))
	}
	first := a.epoch
	h.advance(400 * time.Millisecond)
	b := newStreamsClient(h, "app", "b", "p2")
	delayed := []int8{statusAssignmentDelayed}
	r := b.heartbeat(t)
	if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), delayed) || b.owned.size() != 0 || r.MemberEpoch != first {
		t.Fatalf("b within the interval: error %d epoch %d status %v tasks %v", r.ErrorCode, r.MemberEpoch, r.Status, b.owned)
	}
	if r.Status[0].StatusDetail != "Assignment delayed due to the configured assignment interval." {
		t.Errorf("status detail %q", r.Status[0].StatusDetail)
	}
	h.advance(599 * time.Millisecond)
	r = a.heartbeat(t)
	if !slices.Equal(statusCodes(r), delayed) || a.owned.active.size() != 8 || a.epoch != first {
		t.Fatalf("a 999 ms after the assignment: epoch %d status %v tasks %s", a.epoch, r.Status, showTasks(a.owned.active))
	}
	d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if d.AssignmentEpoch != first || d.Epoch <= first {
		t.Fatalf("describe within the interval: group epoch %d assignment epoch %d", d.Epoch, d.AssignmentEpoch)
	}
	h.advance(time.Millisecond)
	r = a.heartbeat(t) // the interval has passed: a new target, a revokes half
	if len(r.Status) != 0 || a.owned.active.size() != 4 {
		t.Fatalf("a after the interval: status %v tasks %s", r.Status, showTasks(a.owned.active))
	}
	a.heartbeat(t)
	b.heartbeat(t)
	if b.owned.active.size() != 4 || a.owned.active.containsAny(b.owned.active) || len(b.last.Status) != 0 {
		t.Fatalf("b after the interval: a %s b %s status %v", showTasks(a.owned.active), showTasks(b.owned.active), b.last.Status)
	}
}

// TestStreamsMissingClientTags: with group.streams.rack.aware.assignment.tags
// set, a member lacking some of the tags gets MISSING_CLIENT_TAGS naming
// them, in the configured order, on every heartbeat, as Kafka 4.4; its
// tasks are assigned all the same. A group override replaces the broker's
// list, and changing it moves the group epoch.
func TestStreamsMissingClientTags(t *testing.T) {
	cfg := streamsConfig()
	cfg.StreamsGroupRackAwareAssignmentTags = []string{"zone", "rack", "host"}
	var override []string
	cfg.StreamsGroupConfig = func(string) StreamsGroupOverrides {
		return StreamsGroupOverrides{NumStandbyReplicas: -1, InitialRebalanceDelayMs: -1, AssignmentIntervalMs: -1, RackAwareAssignmentTags: override,
			TaskOffsetIntervalMs: -1, AcceptableRecoveryLag: -1}
	}
	h := newHarness(t, cfg)
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	a := newStreamsClient(h, "app", "a", "p1")
	a.tags = map[string]string{"rack": "r1"}
	want := "Missing required client tags for rack-aware standby assignment: [zone, host]. Configure them via 'client.tag.<tagKey>' in your Streams config."
	for i := range 2 {
		r := a.heartbeat(t)
		if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{statusMissingClientTags}) || r.Status[0].StatusDetail != want {
			t.Fatalf("heartbeat %d: error %d status %+v", i, r.ErrorCode, r.Status)
		}
	}
	if a.owned.active.size() != 8 {
		t.Fatalf("tasks %s", showTasks(a.owned.active))
	}
	b := newStreamsClient(h, "app", "b", "p2")
	b.tags = map[string]string{"zone": "z1", "rack": "r2", "host": "h2"}
	if r := b.heartbeat(t); r.ErrorCode != 0 || len(r.Status) != 0 {
		t.Fatalf("b with every tag: error %d status %+v", r.ErrorCode, r.Status)
	}
	before := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0].Epoch
	override = []string{"rack"}
	if r := a.heartbeat(t); len(r.Status) != 0 {
		t.Fatalf("a under the group's tags: status %+v", r.Status)
	}
	if after := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0].Epoch; after != before+1 {
		t.Errorf("group epoch %d after the tags changed, want %d", after, before+1)
	}
}

// TestStreamsStaticMember: a static member that leaves with epoch -2
// keeps its tasks; a new process with the same group.instance.id takes
// them over under a new member id without a new group epoch, while a
// second live holder of the id is refused.
func TestStreamsStaticMember(t *testing.T) {
	h := newHarness(t, streamsConfig())
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	inst := "instance-1"
	a := newStreamsClient(h, "app", "a", "p1")
	a.instance = &inst
	b := newStreamsClient(h, "app", "b", "p2")
	a.heartbeat(t)
	b.heartbeat(t)
	for range 3 {
		a.heartbeat(t)
		b.heartbeat(t)
	}
	if a.owned.active.size() != 4 || b.owned.active.size() != 4 {
		t.Fatalf("a %s b %s", showTasks(a.owned.active), showTasks(b.owned.active))
	}
	// Another member claiming the instance id while a runs is refused.
	// (A restarted Streams instance keeps its process id, kept in its
	// state directory, and gets a new member id.)
	c := newStreamsClient(h, "app", "c", "p1")
	c.instance = &inst
	if r := c.heartbeat(t); r.ErrorCode != errUnreleasedInstanceID {
		t.Fatalf("second holder of the instance id: error %d", r.ErrorCode)
	}
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "app", "a", -2, &inst
	if r := h.c.StreamsGroupHeartbeat(context.Background(), ClientInfo{}, req)().Response; r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	h.quiesce()
	before := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	c.heartbeat(t)
	c.heartbeat(t)
	if c.last.ErrorCode != 0 || showTasks(c.owned.active) != showTasks(a.owned.active) {
		t.Fatalf("the new holder of the instance id: error %d tasks %s, want %s", c.last.ErrorCode, showTasks(c.owned.active), showTasks(a.owned.active))
	}
	after := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 0, false)()[0]
	if after.Epoch != before.Epoch || len(after.Members) != 2 {
		t.Errorf("group epoch %d -> %d, %d members", before.Epoch, after.Epoch, len(after.Members))
	}
	if r := a.heartbeat(t); r.ErrorCode != errFencedInstanceID {
		t.Errorf("the replaced member: error %d", r.ErrorCode)
	}
}

// TestStreamsAssignorRanksStandbyCandidates: the task offsets members
// report (TaskOffsets) and the standbys they hold rank them, as Kafka 4.4's
// StickyTaskAssignor: between equally loaded members a standby's holder
// wins over a member that only reported an offset, and a greater reported
// offset wins over a smaller one, whatever their member ids.
func TestStreamsAssignorRanksStandbyCandidates(t *testing.T) {
	member := func(id, process string, standby taskSet, offsets ...taskOffset) *streamsMember {
		m := &streamsMember{id: id, processID: process, assigned: emptyTasks(), taskOffsets: offsets}
		if standby != nil {
			m.assigned.standby = standby
		}
		return m
	}
	stateful := map[string]bool{"1": true}
	for _, tc := range []struct {
		name    string
		tasks   map[string]int32
		members []*streamsMember
		want    map[string]string // member -> "active | standby"
	}{{
		// a keeps 1:0 (its share of one task); d, the standby holder of
		// 1:1, runs it. 1:0's standby goes to c, which reported the
		// greater offset, rather than to b, first by id; 1:1's standby
		// then to b, the least loaded without a copy.
		name:  "offsets",
		tasks: map[string]int32{"1": 2},
		members: []*streamsMember{
			func() *streamsMember {
				m := member("a", "p1", nil)
				m.assigned.active = taskSet{"1": {0, 1}}
				return m
			}(),
			member("b", "p2", nil, taskOffset{"1", 0, 10}),
			member("c", "p3", nil, taskOffset{"1", 0, 500}),
			member("d", "p4", taskSet{"1": {1}}),
		},
		want: map[string]string{"a": "1:[0] | ", "b": " | 1:[1]", "c": " | 1:[0]", "d": "1:[1] | "},
	}, {
		// b holds 1:0 as standby and keeps it, although c reported a
		// greater offset for it.
		name:  "standby holder first",
		tasks: map[string]int32{"1": 1},
		members: []*streamsMember{
			func() *streamsMember {
				m := member("a", "p1", nil)
				m.assigned.active = taskSet{"1": {0}}
				return m
			}(),
			member("b", "p2", taskSet{"1": {0}}, taskOffset{"1", 0, 5}),
			member("c", "p3", nil, taskOffset{"1", 0, 500}),
		},
		want: map[string]string{"a": "1:[0] | ", "b": " | 1:[0]", "c": " | "},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := make(map[string]*streamsMember)
			for _, m := range tc.members {
				ms[m.id] = m
			}
			got := assignStreamsTasks(ms, tc.tasks, stateful, 1)
			for id, want := range tc.want {
				if s := showTasks(got[id].active) + " | " + showTasks(got[id].standby); s != want {
					t.Errorf("%s: %q, want %q", id, s, want)
				}
			}
		})
	}
}

// TestStreamsCommitAssignmentEpochs: as in Kafka 4.4, an offset commit
// from a member epoch older than the member's is taken for the partitions
// of active tasks the member got at or before that epoch (kept across its
// later epochs), and refused with STALE_MEMBER_EPOCH for a task it does
// not own, one it got later, or a topic no task reads. The assignment
// epochs survive a reload from the records.
func TestStreamsCommitAssignmentEpochs(t *testing.T) {
	h := newHarness(t, streamsConfig())
	a := streamsReady(t, h)
	first := a.epoch
	b := newStreamsClient(h, "app", "b", "p2")
	b.heartbeat(t)
	a.heartbeat(t) // told to revoke half
	a.heartbeat(t) // revoked: the new epoch, with the tasks it kept
	b.heartbeat(t) // gets the released tasks at the new epoch
	if a.epoch == first || b.epoch != a.epoch || b.owned.active.size() == 0 {
		t.Fatalf("epochs a %d (first %d) b %d, b tasks %s", a.epoch, first, b.epoch, showTasks(b.owned.active))
	}
	topicOf := map[string]string{"0": "in", "1": "app-rep"}
	partitionOf := func(s taskSet) (string, int32) {
		sub := sortedKeys(s)[0]
		return topicOf[sub], s[sub][0]
	}
	commit := func(member string, epoch int32, topic string, partition int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "app", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.OffsetCommit(context.Background(), req)().Topics[0].Partitions[0].ErrorCode
	}
	check := func(when string) {
		t.Helper()
		kt, kp := partitionOf(a.owned.active)
		gt, gp := partitionOf(b.owned.active)
		for _, c := range []struct {
			what   string
			member string
			epoch  int32
			topic  string
			p      int32
			want   int16
		}{
			{"a, older epoch, a task it kept", "a", first, kt, kp, 0},
			{"a, older epoch, a task it gave up", "a", first, gt, gp, errStaleMemberEpoch},
			{"a, older epoch, a topic no task reads", "a", first, "other", 0, errStaleMemberEpoch},
			{"a, newer epoch", "a", a.epoch + 1, kt, kp, errStaleMemberEpoch},
			{"b, older epoch, a task it got later", "b", first, gt, gp, errStaleMemberEpoch},
			{"b, its epoch", "b", b.epoch, gt, gp, 0},
		} {
			if code := commit(c.member, c.epoch, c.topic, c.p); code != c.want {
				t.Errorf("%s: %s: code %d, want %d", when, c.what, code, c.want)
			}
		}
	}
	check("live")
	h.restart()
	check("after a reload")
}

// TestStreamsDescribeTopologyBeforeReady: until the internal topics exist
// StreamsGroupDescribe shows the topology as declared (partition counts
// the topology does not fix are 0), as Kafka; once they do, the counts
// decided for them.
func TestStreamsDescribeTopologyBeforeReady(t *testing.T) {
	h := newHarness(t, streamsConfig())
	h.topics.set("in:4")
	h.c.TopicsChanged()
	a := newStreamsClient(h, "app", "a", "p1")
	if r := a.heartbeat(t); r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{statusMissingInternalTopics}) {
		t.Fatalf("join: error %d status %v", r.ErrorCode, r.Status)
	}
	show := func() string {
		d := h.c.StreamsGroupDescribe(context.Background(), []string{"app"}, 1, false)()[0]
		if d.ErrorCode != 0 || d.Topology == nil {
			t.Fatalf("describe: %+v", d)
		}
		var parts []string
		for _, s := range d.Topology.Subtopologies {
			part := fmt.Sprintf("%s src=%v sink=%v", s.SubtopologyID, s.SourceTopics, s.RepartitionSinkTopics)
			for _, ti := range append(s.RepartitionSourceTopics, s.StateChangelogTopics...) {
				part += fmt.Sprintf(" %s:%d", ti.Topic, ti.NumPartitions)
			}
			parts = append(parts, part)
		}
		return strings.Join(parts, "; ")
	}
	if got, want := show(), "0 src=[in] sink=[app-rep]; 1 src=[app-rep] sink=[] app-rep:0 app-store-changelog:0"; got != want {
		t.Errorf("before the internal topics: %q, want %q", got, want)
	}
	h.topics.set("in:4,app-rep:4,app-store-changelog:4")
	h.c.TopicsChanged()
	a.heartbeat(t)
	if got, want := show(), "0 src=[in] sink=[app-rep]; 1 src=[app-rep] sink=[] app-rep:4 app-store-changelog:4"; got != want {
		t.Errorf("once ready: %q, want %q", got, want)
	}
}
