package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// AlterPartitionReassignments and ListPartitionReassignments on a single
// node, over a real socket: the versions advertised, and the answers that
// need no second broker (the moves themselves are in
// integration/cluster_reassign_test.go).
func TestPartitionReassignmentHandlers(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "ra", 2, nil)
	cl := ts.client(t)
	ctx := testContext(t)

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{45: {0, 1}, 46: {0, 0}}
	for _, k := range av.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("key %d: versions %d-%d, want %d-%d", k.ApiKey, k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not advertised: %v", want)
	}

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{1}) // already so: nothing to do
	req.Assign("ra", 1, []int32{1, 2})
	req.CancelAssign("ra", 0)
	req.Assign("ra-missing", 0, []int32{1})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// A map request: partition 0 is named once, as a cancel.
	wantErr := map[string]error{
		"ra-0":         kerr.NoReassignmentInProgress,
		"ra-1":         kerr.InvalidReplicaAssignment,
		"ra-missing-0": kerr.UnknownTopicOrPartition,
	}
	for _, r := range res.Sorted() {
		key := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		if !errors.Is(r.Err, wantErr[key]) || r.ErrMessage == "" {
			t.Errorf("%s: %v %q, want %v", key, r.Err, r.ErrMessage, wantErr[key])
		}
		delete(wantErr, key)
	}
	if len(wantErr) != 0 {
		t.Fatalf("no answer for %v", wantErr)
	}

	// v1 echoes AllowReplicationFactorChange; a target of the same size
	// passes, an empty one is refused before its size is compared.
	raw := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	raw.AllowReplicationFactorChange = false
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "ra"
	for p, replicas := range [][]int32{{1}, {}} {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = int32(p), replicas
		rt.Partitions = append(rt.Partitions, rp)
	}
	raw.Topics = append(raw.Topics, rt)
	resp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 1 || resp.AllowReplicationFactorChange || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		t.Fatalf("v1 answer %+v", resp)
	}
	if ps := resp.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.InvalidReplicaAssignment.Code ||
		ps[1].ErrorMessage == nil || *ps[1].ErrorMessage != "The manual partition assignment includes an empty replica list." {
		t.Fatalf("v1 partitions %+v", resp.Topics[0].Partitions)
	}

	// Nothing is in progress: listing everything or the named partitions
	// answers no topics.
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil || lresp.ErrorCode != 0 || len(lresp.Topics) != 0 {
		t.Fatalf("list all: %+v %v", lresp, err)
	}
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}, 1: {}}, "ra-missing": {0: {}}})
	if err != nil || len(listed.Sorted()) != 0 {
		t.Fatalf("list named: %+v %v", listed, err)
	}
}

// A leader tracks a replica that a reassignment adds without a new leader
// epoch, and while that replica's joining the ISR is in flight the high
// watermark waits for it (Kafka's maximal ISR): the controller may make
// it the leader as soon as it joins.
func TestLeaderTracksAddedReplicaAndPendingISR(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "hw", 1, nil)
	ctx := testContext(t)
	cl := ts.client(t, kgo.DefaultProduceTopic("hw"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	p := ts.parts.get("hw", 0)
	if p == nil || p.HighWatermark() != 10 {
		t.Fatalf("partition %v", p)
	}
	a := p.Assign.Load()
	if err := ts.followerFetched(p, 2, -1, 0); err == nil {
		t.Fatal("a fetch from a broker that is not a replica was accepted")
	}
	// The reassignment's first record: replica 2 added, same leader epoch.
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1,
		LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch + 1, AddingReplicas: []int32{2}})
	if err := ts.followerFetched(p, 2, -1, 10); err != nil {
		t.Fatalf("fetch from the added replica: %v", err)
	}
	// An older image does not undo the newer assignment.
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1,
		LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch})
	if got := p.Assign.Load(); !slices.Equal(got.Replicas, []int32{1, 2}) {
		t.Fatalf("stale image applied: %+v", got)
	}

	p.Mu.Lock()
	p.Followers[2].Joining = true // its AlterPartition is in flight
	p.Mu.Unlock()
	produce(5)
	if hw, leo := p.HighWatermark(), p.Log.LogEndOffset(); hw != 10 || leo != 15 {
		t.Fatalf("with replica 2 joining at 10: high watermark %d, log end %d", hw, leo)
	}
	if err := ts.followerFetched(p, 2, -1, 15); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 15 {
		t.Fatalf("high watermark %d after replica 2 reached 15", hw)
	}
	// A newer partition epoch settles the change: replica 2 no longer
	// holds the high watermark back.
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1,
		LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch + 2, AddingReplicas: []int32{2}})
	produce(5)
	if hw := p.HighWatermark(); hw != 20 {
		t.Fatalf("high watermark %d after the change was settled, want 20", hw)
	}
}
