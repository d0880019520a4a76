package controller

import (
	"errors"
	"reflect"
	"slices"
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

// callRoundTrip checks that a request and an answer of r come back equal
// through r's codec.
func callRoundTrip[Req, Resp any](t *testing.T, name string, r *rpc[Req, Resp], req Req, resp Resp) {
	t.Helper()
	gotReq, err := r.body().decodeReq(r.body().encodeReq(req))
	if err != nil || !reflect.DeepEqual(gotReq, req) {
		t.Errorf("%s request:\n got %#v %v\nwant %#v", name, gotReq, err, req)
	}
	gotResp, err := r.body().decodeResp(r.body().encodeResp(resp))
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Errorf("%s answer:\n got %#v %v\nwant %#v", name, gotResp, err, resp)
	}
}

// Every request and answer of the table survives the codec, nil and empty
// slices and maps apart, errors with their code and message.
func TestRPCCodecRoundTrip(t *testing.T) {
	rack := "r1"
	errIn := apiError(kerr.TopicAlreadyExists, "Topic 'x' already exists.")
	callRoundTrip(t, "create topics", createTopicsRPC, createTopicsReq{Topics: []CreateTopic{
		{Name: "a", NumPartitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v", "e": ""}},
		{Name: "b", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 2}, 1: {2, 1}}},
	}, ValidateOnly: true},
		[]CreateTopicResult{{Name: "a", ID: [16]byte{1}, NumPartitions: 3, ReplicationFactor: 2}, {Name: "x", Err: errIn}, {Name: "y", Err: &Error{Code: kerr.NotController}}})
	callRoundTrip(t, "delete topics", deleteTopicsRPC, deleteTopicsReq{Names: []string{"a", ""}, IDs: [][16]byte{{1}, {}}},
		[]DeleteTopicResult{{Name: "a", ID: [16]byte{3}}, {Name: "b", Err: errIn}, {ID: [16]byte{4}, Err: errIn}})
	callRoundTrip(t, "create partitions", createPartitionsRPC,
		createPartitionsReq{Topics: []CreatePartitions{{Topic: "a", Count: 4}, {Topic: "b", Count: 2, Assignments: [][]int32{{1}, {2}}}, {Topic: "c", Count: 3, Assignments: [][]int32{}}}},
		[]CreatePartitionsResult{{Topic: "a"}, {Topic: "b", Err: errIn}})
	callRoundTrip(t, "alter configs", alterConfigsRPC, alterConfigsReq{ResourceType: image.ResourceTopic, Name: "a", Set: map[string]*string{"x": strp("1"), "y": nil, "z": strp("")}, ValidateOnly: true},
		errResult[struct{}]{Err: errIn})
	callRoundTrip(t, "register broker", registerBrokerRPC, image.RegisterBrokerRecord{BrokerID: 4, IncarnationID: [16]byte{4}, Listeners: []image.Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}, Rack: &rack},
		errResult[int64]{Value: 1 << 40})
	callRoundTrip(t, "producer ids", allocateProducerIDsRPC, 7, errResult[producerIDs]{Value: producerIDs{First: 1000, Count: 1000}})
	callRoundTrip(t, "alter partition", alterPartitionRPC,
		alterPartitionReq{TopicID: [16]byte{2}, Partition: 1, LeaderEpoch: 3, PartitionEpoch: 4, NewISR: []ISRMember{{ID: 1, BrokerEpoch: 12}, {ID: 2, BrokerEpoch: -1}}},
		errResult[image.PartitionImage]{Value: image.PartitionImage{Partition: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{}, Leader: -1, AddingReplicas: []int32{3}}})
	callRoundTrip(t, "elect leaders", electLeadersRPC, electLeadersReq{Type: ElectUnclean, Topics: []TopicPartitions{{Topic: "a", Partitions: []int32{0, 1}}}},
		errResult[[]ElectLeadersTopicResult]{Value: []ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 0}, {Partition: 1, Err: &Error{Code: kerr.ElectionNotNeeded}}}}}})
	callRoundTrip(t, "elect all leaders", electLeadersRPC, electLeadersReq{Type: ElectPreferred}, errResult[[]ElectLeadersTopicResult]{Err: errIn})
	callRoundTrip(t, "reassign", alterReassignmentsRPC,
		alterReassignmentsReq{Topics: []ReassignTopic{{Topic: "a", Partitions: []ReassignPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 1}}}}, AllowRFChange: true},
		errResult[[]ReassignTopicResult]{Value: []ReassignTopicResult{{Topic: "a", Partitions: []ReassignPartitionResult{{Partition: 0}, {Partition: 1, Err: errIn}}}}})
	callRoundTrip(t, "list reassignments", listReassignmentsRPC, []TopicPartitions{{Topic: "a", Partitions: []int32{0, 3}}},
		errResult[[]OngoingTopicReassignments]{Value: []OngoingTopicReassignments{{Topic: "a", Partitions: []OngoingReassignment{{Partition: 0, Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}}}}}})
	callRoundTrip(t, "list all reassignments", listReassignmentsRPC, nil, errResult[[]OngoingTopicReassignments]{Value: []OngoingTopicReassignments{}})
	callRoundTrip(t, "list refused", listReassignmentsRPC, []TopicPartitions{}, errResult[[]OngoingTopicReassignments]{Err: errIn})
	callRoundTrip(t, "heartbeat", brokerHeartbeatRPC,
		BrokerHeartbeat{BrokerID: 1, BrokerEpoch: 9, CurrentMetadataOffset: 12, WantShutdown: true, OfflinePartitions: []TopicIDPartition{{TopicID: [16]byte{9}, Partition: 3}}},
		errResult[BrokerHeartbeatResult]{Value: BrokerHeartbeatResult{IsCaughtUp: true, ShouldShutdown: true}})
	callRoundTrip(t, "quorum", describeQuorumRPC, struct{}{},
		errResult[raftnode.QuorumInfo]{Value: raftnode.QuorumInfo{LeaderID: 2, LeaderEpoch: 5, HighWatermark: 40, Voters: []raftnode.ReplicaInfo{{ID: 1, LogEndOffset: 40, LastFetchTimestamp: 7, LastCaughtUpTimestamp: -1}}}})
	callRoundTrip(t, "quorum refused", describeQuorumRPC, struct{}{}, errResult[raftnode.QuorumInfo]{Err: &Error{Code: kerr.NotController, Message: "this node is not the active controller"}})
	// The shape codec keeps nil and empty apart.
	roundTrip(t, "nil and empty", createTopicsReq{Topics: []CreateTopic{{Assignments: map[int32][]int32{}, Configs: nil}}})

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

