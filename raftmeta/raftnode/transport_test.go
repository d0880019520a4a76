package raftnode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
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
func serveOne(t testing.TB, mod ...func(*Config)) (*Node, *TCPTransport, string) {
	t.Helper()
	tr, err := NewTCPTransport(TransportConfig{NodeID: 1, ClusterID: "a", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, t.TempDir(), append([]func(*Config){func(c *Config) { c.ClusterID = "a"; c.Transport = tr }}, mod...)...)
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

// A handler the node's config names answers calls over loopback, with the
// call's error first; an rpc nobody handles is refused as a whole, and
// concurrent calls share the connection.
func TestRPCHandlersOverLoopback(t *testing.T) {
	echo := func(ctx context.Context, from uint64, body []byte) []byte {
		return append(AppendCallError(nil, 0, nil), append([]byte{byte(from)}, body...)...)
	}
	_, _, addr := serveOne(t, func(c *Config) { c.Handlers = map[byte]RPCHandler{1: echo} })
	peer, err := NewTCPTransport(TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, leader, err := peer.Call(ctxT(t), 1, 1, []byte{byte(i)})
			if err != nil || leader != 1 || !bytes.Equal(body, []byte{0, 2, byte(i)}) {
				t.Errorf("call %d: %v %v, leader %d", i, body, err, leader)
			}
		}()
	}
	wg.Wait()
	body, _, err := peer.Call(ctxT(t), 1, 200, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := compact.Decoder{Buf: body}
	if err := readCallError(&d); !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), "unknown controller rpc 200") {
		t.Fatalf("unknown rpc: %v", err)
	}
	if _, err := Start(Config{NodeID: 3, Dir: t.TempDir(), Logger: discardLogger(), Handlers: map[byte]RPCHandler{APIAddLearner: echo}}); err == nil {
		t.Fatal("a handler took the node's own rpc")
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

// The closed-connection callbacks: the server hears when a node's last
// rpc connection to it closes (RPCPeerGone), the caller when its
// connection to a node ends other than by its own Close (RPCConnLost).
func TestRPCConnClosedCallbacks(t *testing.T) {
	echo := func(ctx context.Context, from uint64, body []byte) []byte { return AppendCallError(nil, 0, nil) }
	gone := make(chan uint64, 8)
	_, server, addr := serveOne(t, func(c *Config) {
		c.Handlers = map[byte]RPCHandler{1: echo}
		c.RPCPeerGone = func(from uint64) { gone <- from }
	})
	lost := make(chan uint64, 8)
	newPeer := func(id uint64) *TCPTransport {
		p, err := NewTCPTransport(TransportConfig{NodeID: id, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr},
			RPCConnLost: func(to uint64) { lost <- to }})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Call(ctxT(t), 1, 1, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wait := func(ch chan uint64, want uint64, what string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("%s: node %d, want %d", what, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no callback", what)
		}
	}
	p2 := newPeer(2)
	p3 := newPeer(3)
	p2.Close()
	wait(gone, 2, "RPCPeerGone after node 2 closed")
	select {
	case to := <-lost:
		t.Fatalf("RPCConnLost(%d) after the caller's own Close", to)
	case <-time.After(100 * time.Millisecond):
	}
	server.Close()
	wait(lost, 1, "RPCConnLost after node 1 closed")
	p3.Close()
}
