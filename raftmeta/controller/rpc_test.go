package controller

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

func roundTrip[T any](t *testing.T, name string, in T) {
	t.Helper()
	got, err := decodeValue[T](encodeValue(in))
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Errorf("%s:\n got %#v %v\nwant %#v", name, got, err, in)
	}
}

// Every request and answer of the table survives the codec, nil and empty
// slices and maps apart, errors with their code and message.
func TestRPCCodecRoundTrip(t *testing.T) {
	rack := "r1"
	errIn := apiError(kerr.TopicAlreadyExists, "Topic 'x' already exists.")
	roundTrip(t, "create topics", createTopicsReq{Topics: []CreateTopic{
		{Name: "a", NumPartitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v"}},
		{Name: "b", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 2}, 1: {2, 1}}, Configs: map[string]string{}},
	}, ValidateOnly: true})
	roundTrip(t, "create topics answer", []CreateTopicResult{{Name: "a", ID: [16]byte{1}, NumPartitions: 3, ReplicationFactor: 2}, {Name: "x", Err: errIn}})
	roundTrip(t, "delete topics", deleteTopicsReq{Names: []string{"a", ""}, IDs: [][16]byte{{1}, {2}}})
	roundTrip(t, "delete topics answer", []DeleteTopicResult{{Name: "a", ID: [16]byte{3}}, {Name: "b", Err: errIn}})
	roundTrip(t, "create partitions", createPartitionsReq{Topics: []CreatePartitions{{Topic: "a", Count: 4}, {Topic: "b", Count: 2, Assignments: [][]int32{{1}, {2}}}}})
	roundTrip(t, "alter configs", alterConfigsReq{ResourceType: image.ResourceTopic, Name: "a", Set: map[string]*string{"x": strp("1"), "y": nil}, ValidateOnly: true})
	roundTrip(t, "register broker", image.RegisterBrokerRecord{BrokerID: 4, IncarnationID: [16]byte{4}, Listeners: []image.Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}, Rack: &rack})
	roundTrip(t, "epoch answer", errResult[int64]{Value: 1 << 40})
	roundTrip(t, "producer ids answer", errResult[producerIDs]{Value: producerIDs{First: 1000, Count: 1000}})
	roundTrip(t, "alter partition", alterPartitionReq{TopicID: [16]byte{2}, Partition: 1, LeaderEpoch: 3, PartitionEpoch: 4, NewISR: []ISRMember{{ID: 1, BrokerEpoch: 12}, {ID: 2, BrokerEpoch: -1}}})
	roundTrip(t, "alter partition answer", errResult[image.PartitionImage]{Value: image.PartitionImage{Partition: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{}, Leader: -1, AddingReplicas: []int32{3}}})
	roundTrip(t, "elect leaders", electLeadersReq{Type: ElectUnclean, Topics: []TopicPartitions{{Topic: "a", Partitions: []int32{0, 1}}}})
	roundTrip(t, "elect all leaders", electLeadersReq{Type: ElectPreferred})
	roundTrip(t, "elect leaders answer", errResult[[]ElectLeadersTopicResult]{Value: []ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 0}, {Partition: 1, Err: &Error{Code: kerr.ElectionNotNeeded}}}}}})
	roundTrip(t, "elect leaders refused", errResult[[]ElectLeadersTopicResult]{Err: errIn})
	roundTrip(t, "reassign", alterReassignmentsReq{Topics: []ReassignTopic{{Topic: "a", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 1}}}}, AllowRFChange: true})
	roundTrip(t, "list reassignments", []TopicPartitions{{Topic: "a", Partitions: []int32{}}})
	roundTrip(t, "list reassignments answer", errResult[[]OngoingTopicReassignments]{Value: []OngoingTopicReassignments{{Topic: "a", Partitions: []OngoingReassignment{{Partition: 0, Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}}}}}})
	roundTrip(t, "heartbeat", BrokerHeartbeat{BrokerID: 1, BrokerEpoch: 9, CurrentMetadataOffset: 12, WantShutdown: true, OfflinePartitions: []TopicIDPartition{{TopicID: [16]byte{9}, Partition: 3}}})
	roundTrip(t, "heartbeat answer", errResult[BrokerHeartbeatResult]{Value: BrokerHeartbeatResult{IsCaughtUp: true, ShouldShutdown: true}})
	roundTrip(t, "quorum", errResult[raftnode.QuorumInfo]{Value: raftnode.QuorumInfo{LeaderID: 2, LeaderEpoch: 5, HighWatermark: 40, Voters: []raftnode.ReplicaInfo{{ID: 1, LogEndOffset: 40, LastFetchTimestamp: 7, LastCaughtUpTimestamp: -1}}}})

	// An error comes back with its code and message, one without a Kafka
	// code as UNKNOWN_SERVER_ERROR with its text.
	got, err := decodeValue[error](encodeValue[error](errIn))
	if err != nil || !errors.Is(got, kerr.TopicAlreadyExists) || *ErrorMessage(got) != errIn.Message {
		t.Fatalf("error round trip: %v %v", got, err)
	}
	other, _ := decodeValue[error](encodeValue[error](errors.New("disk on fire")))
	if !errors.Is(other, kerr.UnknownServerError) || *ErrorMessage(other) != "disk on fire" {
		t.Fatalf("plain error round trip: %v", other)
	}
	bare, _ := decodeValue[error](encodeValue[error](kerr.NotController))
	if !errors.Is(bare, kerr.NotController) || ErrorMessage(bare) != nil {
		t.Fatalf("bare code round trip: %v", bare)
	}
}