// decoders decodes every request and answer of the table, for the fuzz
// target.
var decoders = slices.Concat(
	decodes(createTopicsRPC), decodes(deleteTopicsRPC), decodes(createPartitionsRPC), decodes(alterConfigsRPC),
	decodes(registerBrokerRPC), decodes(allocateProducerIDsRPC), decodes(alterPartitionRPC), decodes(electLeadersRPC),
	decodes(alterReassignmentsRPC), decodes(listReassignmentsRPC), decodes(brokerHeartbeatRPC), decodes(describeQuorumRPC),
	decodes(alterUserScramCredentialsRPC), decodes(alterClientQuotasRPC),
	decodes(createACLsRPC), decodes(deleteACLsRPC),
)

func decodes[Req, Resp any](r *rpc[Req, Resp]) []func([]byte) error {
	return []func([]byte) error{
		func(b []byte) error { _, err := r.body().decodeReq(b); return err },
		func(b []byte) error { _, err := r.body().decodeResp(b); return err },
	}
}

// FuzzRPCDecode feeds arbitrary bytes to every decoder: each must return
// an error or a value, never panic or allocate without bound.
func FuzzRPCDecode(f *testing.F) {
	f.Add(createTopicsRPC.body().encodeReq(createTopicsReq{Topics: []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1, Assignments: map[int32][]int32{0: {1}}}}}))
	f.Add(encodeValue(errResult[[]ElectLeadersTopicResult]{Value: []ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 1}}}}}))
	f.Add(describeQuorumRPC.body().encodeResp(errResult[raftnode.QuorumInfo]{Value: raftnode.QuorumInfo{Voters: []raftnode.ReplicaInfo{{ID: 1}}}}))
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
	callErr, body, leader := callRaw(t, peer, apiCreateTopics, createTopicsRPC.body().encodeReq(createTopicsReq{Topics: []CreateTopic{{Name: "x", NumPartitions: 2, ReplicationFactor: 1}}}))
	if callErr != nil || leader != 1 {
		t.Fatalf("rpc: %v, leader %d", callErr, leader)
	}
	res, err := createTopicsRPC.body().decodeResp(body)
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
			callErr, body, _ := callRaw(t, peer, apiDescribeQuorum, describeQuorumRPC.body().encodeReq(struct{}{}))
			q, err := describeQuorumRPC.body().decodeResp(body)
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
