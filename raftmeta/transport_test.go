package raftmeta

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestHandshakeCodec(t *testing.T) {
	h := hello{kind: connRPC, from: 7, to: 3, clusterID: "abc"}
	if got, err := decodeHello(encodeHello(h)); err != nil || got != h {
		t.Fatalf("hello round trip: %+v %v", got, err)
	}
	w := welcome{status: helloWrongCluster, nodeID: 3, clusterID: "abc", message: "no"}
	if got, err := decodeWelcome(encodeWelcome(w)); err != nil || got != w {
		t.Fatalf("welcome round trip: %+v %v", got, err)
	}
	bad := map[string][]byte{
		"empty":         nil,
		"magic":         []byte("HTTP/1.1 GET"),
		"version":       append([]byte(wireMagic), 9, connRaft, 1, 0, 0),
		"kind":          append([]byte(wireMagic), wireVersion, 9, 1, 0, 0),
		"truncated":     append([]byte(wireMagic), wireVersion, connRaft, 1, 0, 5, 'a'),
		"trailing byte": append(encodeHello(h), 0),
	}
	for name, b := range bad {
		if _, err := decodeHello(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestReadFrameBounds(t *testing.T) {
	var buf []byte
	buf = binary.BigEndian.AppendUint32(buf, 5)
	buf = append(buf, "hello"...)
	r := bufio.NewReader(bytesReader(buf))
	if b, err := readFrame(r, 5); err != nil || string(b) != "hello" {
		t.Fatalf("frame: %q %v", b, err)
	}
	if _, err := readFrame(bufio.NewReader(bytesReader(buf)), 4); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := readFrame(bufio.NewReader(bytesReader(buf[:7])), 5); err == nil {
		t.Fatal("short frame read")
	}
}

type byteReader struct{ b []byte }

func bytesReader(b []byte) *byteReader { return &byteReader{b} }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// serveOne starts a single-voter node of cluster "a" with a TCP
// transport listening on loopback.
func serveOne(t testing.TB) (*Node, *TCPTransport, string) {
	t.Helper()
	tr, err := NewTCPTransport(TransportConfig{NodeID: 1, ClusterID: "a", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, t.TempDir(), func(c *Config) { c.ClusterID = "a"; c.Transport = tr })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Serve(ln)
	}()
	t.Cleanup(func() {
		n.Close()
		tr.Close()
		<-done
	})
	return n, tr, ln.Addr().String()
}

// rawHandshake dials addr and sends h, returning the connection and the
// answer.
func rawHandshake(t testing.TB, addr string, h []byte) (net.Conn, *bufio.Reader, welcome, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	w := bufio.NewWriter(c)
	writeFrame(w, h)
	w.Flush()
	r := bufio.NewReader(c)
	b, err := readFrame(r, maxHandshakeBytes)
	if err != nil {
		return c, r, welcome{}, err
	}
	wel, err := decodeWelcome(b)
	return c, r, wel, err
}

func TestTransportRefusesBadPeers(t *testing.T) {
	_, _, addr := serveOne(t)
	cases := []struct {
		name string
		h    []byte
		want byte
	}{
		{"other cluster", encodeHello(hello{kind: connRaft, from: 2, clusterID: "b"}), helloWrongCluster},
		{"other node", encodeHello(hello{kind: connRaft, from: 2, to: 5, clusterID: "a"}), helloWrongNode},
		{"itself", encodeHello(hello{kind: connRaft, from: 1, clusterID: "a"}), helloBadRequest},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), helloBadRequest},
		{"accepted", encodeHello(hello{kind: connRaft, from: 2, to: 1, clusterID: "a"}), helloOK},
	}
	for _, tc := range cases {
		_, _, w, err := rawHandshake(t, addr, tc.h)
		if err != nil || w.status != tc.want || w.nodeID != 1 {
			t.Errorf("%s: %+v %v, want status %d", tc.name, w, err, tc.want)
		}
	}

	// A transport of another cluster cannot connect.
	other, err := NewTCPTransport(TransportConfig{NodeID: 2, ClusterID: "b", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.dial(t.Context(), addr, connRaft, 1); !errors.Is(err, errWrongCluster) {
		t.Fatalf("dial from another cluster: %v", err)
	}

	// After the handshake, an oversized frame or a message that is not
	// from the peer closes the connection.
	spoofed := mustMarshal(&pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(3)), To: new(uint64(1))})
	local := mustMarshal(&pb.Message{Type: pb.MsgHup.Enum(), From: new(uint64(2)), To: new(uint64(1))})
	for name, frame := range map[string][]byte{"oversized": nil, "spoofed": spoofed, "local": local} {
		c, r, w, err := rawHandshake(t, addr, encodeHello(hello{kind: connRaft, from: 2, clusterID: "a"}))
		if err != nil || w.status != helloOK {
			t.Fatalf("%s: handshake %v %+v", name, err, w)
		}
		if frame == nil {
			c.Write(binary.BigEndian.AppendUint32(nil, defaultMaxFrameBytes+1))
		} else {
			bw := bufio.NewWriter(c)
			writeFrame(bw, frame)
			bw.Flush()
		}
		if _, err := r.ReadByte(); err == nil {
			t.Errorf("%s: connection still open", name)
		}
	}
}

func TestTransportDropsWhenDownOrFull(t *testing.T) {
	tr, err := NewTCPTransport(TransportConfig{NodeID: 1, ClusterID: "a", Logger: discardLogger(), QueueLen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var mu sync.Mutex
	type drop struct {
		to   uint64
		snap bool
	}
	var drops []drop
	tr.onDrop = func(to uint64, snap bool) {
		mu.Lock()
		drops = append(drops, drop{to, snap})
		mu.Unlock()
	}
	msg := func(typ pb.MessageType, to uint64) *pb.Message {
		return &pb.Message{Type: typ.Enum(), From: new(uint64(1)), To: new(to)}
	}
	// No connection to node 9.
	tr.Send([]*pb.Message{msg(pb.MsgApp, 9), msg(pb.MsgSnap, 9)})
	// Node 5 is connected but its writer is stuck: two messages queue,
	// the rest are dropped.
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	p := tr.newPeer(5, "")
	p.send = newWireConn(c1)
	tr.mu.Lock()
	tr.peers[5] = p
	tr.mu.Unlock()
	tr.Send([]*pb.Message{msg(pb.MsgApp, 5), msg(pb.MsgHeartbeat, 5), msg(pb.MsgApp, 5), msg(pb.MsgSnap, 5)})
	want := []drop{{9, false}, {9, true}, {5, false}, {5, true}}
	mu.Lock()
	got := append([]drop(nil), drops...)
	mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("drops %v, want %v", got, want)
	}
	// When the connection ends, what is still queued is dropped too.
	tr.endSend(p, p.send)
	mu.Lock()
	got = append([]drop(nil), drops...)
	mu.Unlock()
	if len(got) != 6 || len(p.queue) != 0 {
		t.Fatalf("after the connection ended: drops %v, queue %d", got, len(p.queue))
	}
}

func TestRPCCodecRoundTrip(t *testing.T) {
	rack := "r1"
	errIn := apiError(kerr.TopicAlreadyExists, "Topic 'x' already exists.")
	roundTrip := []struct {
		name string
		in   any
		enc  func(any) []byte
		dec  func([]byte) (any, error)
	}{
		{"create topics", []CreateTopic{{Name: "a", NumPartitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v"}},
			{Name: "b", NumPartitions: -1, ReplicationFactor: -1, Assignments: map[int32][]int32{0: {1, 2}, 1: {2, 1}}}},
			func(v any) []byte { return encodeCreateTopicsReq(v.([]CreateTopic), true) },
			func(b []byte) (any, error) { v, ok, err := decodeCreateTopicsReq(b); _ = ok; return v, err }},
		{"create topics answer", []CreateTopicResult{{Name: "a", ID: [16]byte{1}, NumPartitions: 3, ReplicationFactor: 2}, {Name: "x", Err: errIn}},
			func(v any) []byte { return encodeCreateTopicsResp(v.([]CreateTopicResult)) },
			func(b []byte) (any, error) { return decodeCreateTopicsResp(b) }},
		{"create partitions", []CreatePartitions{{Topic: "a", Count: 4}, {Topic: "b", Count: 2, Assignments: [][]int32{{1}, {2}}}},
			func(v any) []byte { return encodeCreatePartitionsReq(v.([]CreatePartitions), false) },
			func(b []byte) (any, error) { v, _, err := decodeCreatePartitionsReq(b); return v, err }},
		{"alter configs", alterConfigsReq{resourceType: ResourceTopic, name: "a", set: map[string]*string{"x": strp("1"), "y": nil}, validateOnly: true},
			func(v any) []byte { return encodeAlterConfigsReq(v.(alterConfigsReq)) },
			func(b []byte) (any, error) { return decodeAlterConfigsReq(b) }},
		{"register broker", RegisterBrokerRecord{BrokerID: 4, IncarnationID: [16]byte{4}, Listeners: []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}, Rack: &rack},
			func(v any) []byte { return encodeRegisterBrokerReq(v.(RegisterBrokerRecord)) },
			func(b []byte) (any, error) { return decodeRegisterBrokerReq(b) }},
		{"alter partition", alterPartitionReq{topicID: [16]byte{2}, partition: 1, leaderEpoch: 3, partitionEpoch: 4, newISR: []ISRMember{{ID: 1, BrokerEpoch: 12}, {ID: 2, BrokerEpoch: -1}}},
			func(v any) []byte { return encodeAlterPartitionReq(v.(alterPartitionReq)) },
			func(b []byte) (any, error) { return decodeAlterPartitionReq(b) }},
		{"elect leaders", []TopicPartitions{{Topic: "a", Partitions: []int32{0, 1}}},
			func(v any) []byte { return encodeElectLeadersReq(ElectUnclean, v.([]TopicPartitions)) },
			func(b []byte) (any, error) { _, v, err := decodeElectLeadersReq(b); return v, err }},
		{"elect leaders answer", []ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 0}, {Partition: 1, Err: &Error{Code: kerr.ElectionNotNeeded}}}}},
			func(v any) []byte { return encodeElectLeadersResp(v.([]ElectLeadersTopicResult), nil) },
			func(b []byte) (any, error) { v, _, err := decodeElectLeadersResp(b); return v, err }},
		{"heartbeat", BrokerHeartbeat{BrokerID: 1, BrokerEpoch: 9, CurrentMetadataOffset: 12, WantShutdown: true},
			func(v any) []byte { return encodeHeartbeatReq(v.(BrokerHeartbeat)) },
			func(b []byte) (any, error) { return decodeHeartbeatReq(b) }},
		{"quorum", QuorumInfo{LeaderID: 2, LeaderEpoch: 5, HighWatermark: 40, Voters: []ReplicaInfo{{ID: 1, LogEndOffset: 40, LastFetchTimestamp: 7, LastCaughtUpTimestamp: -1}}},
			func(v any) []byte { return encodeQuorumResp(v.(QuorumInfo), nil) },
			func(b []byte) (any, error) { v, _, err := decodeQuorumResp(b); return v, err }},
	}
	for _, tc := range roundTrip {
		got, err := tc.dec(tc.enc(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.in) {
			t.Errorf("%s:\n got %#v %v\nwant %#v", tc.name, got, err, tc.in)
		}
	}
	// A whole-call error comes back with its code and message.
	callErr, err := decodeErrResp(encodeErrResp(errIn))
	if err != nil || !errors.Is(callErr, kerr.TopicAlreadyExists) || *ErrorMessage(callErr) != errIn.Message {
		t.Fatalf("error round trip: %v %v", callErr, err)
	}
	other, _ := decodeErrResp(encodeErrResp(errors.New("disk on fire")))
	if !errors.Is(other, kerr.UnknownServerError) || *ErrorMessage(other) != "disk on fire" {
		t.Fatalf("plain error round trip: %v", other)
	}
}

