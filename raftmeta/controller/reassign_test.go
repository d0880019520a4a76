package controller

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// reassign asks for one partition's reassignment and returns its result.
func reassign(t *testing.T, c API, topic string, p int32, replicas []int32, allowRF bool) error {
	t.Helper()
	res, err := c.AlterPartitionReassignments(ctxT(t), []ReassignTopic{{Topic: topic, Partitions: []ReassignPartition{{Partition: p, Replicas: replicas}}}}, allowRF)
	if err != nil {
		t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	if len(res) != 1 || res[0].Topic != topic || len(res[0].Partitions) != 1 || res[0].Partitions[0].Partition != p {
		t.Fatalf("answer %+v", res)
	}
	return res[0].Partitions[0].Err
}

func listAll(t *testing.T, c API) []OngoingTopicReassignments {
	t.Helper()
	res, err := c.ListPartitionReassignments(ctxT(t), nil)
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	return res
}

// wantPartition checks the fields of a partition that a reassignment moves.
func wantPartition(t *testing.T, what string, got image.PartitionImage, replicas, isr, adding, removing []int32, leader, leaderEpoch, partitionEpoch int32) {
	t.Helper()
	if !slices.Equal(got.Replicas, replicas) || !slices.Equal(got.ISR, isr) ||
		!slices.Equal(got.AddingReplicas, adding) || !slices.Equal(got.RemovingReplicas, removing) ||
		got.Leader != leader || got.LeaderEpoch != leaderEpoch || got.PartitionEpoch != partitionEpoch {
		t.Fatalf("%s: partition %+v, want replicas %v isr %v adding %v removing %v leader %d epochs %d/%d",
			what, got, replicas, isr, adding, removing, leader, leaderEpoch, partitionEpoch)
	}
}

// A move of one replica: the replicas grow to the union, and the leader's
// AlterPartition that brings the new replica into the ISR completes the
// reassignment, dropping the removed replica and bumping the leader epoch.
func TestReassignCompletesWhenAddedReplicaJoinsISR(t *testing.T) {
	n, c, _, _ := livenessController(t, 4)
	id := createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	if err := reassign(t, c, "t", 0, []int32{1, 2, 4}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "grown", part(t, n, "t", 0), []int32{1, 2, 4, 3}, []int32{1, 2, 3}, []int32{4}, []int32{3}, 1, 0, 1)
	want := []OngoingTopicReassignments{{Topic: "t", Partitions: []OngoingReassignment{
		{Partition: 0, Replicas: []int32{1, 2, 4, 3}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}}}}}
	if got := listAll(t, c); !reflect.DeepEqual(got, want) {
		t.Fatalf("list all: %+v", got)
	}
	named, err := c.ListPartitionReassignments(ctxT(t), []TopicPartitions{{Topic: "t", Partitions: []int32{0, 7}}, {Topic: "nope", Partitions: []int32{0}}})
	if err != nil || !reflect.DeepEqual(named, want) {
		t.Fatalf("list named: %+v %v", named, err)
	}

	// The same target again changes nothing.
	if err := reassign(t, c, "t", 0, []int32{1, 2, 4}, true); err != nil {
		t.Fatal(err)
	}
	if got := part(t, n, "t", 0); got.PartitionEpoch != 1 {
		t.Fatalf("repeated reassignment changed the partition: %+v", got)
	}

	p, err := c.AlterPartition(ctxT(t), id, 0, 0, 1, isrOf(1, 2, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "answer", p, []int32{1, 2, 4}, []int32{1, 2, 4}, nil, nil, 1, 1, 2)
	wantPartition(t, "image", part(t, n, "t", 0), []int32{1, 2, 4}, []int32{1, 2, 4}, nil, nil, 1, 1, 2)
	if got := listAll(t, c); len(got) != 0 {
		t.Fatalf("still listed after completion: %+v", got)
	}
}

// Adding replicas that join the ISR one at a time: the reassignment
// completes only with the last of them.
func TestReassignWaitsForEveryAddedReplica(t *testing.T) {
	n, c, _, _ := livenessController(t, 4)
	id := createAssigned(t, c, "t", map[int32][]int32{0: {1}}, map[string]string{})
	if err := reassign(t, c, "t", 0, []int32{1, 3, 4}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "grown", part(t, n, "t", 0), []int32{1, 3, 4}, []int32{1}, []int32{3, 4}, nil, 1, 0, 1)
	p, err := c.AlterPartition(ctxT(t), id, 0, 0, 1, isrOf(1, 4))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "one caught up", p, []int32{1, 3, 4}, []int32{1, 4}, []int32{3, 4}, nil, 1, 0, 2)
	p, err = c.AlterPartition(ctxT(t), id, 0, 0, 2, isrOf(1, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	// Nothing was removed: no leader epoch bump.
	wantPartition(t, "all caught up", p, []int32{1, 3, 4}, []int32{1, 4, 3}, nil, nil, 1, 0, 3)
}

// A reassignment that removes the leader moves the leadership to a target
// replica when it completes.
func TestReassignMovesLeaderOffRemovedReplica(t *testing.T) {
	n, c, _, _ := livenessController(t, 3)
	id := createAssigned(t, c, "t", map[int32][]int32{0: {1, 2}}, nil)
	if err := reassign(t, c, "t", 0, []int32{3, 2}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "grown", part(t, n, "t", 0), []int32{3, 2, 1}, []int32{1, 2}, []int32{3}, []int32{1}, 1, 0, 1)
	p, err := c.AlterPartition(ctxT(t), id, 0, 0, 1, isrOf(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "completed", p, []int32{3, 2}, []int32{2, 3}, nil, nil, 3, 1, 2)
	// The old leader's next request is fenced.
	if _, err := c.AlterPartition(ctxT(t), id, 0, 0, 2, isrOf(1, 2, 3)); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("old leader's AlterPartition: %v", err)
	}
}

// A reassignment that only drops or reorders replicas completes at once;
// one that drops the whole ISR waits for a remaining replica to join it.
func TestReassignShrinkAndReorder(t *testing.T) {
	n, c, _, _ := livenessController(t, 3)
	createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	id := createAssigned(t, c, "u", map[int32][]int32{0: {1, 2}}, nil)
	if err := reassign(t, c, "t", 0, []int32{3, 2, 1}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "reordered", part(t, n, "t", 0), []int32{3, 2, 1}, []int32{1, 2, 3}, nil, nil, 1, 0, 1)
	if err := reassign(t, c, "t", 0, []int32{3, 2}, true); err != nil {
		t.Fatal(err)
	}
	// The leader was removed: 3, the first target replica in the ISR, leads.
	wantPartition(t, "shrunk", part(t, n, "t", 0), []int32{3, 2}, []int32{2, 3}, nil, nil, 3, 1, 2)

	// u-0 with ISR {1}: dropping 1 must wait for 2 to catch up.
	if _, err := c.AlterPartition(ctxT(t), id, 0, 0, 0, isrOf(1)); err != nil {
		t.Fatal(err)
	}
	if err := reassign(t, c, "u", 0, []int32{2}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "waiting", part(t, n, "u", 0), []int32{2, 1}, []int32{1}, nil, []int32{1}, 1, 0, 2)
	p, err := c.AlterPartition(ctxT(t), id, 0, 0, 2, isrOf(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "completed", p, []int32{2}, []int32{2}, nil, nil, 2, 1, 3)
}

// Cancelling reverts to the replicas before the reassignment; one whose
// ISR holds only added replicas needs unclean.leader.election.enable.
func TestReassignCancel(t *testing.T) {
	n, c, clk, epochs := livenessController(t, 4)
	createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	if err := reassign(t, c, "t", 0, nil, true); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with nothing in progress: %v", err)
	}
	if err := reassign(t, c, "t", 0, []int32{1, 2, 4}, true); err != nil {
		t.Fatal(err)
	}
	if err := reassign(t, c, "t", 0, nil, true); err != nil {
		t.Fatal(err)
	}
	// Replica 4 leaves the replicas: the leader epoch moves to fence it.
	wantPartition(t, "cancelled", part(t, n, "t", 0), []int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil, 1, 1, 2)
	if got := listAll(t, c); len(got) != 0 {
		t.Fatalf("listed after cancel: %+v", got)
	}

	// u-clean and u-unclean move from {1,2} to {2,3}; 2 falls out of the
	// ISR and 3 joins it, then 1 is fenced: only 3, an added replica, is
	// left in the ISR, so going back to {2,1} is an unclean election.
	ids := map[string][16]byte{}
	for _, name := range []string{"u-clean", "u-unclean"} {
		var cfg map[string]string
		if name == "u-unclean" {
			cfg = map[string]string{"unclean.leader.election.enable": "true"}
		}
		id := createAssigned(t, c, name, map[int32][]int32{0: {1, 2}}, cfg)
		ids[name] = id
		if err := reassign(t, c, name, 0, []int32{2, 3}, true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AlterPartition(ctxT(t), id, 0, 0, 1, isrOf(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AlterPartition(ctxT(t), id, 0, 0, 2, isrOf(1, 3)); err != nil {
			t.Fatal(err)
		}
		wantPartition(t, name+" before fencing", part(t, n, name, 0), []int32{2, 3, 1}, []int32{1, 3}, []int32{3}, []int32{1}, 1, 0, 3)
	}
	fence(t, n, c, clk, epochs, 1)
	for _, name := range []string{"u-clean", "u-unclean"} {
		wantPartition(t, name+" after fencing", part(t, n, name, 0), []int32{2, 3, 1}, []int32{3}, []int32{3}, []int32{1}, 3, 1, 4)
	}
	if err := reassign(t, c, "u-clean", 0, nil, true); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("cancel needing an unclean election: %v", err)
	}
	if err := reassign(t, c, "u-unclean", 0, nil, true); err != nil {
		t.Fatal(err)
	}
	// Back to {2,1} with the first original replica as the whole ISR.
	wantPartition(t, "u-unclean cancelled", part(t, n, "u-unclean", 0), []int32{2, 1}, []int32{2}, nil, nil, 2, 2, 5)
}

// fence stops broker id's heartbeats until the controller fences it; the
// other brokers keep theirs.
func fence(t *testing.T, n *testNode, c *Controller, clk *fakeClock, epochs map[int32]int64, id int32) {
	t.Helper()
	for range 4 {
		clk.Advance(testSession / 3)
		for other, epoch := range epochs {
			if other != id {
				heartbeat(t, n, other, epoch)
			}
		}
		runPeriodic(t, c)
	}
	if b, _ := n.Image().Broker(id); !b.Fenced {
		t.Fatalf("broker %d not fenced", id)
	}
}

func TestReassignErrors(t *testing.T) {
	n, c, _, _ := livenessController(t, 3)
	createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	createAssigned(t, c, "one", map[int32][]int32{0: {1}}, nil)
	tests := []struct {
		name     string
		topic    string
		part     int32
		replicas []int32
		allowRF  bool
		want     *kerr.Error
		msg      string
	}{
		{"unknown topic", "nope", 0, []int32{1}, true, kerr.UnknownTopicOrPartition, "Unable to find a topic named nope."},
		{"unknown partition", "t", 1, []int32{1}, true, kerr.UnknownTopicOrPartition, "Unable to find partition t:1."},
		{"negative partition", "t", -1, []int32{1}, true, kerr.UnknownTopicOrPartition, "Unable to find partition t:-1."},
		{"empty", "t", 0, []int32{}, true, kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."},
		{"duplicate", "t", 0, []int32{1, 2, 1}, true, kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker 1 more than once."},
		{"unregistered", "t", 0, []int32{1, 9}, true, kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker 9, but no such broker is registered."},
		{"negative broker", "t", 0, []int32{-1}, true, kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker -1, but no such broker is registered."},
		{"rf change forbidden", "one", 0, []int32{1, 2}, false, kerr.InvalidReplicationFactor, "The replication factor is changed from 1 to 2"},
	}
	for _, tt := range tests {
		err := reassign(t, c, tt.topic, tt.part, tt.replicas, tt.allowRF)
		if !errors.Is(err, tt.want) || ErrorMessage(err) == nil || *ErrorMessage(err) != tt.msg {
			t.Errorf("%s: got %v, want %v %q", tt.name, err, tt.want, tt.msg)
		}
	}
	if got := part(t, n, "t", 0); got.PartitionEpoch != 0 || got.Reassigning() {
		t.Fatalf("failed requests changed the partition: %+v", got)
	}
	// The same size is allowed without an RF change; during a move the
	// size compared is the target's.
	if err := reassign(t, c, "one", 0, []int32{2}, false); err != nil {
		t.Fatal(err)
	}
	if err := reassign(t, c, "one", 0, []int32{2, 1}, false); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("union as target with allowRF false: %v", err)
	}
	if err := reassign(t, c, "one", 0, []int32{3}, false); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "retargeted", part(t, n, "one", 0), []int32{3, 1, 2}, []int32{1}, []int32{3}, []int32{1, 2}, 1, 0, 2)

	// One request, partitions that succeed and fail on their own; the
	// successful ones commit together, and a partition named twice sees
	// its first change (here: reassigned, then cancelled).
	res, err := c.AlterPartitionReassignments(ctxT(t), []ReassignTopic{
		{Topic: "t", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{1, 2}}, {Partition: 5, Replicas: []int32{1}}}},
		{Topic: "one", Partitions: []ReassignPartition{{Partition: 0, Replicas: nil}}},
		{Topic: "nope", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{1}}}},
		{Topic: "one", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 0, Replicas: nil}}},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	codes := [][]int16{}
	for _, tr := range res {
		var cs []int16
		for _, pr := range tr.Partitions {
			cs = append(cs, ErrorCode(pr.Err))
		}
		codes = append(codes, cs)
	}
	wantCodes := [][]int16{{0, kerr.UnknownTopicOrPartition.Code}, {0}, {kerr.UnknownTopicOrPartition.Code}, {0, 0}}
	if !reflect.DeepEqual(codes, wantCodes) {
		t.Fatalf("codes %v, want %v", codes, wantCodes)
	}
	wantPartition(t, "shrunk in batch", part(t, n, "t", 0), []int32{1, 2}, []int32{1, 2}, nil, nil, 1, 1, 1)
	// one-0 was cancelled (back to {1,2}: the replicas without the one
	// being added, as Kafka reverts), moved to {2,3}, cancelled again.
	if got := part(t, n, "one", 0); !slices.Equal(got.Replicas, []int32{2, 1}) || got.Reassigning() {
		t.Fatalf("one-0 after the batch: %+v", got)
	}

	// On a node that is not the active controller the whole call fails.
	n.Close()
	if _, err := c.AlterPartitionReassignments(ctxT(t), []ReassignTopic{{Topic: "t"}}, true); !errors.Is(err, kerr.NotController) {
		t.Fatalf("closed controller: %v", err)
	}
	if _, err := c.ListPartitionReassignments(ctxT(t), nil); !errors.Is(err, kerr.NotController) {
		t.Fatalf("closed controller list: %v", err)
	}
}

// A leader being removed that is fenced mid-reassignment hands its
// leadership to a remaining replica; the new leader's AlterPartition then
// completes the reassignment.
func TestReassignSurvivesFencing(t *testing.T) {
	n, c, clk, epochs := livenessController(t, 3)
	id := createAssigned(t, c, "u", map[int32][]int32{0: {3, 1}}, nil)
	if err := reassign(t, c, "u", 0, []int32{1, 2}, true); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "grown", part(t, n, "u", 0), []int32{1, 2, 3}, []int32{3, 1}, []int32{2}, []int32{3}, 3, 0, 1)
	fence(t, n, c, clk, epochs, 3)
	// 2 has not joined: still in progress, with 1 leading.
	wantPartition(t, "after fencing", part(t, n, "u", 0), []int32{1, 2, 3}, []int32{1}, []int32{2}, []int32{3}, 1, 1, 2)
	p, err := c.AlterPartition(ctxT(t), id, 0, 1, 2, isrOf(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "completed", p, []int32{1, 2}, []int32{1, 2}, nil, nil, 1, 2, 3)
}

// A reassignment survives the snapshot of the image.
func TestReassignSnapshot(t *testing.T) {
	n, c, _, _ := livenessController(t, 3)
	createAssigned(t, c, "t", map[int32][]int32{0: {1, 2}}, nil)
	if err := reassign(t, c, "t", 0, []int32{2, 3}, true); err != nil {
		t.Fatal(err)
	}
	img := n.Image()
	back, err := image.DecodeImage(image.EncodeImage(img))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Records(), img.Records()) {
		t.Fatal("snapshot lost the reassignment")
	}
	got, _ := back.Topic("t")
	wantPartition(t, "from snapshot", got.Partitions[0], []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1}, 1, 0, 1)
}

