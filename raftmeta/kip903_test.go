package raftmeta

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// withEpochs is an ISR whose members carry the given registration epochs.
func withEpochs(epochs map[int32]int64, ids ...int32) []controller.ISRMember {
	out := make([]controller.ISRMember, 0, len(ids))
	for _, id := range ids {
		out = append(out, controller.ISRMember{ID: id, BrokerEpoch: epochs[id]})
	}
	return out
}

// The forwarded path carries the epochs: a stale one is refused with
// INELIGIBLE_REPLICA from the active controller, the registered one passes.
func TestTCPClusterAlterPartitionBrokerEpochs(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	c.waitLeader()
	f := c.follower()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		e, err := f.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: id, IncarnationID: image.NewUUID()})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	res := f.client.CreateTopics(ctxT(t), []controller.CreateTopic{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 2, 3}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	p, err := f.client.AlterPartition(ctxT(t), res[0].ID, 0, 0, 0, withEpochs(epochs, 1, 2))
	if err != nil || !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("forwarded shrink: %+v %v", p, err)
	}
	stale := map[int32]int64{1: epochs[1], 2: epochs[2], 3: epochs[3] + 100}
	if _, err := f.client.AlterPartition(ctxT(t), res[0].ID, 0, 0, p.PartitionEpoch, withEpochs(stale, 1, 2, 3)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("forwarded stale epoch: %v", err)
	}
	p, err = f.client.AlterPartition(ctxT(t), res[0].ID, 0, 0, p.PartitionEpoch, withEpochs(epochs, 1, 2, 3))
	if err != nil || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("forwarded expand: %+v %v", p, err)
	}
}