// decoders lists every rpc decoder, for the fuzz target.
var decoders = []func([]byte) error{
	func(b []byte) error { _, _, err := decodeCreateTopicsReq(b); return err },
	func(b []byte) error { _, err := decodeCreateTopicsResp(b); return err },
	func(b []byte) error { _, _, err := decodeDeleteTopicsReq(b); return err },
	func(b []byte) error { _, err := decodeDeleteTopicsResp(b); return err },
	func(b []byte) error { _, _, err := decodeCreatePartitionsReq(b); return err },
	func(b []byte) error { _, err := decodeCreatePartitionsResp(b); return err },
	func(b []byte) error { _, err := decodeAlterConfigsReq(b); return err },
	func(b []byte) error { _, err := decodeRegisterBrokerReq(b); return err },
	func(b []byte) error { _, _, err := decodeInt64sResp(b, 2); return err },
	func(b []byte) error { _, err := decodeAlterPartitionReq(b); return err },
	func(b []byte) error { _, _, err := decodeAlterPartitionResp(b); return err },
	func(b []byte) error { _, _, err := decodeElectLeadersReq(b); return err },
	func(b []byte) error { _, _, err := decodeElectLeadersResp(b); return err },
	func(b []byte) error { _, err := decodeHeartbeatReq(b); return err },
	func(b []byte) error { _, _, err := decodeHeartbeatResp(b); return err },
	func(b []byte) error { _, _, err := decodeQuorumResp(b); return err },
	func(b []byte) error { _, err := decodeHello(b); return err },
	func(b []byte) error { _, err := decodeWelcome(b); return err },
}