// A reassignment's nil replicas (a cancel) stay apart from empty ones on
// the wire, and the answers keep their per-partition errors.
func TestReassignRPCCodec(t *testing.T) {
	codec := alterReassignmentsRPC.body()
	req := alterReassignmentsReq{Topics: []ReassignTopic{{Topic: "a", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{1, 2}}, {Partition: 1}, {Partition: 2, Replicas: []int32{}}}}}}
	got, err := codec.decodeReq(codec.encodeReq(req))
	if err != nil || got.AllowRFChange || !reflect.DeepEqual(got, req) || got.Topics[0].Partitions[1].Replicas != nil || got.Topics[0].Partitions[2].Replicas == nil {
		t.Fatalf("request: %#v %v", got, err)
	}
	resp := errResult[[]ReassignTopicResult]{Value: []ReassignTopicResult{{Topic: "a", Partitions: []ReassignPartitionResult{{Partition: 0}, {Partition: 1, Err: apiError(kerr.NoReassignmentInProgress, "none")}}}}}
	gotResp, err := codec.decodeResp(codec.encodeResp(resp))
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Fatalf("response: %#v %v", gotResp, err)
	}
	refused, err := codec.decodeResp(codec.encodeResp(errResult[[]ReassignTopicResult]{Err: notController()}))
	if err != nil || !errors.Is(refused.Err, kerr.NotController) || refused.Value != nil {
		t.Fatalf("call error: %+v %v", refused, err)
	}
	list := listReassignmentsRPC.body()
	for _, topics := range [][]TopicPartitions{nil, {}, {{Topic: "a", Partitions: []int32{0, 3}}}} {
		got, err := list.decodeReq(list.encodeReq(topics))
		if err != nil || !reflect.DeepEqual(got, topics) {
			t.Fatalf("list request %#v: %#v %v", topics, got, err)
		}
	}
}
