package raftmeta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Reassignments asked of any node reach the active controller.
func TestTCPClusterReassignForwarded(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	c.waitLeader()
	f := c.follower()
	for id := int32(1); id <= 3; id++ {
		if _, err := f.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: id, IncarnationID: image.NewUUID()}); err != nil {
			t.Fatal(err)
		}
	}
	res := f.client.CreateTopics(ctxT(t), []controller.CreateTopic{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 2}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := reassign(t, f.client, "t", 0, []int32{2, 3}, true); err != nil {
		t.Fatal(err)
	}
	want := []controller.OngoingTopicReassignments{{Topic: "t", Partitions: []controller.OngoingReassignment{
		{Partition: 0, Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}}}}}
	if got := listAll(t, f.client); !reflect.DeepEqual(got, want) {
		t.Fatalf("forwarded list: %+v", got)
	}
	if err := reassign(t, f.client, "t", 0, []int32{1}, false); !errors.Is(err, kerr.InvalidReplicationFactor) ||
		*controller.ErrorMessage(err) != "The replication factor is changed from 2 to 1" {
		t.Fatalf("forwarded error: %v", err)
	}
	if _, err := f.node.Controller().ListPartitionReassignments(ctxT(t), nil); !errors.Is(err, kerr.NotController) {
		t.Fatalf("a follower's own controller: %v", err)
	}
	// A follower's AlterPartition completes it through the same path.
	p, err := f.client.AlterPartition(ctxT(t), res[0].ID, 0, 0, 1, isrOf(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "forwarded completion", p, []int32{2, 3}, []int32{2, 3}, nil, nil, 2, 1, 2)
	c.waitConverged()
	if got := listAll(t, f.client); len(got) != 0 {
		t.Fatalf("listed after completion: %+v", got)
	}
}