// The table gives every call its own number, none the node's own.
func TestRPCTable(t *testing.T) {
	seen := map[byte]bool{raftnode.APIAddLearner: true}
	for _, r := range rpcs {
		if seen[r.number()] {
			t.Fatalf("rpc number %d used twice", r.number())
		}
		seen[r.number()] = true
	}
	if hs := Handlers(func() *Controller { return nil }); len(hs) != len(rpcs) {
		t.Fatalf("%d handlers for %d rpcs", len(hs), len(rpcs))
	}
}

// decoders decodes every request and answer type of the table, for the
// fuzz target.
var decoders = []func([]byte) error{
	decodes[createTopicsReq], decodes[[]CreateTopicResult],
	decodes[deleteTopicsReq], decodes[[]DeleteTopicResult],
	decodes[createPartitionsReq], decodes[[]CreatePartitionsResult],
	decodes[alterConfigsReq], decodes[errResult[struct{}]],
	decodes[image.RegisterBrokerRecord], decodes[errResult[int64]],
	decodes[int32], decodes[errResult[producerIDs]],
	decodes[alterPartitionReq], decodes[errResult[image.PartitionImage]],
	decodes[electLeadersReq], decodes[errResult[[]ElectLeadersTopicResult]],
	decodes[alterReassignmentsReq], decodes[errResult[[]ReassignTopicResult]],
	decodes[[]TopicPartitions], decodes[errResult[[]OngoingTopicReassignments]],
	decodes[BrokerHeartbeat], decodes[errResult[BrokerHeartbeatResult]],
	decodes[struct{}], decodes[errResult[raftnode.QuorumInfo]],
}

func decodes[T any](b []byte) error { _, err := decodeValue[T](b); return err }

