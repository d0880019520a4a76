package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterStreamsMember is one stream thread spoken to with raw
// StreamsGroupHeartbeat requests pinned to the node a FindCoordinator
// answer names, as the Streams client sends them.
type clusterStreamsMember struct {
	t     *testing.T
	cl    *kgo.Client
	group string
	id    string
	epoch int32
	owned []kmsg.TaskIDs // active tasks, as last assigned
}

// coordinator asks any live node for the group's coordinator until one
// other than not answers.
func (m *clusterStreamsMember) coordinator(not int32) int32 {
	m.t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = m.group
		resp, err := req.RequestWith(testContext(m.t), m.cl)
		if err == nil && resp.ErrorCode == 0 && resp.NodeID != not {
			return resp.NodeID
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("find coordinator of %s (not %d): %v %+v", m.group, not, err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heartbeat sends one StreamsGroupHeartbeat v1 to node: a join with the
// topology at epoch 0, else the member's epoch and owned tasks. It retries
// while the coordinator loads or moves, as a client does.
func (m *clusterStreamsMember) heartbeat(node int32) *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topology = clusterStreamsTopology()
		pid := "process-" + m.id
		req.ProcessID = &pid
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	} else {
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = m.owned, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := req.RequestWith(testContext(m.t), m.cl.Broker(int(node)))
		if err == nil {
			switch resp.ErrorCode {
			case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
			default:
				if resp.ErrorCode == 0 {
					m.epoch = resp.MemberEpoch
					if resp.ActiveTasks != nil {
						m.owned = resp.ActiveTasks
					}
				}
				return resp
			}
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("streams heartbeat to node %d: %v %+v", node, err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterStreamsTopology reads "sc-in" into a store whose changelog is
// "sc-app-store-changelog".
func clusterStreamsTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID = "0"
	s.SourceTopics = []string{"sc-in"}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "sc-app-store-changelog"
	s.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s}
	return &t
}

// TestStreamsGroupClusterCoordinatorMoves: a streams group lives on a
// three-node cluster; its member runs every task and commits offsets.
// The node leading the group's __consumer_offsets partition (its
// coordinator) stops. Another node becomes the coordinator, loads the
// group from the records the first one wrote, and the member goes on at
// its epoch with its tasks: heartbeats are answered without fencing,
// StreamsGroupDescribe shows the member, its tasks and the topology, and
// the offsets committed on the first coordinator are fetched and
// committed again on the second.
func TestStreamsGroupClusterCoordinatorMoves(t *testing.T) {
	nodes := startTestCluster(t)
	byID := map[int32]*testNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	cl := clusterClient(t, nodes)
	if resp, err := kadm.NewClient(cl).CreateTopic(testContext(t), 3, 3, nil, "sc-in"); err != nil || resp.Err != nil {
		t.Fatalf("create sc-in: %v %v", err, resp.Err)
	}
	m := &clusterStreamsMember{t: t, cl: cl, group: "sc-app", id: "m1"}
	c := m.coordinator(-1)

	// Join; the changelog topic is created, then the tasks come after the
	// initial rebalance delay (ASSIGNMENT_DELAYED meanwhile).
	if r := m.heartbeat(c); r.ErrorCode != 0 {
		t.Fatalf("join on %d: %v", c, kerr.ErrorForCode(r.ErrorCode))
	}
	want := []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: []int32{0, 1, 2}}}
	for deadline := time.Now().Add(30 * time.Second); fmt.Sprint(m.owned) != fmt.Sprint(want); time.Sleep(200 * time.Millisecond) {
		if r := m.heartbeat(c); r.ErrorCode != 0 || time.Now().After(deadline) {
			t.Fatalf("heartbeat on %d: error %v status %+v tasks %+v", c, kerr.ErrorForCode(r.ErrorCode), r.Status, m.owned)
		}
	}
	epoch := m.epoch

	commit := func(node int32, gen int32, offsets ...int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = m.group, m.id, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "sc-in"
		for p, o := range offsets {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = int32(p), o, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl.Broker(int(node)))
		if err != nil {
			t.Fatalf("commit on %d: %v", node, err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit on %d, partition %d: %v", node, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	fetch := func(node int32) []int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = m.group
		g.MemberID, g.MemberEpoch = kmsg.StringPtr(m.id), m.epoch
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(testContext(t), cl.Broker(int(node)))
		if err != nil {
			t.Fatalf("offset fetch on %d: %v", node, err)
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("offset fetch on %d: %+v", node, resp.Groups)
		}
		out := make([]int64, 3)
		for _, rt := range resp.Groups[0].Topics {
			for _, p := range rt.Partitions {
				if rt.Topic == "sc-in" && p.Partition < 3 {
					out[p.Partition] = p.Offset
				}
			}
		}
		return out
	}
	commit(c, epoch, 5, 6, 7)
	if got := fetch(c); !slices.Equal(got, []int64{5, 6, 7}) {
		t.Fatalf("offsets on %d: %v", c, got)
	}

	// The coordinator stops; the partition's new leader takes the group.
	if err := byID[c].Close(); err != nil {
		t.Logf("close node %d: %v", c, err)
	}
	c2 := m.coordinator(c)
	t.Logf("coordinator moved from node %d to node %d", c, c2)
	r := m.heartbeat(c2)
	if r.ErrorCode != 0 || r.MemberEpoch != epoch {
		t.Fatalf("heartbeat on the new coordinator %d: error %v epoch %d, want %d", c2, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epoch)
	}
	if fmt.Sprint(m.owned) != fmt.Sprint(want) {
		t.Fatalf("tasks on the new coordinator: %+v", m.owned)
	}

	d := kmsg.NewPtrStreamsGroupDescribeRequest()
	d.Version = 1
	d.Groups = []string{m.group}
	dr, err := d.RequestWith(testContext(t), cl.Broker(int(c2)))
	if err != nil {
		t.Fatalf("describe on %d: %v", c2, err)
	}
	g := dr.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != epoch || g.Topology == nil || len(g.Members) != 1 {
		t.Fatalf("describe on %d: %+v", c2, g)
	}
	mem := g.Members[0]
	if mem.MemberID != m.id || mem.MemberEpoch != epoch || mem.ProcessID != "process-m1" ||
		fmt.Sprint(mem.Assignment.ActiveTasks) != fmt.Sprint(want) || fmt.Sprint(mem.TargetAssignment.ActiveTasks) != fmt.Sprint(want) {
		t.Fatalf("described member on %d: %+v", c2, mem)
	}
	if cl := g.Topology.Subtopologies[0].StateChangelogTopics; len(cl) != 1 || cl[0].NumPartitions != 3 {
		t.Fatalf("described changelog topics on %d: %+v", c2, cl)
	}

	if got := fetch(c2); !slices.Equal(got, []int64{5, 6, 7}) {
		t.Fatalf("offsets on the new coordinator %d: %v, want those committed on %d", c2, got, c)
	}
	commit(c2, epoch, 8, 9, 10)
	if got := fetch(c2); !slices.Equal(got, []int64{8, 9, 10}) {
		t.Fatalf("offsets committed on %d: %v", c2, got)
	}
}