// FuzzRPCDecode feeds arbitrary bytes to every decoder: each must return
// an error or a value, never panic or allocate without bound.
func FuzzRPCDecode(f *testing.F) {
	f.Add(encodeCreateTopicsReq([]CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1, Assignments: map[int32][]int32{0: {1}}}}, false))
	f.Add(encodeElectLeadersResp([]ElectLeadersTopicResult{{Topic: "a", Partitions: []ElectLeadersPartitionResult{{Partition: 1}}}}, nil))
	f.Add(encodeQuorumResp(QuorumInfo{Voters: []ReplicaInfo{{ID: 1}}}, nil))
	f.Add(encodeHello(hello{kind: connRaft, from: 1, clusterID: "c"}))
	f.Add(encodeAlterPartitionReq(alterPartitionReq{topicID: [16]byte{1}, newISR: []ISRMember{{ID: 1, BrokerEpoch: 3}, {ID: 2, BrokerEpoch: -1}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range decoders {
			_ = dec(b)
		}
	})
}

// The rpc path end to end over loopback: a peer's client reaches the
// controller, and a request the server cannot decode is refused as a
// whole.
func TestRPCOverLoopback(t *testing.T) {
	n, _, addr := serveOne(t)
	if _, err := n.Controller().RegisterBroker(ctxT(t), RegisterBrokerRecord{BrokerID: 1}); err != nil {
		t.Fatal(err)
	}
	peer, err := NewTCPTransport(TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	body, leader, err := peer.rpcCall(ctxT(t), 1, rpcCreateTopics, encodeCreateTopicsReq([]CreateTopic{{Name: "x", NumPartitions: 2, ReplicationFactor: 1}}, false))
	if err != nil || leader != 1 {
		t.Fatalf("rpc: %v, leader %d", err, leader)
	}
	res, err := decodeCreateTopicsResp(body)
	if err != nil || len(res) != 1 || res[0].Err != nil || res[0].NumPartitions != 2 {
		t.Fatalf("answer %+v %v", res, err)
	}
	if _, ok := n.Image().Topic("x"); !ok {
		t.Fatal("topic not created")
	}
	if _, _, err := peer.rpcCall(ctxT(t), 1, rpcCreateTopics, []byte{0xff}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("garbage request: %v", err)
	}
	if _, _, err := peer.rpcCall(ctxT(t), 1, 200, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("unknown rpc: %v", err)
	}
	// Concurrent calls share the connection.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _, err := peer.rpcCall(ctxT(t), 1, rpcDescribeQuorum, nil)
			if err != nil {
				t.Error(err)
				return
			}
			q, qerr, err := decodeQuorumResp(body)
			if err != nil || qerr != nil || q.LeaderID != 1 {
				t.Errorf("describe quorum: %+v %v %v", q, qerr, err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkForwardedHeartbeat measures a broker heartbeat forwarded from
// another node to the active controller over loopback, the most frequent
// controller request.
func BenchmarkForwardedHeartbeat(b *testing.B) {
	n, _, addr := serveOne(b)
	epoch, err := n.Controller().RegisterBroker(ctxT(b), RegisterBrokerRecord{BrokerID: 2})
	if err != nil {
		b.Fatal(err)
	}
	peer, err := NewTCPTransport(TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer peer.Close()
	req := encodeHeartbeatReq(BrokerHeartbeat{BrokerID: 2, BrokerEpoch: epoch, CurrentMetadataOffset: int64(n.Image().Offset())})
	ctx := ctxT(b)
	b.ReportAllocs()
	for b.Loop() {
		body, _, err := peer.rpcCall(ctx, 1, rpcBrokerHeartbeat, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, herr, err := decodeHeartbeatResp(body); err != nil || herr != nil {
			b.Fatal(herr, err)
		}
	}
}

func TestTransportAttachChecks(t *testing.T) {
	tr, err := NewTCPTransport(TransportConfig{NodeID: 1, ClusterID: "x", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"other cluster", Config{NodeID: 1, ClusterID: "y"}},
		{"other node", Config{NodeID: 2, ClusterID: "x"}},
		{"observer among voters", Config{NodeID: 1, ClusterID: "x", Voters: []uint64{1, 2}, Observer: true}},
	}
	for _, tc := range cases {
		tc.cfg.Dir, tc.cfg.Logger, tc.cfg.Transport = t.TempDir(), discardLogger(), tr
		if n, err := Start(tc.cfg); err == nil {
			n.Close()
			t.Errorf("%s: Start succeeded", tc.name)
		}
	}
	n := startNode(t, t.TempDir(), func(c *Config) { c.ClusterID = "x"; c.Transport = tr })
	if _, err := Start(Config{NodeID: 1, ClusterID: "x", Dir: t.TempDir(), Logger: discardLogger(), Transport: tr}); err == nil {
		t.Fatal("a second node took the same transport")
	}
	n.Close()
	// Once the first node is closed the transport can serve another.
	n2 := startNode(t, t.TempDir(), func(c *Config) { c.ClusterID = "x"; c.Transport = tr })
	if !n2.IsLeader() {
		t.Fatal("second node does not lead")
	}
	// An observer with no voters never bootstraps a log of its own.
	obs := startNode(t, t.TempDir(), func(c *Config) { c.NodeID = 7; c.Observer = true; c.Ticks = make(chan time.Time) })
	if obs.IsLeader() || len(obs.Voters()) != 0 {
		t.Fatalf("observer leads %v, voters %v", obs.IsLeader(), obs.Voters())
	}
}