// FuzzRPCDecode feeds arbitrary bytes to every decoder: each must return
// an error or a value, never panic or allocate without bound.
func FuzzRPCDecode(f *testing.F) {
	f.Add(encodeValue(createTopicsReq{Topics: []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1, Assignments: map[int32][]int32{0: {1}}}}}))
	f.Add(encodeValue(errResult[[]ElectLeadersTopicResult]{Value: []ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 1}}}}}))
	f.Add(encodeValue(errResult[raftnode.QuorumInfo]{Value: raftnode.QuorumInfo{Voters: []raftnode.ReplicaInfo{{ID: 1}}}}))
	f.Add(encodeValue(alterPartitionReq{TopicID: [16]byte{1}, NewISR: []ISRMember{{ID: 1, BrokerEpoch: 3}, {ID: 2, BrokerEpoch: -1}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range decoders {
			_ = dec(b)
		}
	})
}

// callRaw sends one call of the table to node 1 over peer and returns the
// call's error and the rest of the answer.
func callRaw(t testing.TB, peer *raftnode.TCPTransport, api byte, req []byte) (error, []byte, uint64) {
	t.Helper()
	body, leader, err := peer.Call(ctxT(t), 1, api, req)
	if err != nil {
		t.Fatalf("rpc %d: %v", api, err)
	}
	d := compact.Decoder{Buf: body}
	callErr := getErr(&d)
	if d.Err != nil {
		t.Fatalf("rpc %d answer: %v", api, d.Err)
	}
	return callErr, d.Buf, leader
}

// The rpc path end to end over loopback: a peer's call reaches the
// controller, and a request the server cannot decode is refused as a
// whole.
func TestRPCOverLoopback(t *testing.T) {
	n, addr := serveOne(t)
	if _, err := n.Controller().RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1}); err != nil {
		t.Fatal(err)
	}
	peer, err := raftnode.NewTCPTransport(raftnode.TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	callErr, body, leader := callRaw(t, peer, apiCreateTopics, encodeValue(createTopicsReq{Topics: []CreateTopic{{Name: "x", NumPartitions: 2, ReplicationFactor: 1}}}))
	if callErr != nil || leader != 1 {
		t.Fatalf("rpc: %v, leader %d", callErr, leader)
	}
	res, err := decodeValue[[]CreateTopicResult](body)
	if err != nil || len(res) != 1 || res[0].Err != nil || res[0].NumPartitions != 2 {
		t.Fatalf("answer %+v %v", res, err)
	}
	if _, ok := n.Image().Topic("x"); !ok {
		t.Fatal("topic not created")
	}
	if callErr, _, _ := callRaw(t, peer, apiCreateTopics, []byte{0xff}); !errors.Is(callErr, kerr.InvalidRequest) {
		t.Fatalf("garbage request: %v", callErr)
	}
	if callErr, _, _ := callRaw(t, peer, 200, nil); !errors.Is(callErr, kerr.InvalidRequest) {
		t.Fatalf("unknown rpc: %v", callErr)
	}
	// Concurrent calls share the connection.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			callErr, body, _ := callRaw(t, peer, apiDescribeQuorum, nil)
			q, err := decodeValue[errResult[raftnode.QuorumInfo]](body)
			if callErr != nil || err != nil || q.Err != nil || q.Value.LeaderID != 1 {
				t.Errorf("describe quorum: %+v %v %v", q, callErr, err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkForwardedHeartbeat measures a broker heartbeat forwarded from
// another node to the active controller over loopback, the most frequent
// controller request.
func BenchmarkForwardedHeartbeat(b *testing.B) {
	n, addr := serveOne(b)
	epoch, err := n.Controller().RegisterBroker(ctxT(b), image.RegisterBrokerRecord{BrokerID: 2})
	if err != nil {
		b.Fatal(err)
	}
	peer, err := raftnode.NewTCPTransport(raftnode.TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer peer.Close()
	req := encodeValue(BrokerHeartbeat{BrokerID: 2, BrokerEpoch: epoch, CurrentMetadataOffset: int64(n.Image().Offset())})
	ctx := ctxT(b)
	b.ReportAllocs()
	for b.Loop() {
		body, _, err := peer.Call(ctx, 1, apiBrokerHeartbeat, req)
		if err != nil {
			b.Fatal(err)
		}
		d := compact.Decoder{Buf: body}
		if callErr := getErr(&d); callErr != nil || d.Err != nil {
			b.Fatal(callErr, d.Err)
		}
		if r, err := decodeValue[errResult[BrokerHeartbeatResult]](d.Buf); err != nil || r.Err != nil {
			b.Fatal(r.Err, err)
		}
	}
}
