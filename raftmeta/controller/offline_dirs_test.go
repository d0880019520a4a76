package controller

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

func offlineHeartbeat(t *testing.T, n *testNode, id int32, epoch int64, offline ...TopicIDPartition) BrokerHeartbeatResult {
	t.Helper()
	res, err := n.Controller().BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: id, BrokerEpoch: epoch,
		CurrentMetadataOffset: int64(n.Image().Offset()), OfflinePartitions: offline})
	if err != nil {
		t.Fatalf("heartbeat of broker %d: %v", id, err)
	}
	return res
}

func wantLeaderISR(t *testing.T, n *testNode, topic string, p int32, leader int32, isr []int32) image.PartitionImage {
	t.Helper()
	got := part(t, n, topic, p)
	if got.Leader != leader || !slices.Equal(got.ISR, isr) {
		t.Fatalf("%s-%d: leader %d ISR %v, want leader %d ISR %v", topic, p, got.Leader, got.ISR, leader, isr)
	}
	return got
}

// TestOfflineLogDirMovesLeadership: a broker's heartbeat names the
// partitions it holds on a failed log dir. The controller takes it out of
// their ISRs and elects other leaders from the ISR (outside it only where
// unclean election is enabled); while the broker keeps reporting them it
// is neither elected (unfencing, preferred and unclean elections, the
// rebalancer) nor let back into their ISRs; its other partitions are left
// alone; and a new registration (a restart) forgets the report.
func TestOfflineLogDirMovesLeadership(t *testing.T) {
	n, c, clk, epochs := livenessController(t, 3)
	did := createAssigned(t, c, "d", map[int32][]int32{0: {1, 2, 3}, 1: {2, 1, 3}, 2: {1, 2, 3}}, nil)
	sid := createAssigned(t, c, "solo", map[int32][]int32{0: {1, 2}}, nil)
	uid := createAssigned(t, c, "uncl", map[int32][]int32{0: {1, 2}}, map[string]string{"unclean.leader.election.enable": "true"})
	for _, id := range [][16]byte{sid, uid} {
		p := part(t, n, map[[16]byte]string{sid: "solo", uid: "uncl"}[id], 0)
		if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, isrOf(1)); err != nil {
			t.Fatal(err)
		}
	}
	d0 := part(t, n, "d", 0)
	offline := []TopicIDPartition{{did, 0}, {did, 1}, {sid, 0}, {uid, 0}, {[16]byte{9}, 0}, {did, 7}}

	offlineHeartbeat(t, n, 1, epochs[1], offline...)
	if p := wantLeaderISR(t, n, "d", 0, 2, []int32{2, 3}); p.LeaderEpoch != d0.LeaderEpoch+1 {
		t.Fatalf("d-0 leader epoch %d, want %d", p.LeaderEpoch, d0.LeaderEpoch+1)
	}
	wantLeaderISR(t, n, "d", 1, 2, []int32{2, 3})
	wantLeaderISR(t, n, "d", 2, 1, []int32{1, 2, 3}) // on a healthy dir
	wantLeaderISR(t, n, "solo", 0, image.NoLeader, []int32{1})
	wantLeaderISR(t, n, "uncl", 0, 2, []int32{2})
	if b, _ := n.Image().Broker(1); b.Fenced {
		t.Fatal("broker 1 fenced for an offline log dir")
	}

	// The same report again writes nothing.
	off := n.Image().Offset()
	offlineHeartbeat(t, n, 1, epochs[1], offline...)
	if n.Image().Offset() != off {
		t.Fatalf("a repeated report wrote to the metadata log: offset %d → %d", off, n.Image().Offset())
	}

	// The new leader may not add broker 1 back.
	p := part(t, n, "d", 0)
	if _, err := c.AlterPartition(ctxT(t), did, 0, p.LeaderEpoch, p.PartitionEpoch, isrOf(2, 3, 1)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("ISR expansion to a replica on an offline dir: %v, want INELIGIBLE_REPLICA", err)
	}
	// solo-0 keeps broker 1 as the last ISR member, but no election
	// picks it: not a preferred election, not the leaderless elections
	// that unfencing another broker runs, not the rebalancer.
	res, err := c.ElectLeaders(ctxT(t), ElectPreferred, []TopicPartitions{{"solo", []int32{0}}})
	if err != nil || !errors.Is(res[0].Partitions[0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred election of solo-0: %+v %v", res, err)
	}
	if _, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 3, BrokerEpoch: epochs[3], WantFence: true}); err != nil {
		t.Fatal(err)
	}
	offlineHeartbeat(t, n, 3, epochs[3])
	clk.Advance(300 * time.Second)
	offlineHeartbeat(t, n, 1, epochs[1], offline...)
	offlineHeartbeat(t, n, 2, epochs[2])
	offlineHeartbeat(t, n, 3, epochs[3])
	runPeriodic(t, c)
	// (Fencing took 3 out of the ISRs.)
	wantLeaderISR(t, n, "solo", 0, image.NoLeader, []int32{1})
	wantLeaderISR(t, n, "d", 0, 2, []int32{2})
	wantLeaderISR(t, n, "d", 2, 1, []int32{1, 2})

	// Without ISR members to choose from, an unclean election asked for
	// by name goes outside the ISR, to a replica that is not offline.
	res, err = c.ElectLeaders(ctxT(t), ElectUnclean, []TopicPartitions{{"solo", []int32{0}}})
	if err != nil || res[0].Partitions[0].Err != nil {
		t.Fatalf("unclean election of solo-0: %+v %v", res, err)
	}
	wantLeaderISR(t, n, "solo", 0, 2, []int32{2})

	// Broker 1 restarts: its new registration has read its dirs again
	// and reports nothing offline, so the leader may add it back.
	epoch, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: [16]byte{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res := offlineHeartbeat(t, n, 1, epoch); res.IsFenced {
		t.Fatal("broker 1 still fenced after re-registering")
	}
	p = part(t, n, "d", 0)
	if _, err := c.AlterPartition(ctxT(t), did, 0, p.LeaderEpoch, p.PartitionEpoch, isrOf(2, 1)); err != nil {
		t.Fatalf("ISR expansion after the restart: %v", err)
	}
}

