package controller

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// isrOf is an ISR whose members' broker epochs are unknown (-1), which the
// controller does not check.
func isrOf(ids ...int32) []ISRMember {
	out := make([]ISRMember, 0, len(ids))
	for _, id := range ids {
		out = append(out, ISRMember{ID: id, BrokerEpoch: -1})
	}
	return out
}

// withEpochs is an ISR whose members carry the given registration epochs.
func withEpochs(epochs map[int32]int64, ids ...int32) []ISRMember {
	out := make([]ISRMember, 0, len(ids))
	for _, id := range ids {
		out = append(out, ISRMember{ID: id, BrokerEpoch: epochs[id]})
	}
	return out
}

// KIP-903: a replica named at a broker epoch that is not its registered
// one (its fetches came from an earlier incarnation) is refused, whether
// it joins or already was a member; -1 skips the check; the registered
// epoch passes. A new incarnation's epoch passes once registered, and the
// old one no longer does.
func TestAlterPartitionBrokerEpochs(t *testing.T) {
	n, c, _, epochs := livenessController(t, 3)
	id := createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	p := part(t, n, "t", 0)
	if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, withEpochs(epochs, 1, 2)); err != nil {
		t.Fatalf("shrink at the registered epochs: %v", err)
	}
	p = part(t, n, "t", 0)
	if !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("ISR after shrink: %v", p.ISR)
	}

	stale := map[int32]int64{1: epochs[1], 2: epochs[2], 3: epochs[3] - 1}
	_, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, withEpochs(stale, 1, 2, 3))
	if !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("joining at a stale broker epoch: %v", err)
	}
	if msg := ErrorMessage(err); msg == nil || !strings.Contains(*msg, "broker epoch") {
		t.Fatalf("message of the refusal: %v", msg)
	}
	// A member already in the ISR is checked too, the leader included.
	staleLeader := map[int32]int64{1: epochs[1] + 7, 2: epochs[2], 3: epochs[3]}
	if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, withEpochs(staleLeader, 1, 2, 3)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("leader at a wrong broker epoch: %v", err)
	}
	if got := part(t, n, "t", 0); !slices.Equal(got.ISR, []int32{1, 2}) || got.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("refused changes moved the partition: %+v", got)
	}

	// -1 is not checked.
	mixed := []ISRMember{{ID: 1, BrokerEpoch: epochs[1]}, {ID: 2, BrokerEpoch: -1}, {ID: 3, BrokerEpoch: -1}}
	q, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, mixed)
	if err != nil || !slices.Equal(q.ISR, []int32{1, 2, 3}) || q.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("expand with unknown epochs: %+v %v", q, err)
	}

	// Broker 3 restarts: its new registration takes it out of the ISR.
	// Its previous epoch can no longer bring it back; its new one can,
	// once it is unfenced.
	newEpoch, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 3, IncarnationID: [16]byte{15: 33}})
	if err != nil {
		t.Fatal(err)
	}
	if newEpoch <= epochs[3] {
		t.Fatalf("new incarnation's epoch %d not above %d", newEpoch, epochs[3])
	}
	heartbeat(t, n, 3, newEpoch)
	p = part(t, n, "t", 0)
	if !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("ISR after broker 3 re-registered: %v", p.ISR)
	}
	if b, _ := n.Image().Broker(3); b.Fenced || b.Epoch != newEpoch {
		t.Fatalf("broker 3 after its heartbeat: %+v", b)
	}
	if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, withEpochs(epochs, 1, 2, 3)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("previous incarnation's epoch: %v", err)
	}
	epochs[3] = newEpoch
	q, err = c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, withEpochs(epochs, 1, 2, 3))
	if err != nil || !slices.Equal(q.ISR, []int32{1, 2, 3}) {
		t.Fatalf("expand at the new incarnation's epoch: %+v %v", q, err)
	}
	if got := part(t, n, "t", 0); !slices.Equal(got.ISR, []int32{1, 2, 3}) {
		t.Fatalf("image after expand: %+v", got)
	}
}

// The request carries the members' epochs through the rpc codec; a
// truncated one is refused.
func TestAlterPartitionReqCodec(t *testing.T) {
	in := alterPartitionReq{TopicID: [16]byte{7}, Partition: 2, LeaderEpoch: 5, PartitionEpoch: 9,
		NewISR: []ISRMember{{ID: 1, BrokerEpoch: 40}, {ID: 3, BrokerEpoch: -1}, {ID: 4, BrokerEpoch: 1 << 40}}}
	b := encodeValue(in)
	got, err := decodeValue[alterPartitionReq](b)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip: %#v %v", got, err)
	}
	if _, err := decodeValue[alterPartitionReq](b[:len(b)-1]); err == nil {
		t.Fatal("a truncated request decoded")
	}
}