// A report from an older registration, or one the broker then withdraws,
// stops counting: the controller keeps only what the current registration
// last said.
func TestOfflineReportBelongsToRegistration(t *testing.T) {
	n, c, _, epochs := livenessController(t, 2)
	sid := createAssigned(t, c, "s", map[int32][]int32{0: {1, 2}}, nil)
	p := part(t, n, "s", 0)
	if _, err := c.AlterPartition(ctxT(t), sid, 0, p.LeaderEpoch, p.PartitionEpoch, isrOf(1)); err != nil {
		t.Fatal(err)
	}
	offlineHeartbeat(t, n, 1, epochs[1], TopicIDPartition{sid, 0})
	wantLeaderISR(t, n, "s", 0, image.NoLeader, []int32{1})
	// Broker 1 re-registers; until its first heartbeat the controller
	// has no report for the new epoch, so unfencing elects it again.
	epoch, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: [16]byte{2}})
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := c.do(ctxT(t), func() { ok = c.replicaOffline(n.Image(), sid, 0, 1) }); err != nil || ok {
		t.Fatalf("report of the old registration still counts: %v %v", ok, err)
	}
	offlineHeartbeat(t, n, 1, epoch)
	wantLeaderISR(t, n, "s", 0, 1, []int32{1})
	// A withdrawn report is forgotten as well.
	offlineHeartbeat(t, n, 2, epochs[2], TopicIDPartition{sid, 0})
	offlineHeartbeat(t, n, 2, epochs[2])
	if err := c.do(ctxT(t), func() { ok = c.replicaOffline(n.Image(), sid, 0, 2) }); err != nil || ok {
		t.Fatalf("withdrawn report still counts: %v %v", ok, err)
	}
}

// The heartbeat's offline partitions travel between nodes; a count larger
// than the bytes left, a short entry and trailing bytes are refused.
func TestHeartbeatOfflineCodec(t *testing.T) {
	hb := BrokerHeartbeat{BrokerID: 3, BrokerEpoch: 77, CurrentMetadataOffset: 80,
		OfflinePartitions: []TopicIDPartition{{[16]byte{1, 2}, 0}, {[16]byte{3}, 1 << 20}}}
	got, err := decodeValue[BrokerHeartbeat](encodeValue(hb))
	if err != nil || !reflect.DeepEqual(got, hb) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	healthy := encodeValue(BrokerHeartbeat{BrokerID: 3, BrokerEpoch: 77, CurrentMetadataOffset: 80, WantFence: true})
	head := healthy[:len(healthy)-1] // without the nil list
	bad := [][]byte{
		append(slices.Clone(head), 0x0a, 1, 2, 3),
		append(append(slices.Clone(head), 0x02), make([]byte, 16)...),
		append(slices.Clone(healthy), 0),
	}
	for i, b := range bad {
		if _, err := decodeValue[BrokerHeartbeat](b); err == nil {
			t.Errorf("bad encoding %d decoded", i)
		}
	}
}
