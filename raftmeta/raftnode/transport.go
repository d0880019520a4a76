package raftnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// Transport defaults.
const (
	defaultDialTimeout    = 3 * time.Second
	defaultWriteTimeout   = 10 * time.Second
	defaultRequestTimeout = 30 * time.Second
	defaultMinBackoff     = 20 * time.Millisecond // controller.quorum.retry.backoff.ms
	defaultMaxBackoff     = time.Second
	defaultMaxFrameBytes  = 64 << 20
	defaultQueueLen       = 1024
	handshakeTimeout      = 5 * time.Second
)

// TransportConfig configures a TCPTransport.
type TransportConfig struct {
	// NodeID and ClusterID identify this node in handshakes; a peer of
	// another cluster is refused. Both are required.
	NodeID    uint64
	ClusterID string
	// Peers maps node IDs to controller listener addresses (host:port), as
	// controller.quorum.voters names them. This node's own entry is
	// ignored. Nodes without an address (brokers that are learners) are
	// reached over the connections they open.
	Peers map[uint64]string
	// Bootstrap lists controller addresses whose node IDs are learnt in
	// the handshake (controller.quorum.bootstrap.servers).
	Bootstrap []string
	// Logger receives the transport's logs, slog.Default() if nil.
	Logger *slog.Logger
	// DialTimeout bounds one connection attempt (default 3 s);
	// MinBackoff and MaxBackoff bound the wait between attempts (20 ms,
	// doubling up to 1 s).
	DialTimeout, MinBackoff, MaxBackoff time.Duration
	// WriteTimeout bounds one write to a peer (default 10 s).
	WriteTimeout time.Duration
	// RequestTimeout bounds a controller rpc with no deadline of its own
	// (default 30 s).
	RequestTimeout time.Duration
	// MaxFrameBytes bounds one frame, and so one raft message or snapshot
	// (default 64 MiB).
	MaxFrameBytes int
	// QueueLen is the number of messages queued per peer before more are
	// dropped (default 1,024).
	QueueLen int
	// SecureDial and SecureAccept, when set, secure each connection
	// before the handshake, as the controller listener's security
	// protocol asks (TLS, SASL): SecureDial the ones this node opens to
	// addr, SecureAccept the ones it accepts. Each returns the connection
	// to talk over, or an error that closes it. nil: plaintext.
	SecureDial   func(ctx context.Context, c net.Conn, addr string) (net.Conn, error)
	SecureAccept func(ctx context.Context, c net.Conn) (net.Conn, error)
	// RPCConnLost, if set, is called when an rpc connection this node
	// opened to node to ends other than by Close: the peer died, or
	// closed it. A broker heartbeats again at once, so the controller,
	// which treats a closed connection as a crash (Config.RPCPeerGone),
	// hears from it over a new connection within its grace. It must not
	// block.
	RPCConnLost func(to uint64)
}

// TCPTransport carries raft messages and controller requests between
// nodes over TCP, on the controller listener. Pass it as Config.Transport:
// Start binds it to the node. Call Serve with the controller listener on
// nodes that have one (controllers); brokers only dial out. Sending never
// blocks the node's Ready loop: each peer has a bounded queue drained by
// its connection's writer, and a message for a peer that is down or whose
// queue is full is dropped and reported to raft as unreachable (a dropped
// snapshot as failed), which makes the leader probe and retry.
type TCPTransport struct {
	cfg    TransportConfig
	log    *slog.Logger
	node   atomic.Pointer[Node]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	peers     map[uint64]*peer
	listeners map[net.Listener]struct{}
	conns     map[*wireConn]struct{}
	rpcs      map[uint64]*rpcClientConn
	// rpcServing counts the rpc connections each node has open to this
	// one, so that RPCPeerGone fires when its last one closes.
	rpcServing map[uint64]int
	// refused holds the peers whose controller listener refused this
	// node's latest dial, until a connection with them is made again
	// (Node.PeerDown).
	refused map[uint64]bool
	// wrongCluster maps the peers that refused this node, or that it
	// refused, for belonging to another cluster to that cluster's id.
	wrongCluster map[uint64]string

	onDrop func(to uint64, snap bool) // tests observe drops
}

// peer is another node messages are sent to.
type peer struct {
	id    uint64
	queue chan outFrame
	addr  string    // guarded by TCPTransport.mu; "" if it cannot be dialed
	send  *wireConn // guarded by TCPTransport.mu; the connection messages go on
}

type outFrame struct {
	b    []byte
	snap bool
}

// wireConn is one connection with its buffers.
type wireConn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	done chan struct{}
	once sync.Once
}

func newWireConn(c net.Conn) *wireConn {
	return &wireConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10), done: make(chan struct{})}
}

// over makes wc read and write through sc, a secured connection over
// wc.c; wc.c stays the one closed and given deadlines (which a TLS
// connection passes to it). Called before anything is read or written.
func (wc *wireConn) over(sc net.Conn) {
	wc.r = bufio.NewReaderSize(sc, 64<<10)
	wc.w = bufio.NewWriterSize(sc, 64<<10)
}

func (wc *wireConn) close() {
	wc.once.Do(func() {
		close(wc.done)
		wc.c.Close()
	})
}

func (wc *wireConn) writeAndFlush(b []byte, timeout time.Duration) error {
	wc.c.SetWriteDeadline(time.Now().Add(timeout))
	if err := writeFrame(wc.w, b); err != nil {
		return err
	}
	return wc.w.Flush()
}

var (
	_                Transport     = (*TCPTransport)(nil)
	_                nodeAttacher  = (*TCPTransport)(nil)
	_                learnerJoiner = (*TCPTransport)(nil)
	errWrongCluster                = errors.New("peer belongs to another cluster")
	errTransportDown               = errors.New("raftmeta: transport closed")
)

// NewTCPTransport returns a transport that starts dialing its peers at
// once. Close it after the node that uses it.
func NewTCPTransport(cfg TransportConfig) (*TCPTransport, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("new transport: node ID 0 is reserved")
	}
	if cfg.ClusterID == "" {
		return nil, errors.New("new transport: no cluster ID")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	setDefault(&cfg.DialTimeout, defaultDialTimeout)
	setDefault(&cfg.WriteTimeout, defaultWriteTimeout)
	setDefault(&cfg.RequestTimeout, defaultRequestTimeout)
	setDefault(&cfg.MinBackoff, defaultMinBackoff)
	setDefault(&cfg.MaxBackoff, defaultMaxBackoff)
	setDefault(&cfg.MaxFrameBytes, defaultMaxFrameBytes)
	setDefault(&cfg.QueueLen, defaultQueueLen)
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "raftmeta-transport", "node", cfg.NodeID),
		ctx:       ctx,
		cancel:    cancel,
		peers:     map[uint64]*peer{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*wireConn]struct{}{},
		rpcs:      map[uint64]*rpcClientConn{},

		rpcServing: map[uint64]int{},
		refused:    map[uint64]bool{},
	}
	for id, addr := range cfg.Peers {
		if id == 0 || id == cfg.NodeID {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("new transport: address of node %d: %w", id, err)
		}
		t.peers[id] = t.newPeer(id, addr)
	}
	known := map[string]bool{}
	for id, p := range t.peers {
		known[p.addr] = true
		t.goTracked(func() { t.dialLoop(p.addr, id) })
	}
	for _, addr := range cfg.Bootstrap {
		if known[addr] {
			continue // already dialed by ID
		}
		known[addr] = true
		t.goTracked(func() { t.dialLoop(addr, 0) })
	}
	return t, nil
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

func (t *TCPTransport) newPeer(id uint64, addr string) *peer {
	return &peer{id: id, addr: addr, queue: make(chan outFrame, t.cfg.QueueLen)}
}

// goTracked starts fn unless the transport is closed.
func (t *TCPTransport) goTracked(fn func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		fn()
	}()
	return true
}

// attach binds the transport to n; Start calls it.
func (t *TCPTransport) attach(n *Node) error {
	if n.cfg.NodeID != t.cfg.NodeID {
		return fmt.Errorf("transport of node %d given to node %d", t.cfg.NodeID, n.cfg.NodeID)
	}
	if id := n.Image().ClusterID; id != t.cfg.ClusterID {
		return fmt.Errorf("transport of cluster %q given to a node of cluster %q", t.cfg.ClusterID, id)
	}
	if !t.node.CompareAndSwap(nil, n) {
		return errors.New("transport is already in use by a running node")
	}
	return nil
}

// detach unbinds n; Node.Close calls it.
func (t *TCPTransport) detach(n *Node) { t.node.CompareAndSwap(n, nil) }

// Send queues msgs for their peers. It implements Transport.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		to := m.GetTo()
		snap := m.GetType() == pb.MsgSnap
		t.mu.Lock()
		p := t.peers[to]
		up := p != nil && p.send != nil
		t.mu.Unlock()
		if !up {
			t.dropped(to, snap)
			continue
		}
		b, err := proto.Marshal(m)
		if err == nil && len(b) > t.cfg.MaxFrameBytes {
			err = fmt.Errorf("%d bytes exceeds the %d byte frame limit", len(b), t.cfg.MaxFrameBytes)
		}
		if err != nil {
			t.log.Error("cannot send raft message", "type", m.GetType(), "to", to, "err", err)
			t.dropped(to, snap)
			continue
		}
		select {
		case p.queue <- outFrame{b: b, snap: snap}:
		default:
			t.dropped(to, snap)
		}
	}
}

// dropped reports a message that was not sent.
func (t *TCPTransport) dropped(to uint64, snap bool) {
	if t.onDrop != nil {
		t.onDrop(to, snap)
	}
	n := t.node.Load()
	if n == nil {
		return
	}
	n.ReportUnreachable(to)
	if snap {
		n.ReportSnapshot(to, raft.SnapshotFailure)
	}
}

// Serve accepts connections on ln until it is closed or the transport is.
// It returns nil after Close.
func (t *TCPTransport) Serve(ln net.Listener) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return nil
	}
	t.listeners[ln] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.listeners, ln)
		t.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("serve controller listener: %w", err)
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does, rather than stop listening.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.log.Warn("accepting a controller connection failed", "err", err, "retry_in", backoff)
			select {
			case <-t.ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		wc := newWireConn(c)
		if !t.track(wc) || !t.goTracked(func() { t.handleInbound(wc) }) {
			wc.close()
			return nil
		}
	}
}

// track registers a connection for Close.
func (t *TCPTransport) track(wc *wireConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[wc] = struct{}{}
	return true
}

func (t *TCPTransport) untrack(wc *wireConn) {
	wc.close()
	t.mu.Lock()
	delete(t.conns, wc)
	t.mu.Unlock()
}

// handleInbound runs the acceptor's side of a connection.
func (t *TCPTransport) handleInbound(wc *wireConn) {
	defer t.untrack(wc)
	wc.c.SetDeadline(time.Now().Add(handshakeTimeout))
	if t.cfg.SecureAccept != nil {
		ctx, cancel := context.WithTimeout(t.ctx, handshakeTimeout)
		sc, err := t.cfg.SecureAccept(ctx, wc.c)
		cancel()
		if err != nil {
			t.log.Warn("refused controller connection", "remote", wc.c.RemoteAddr(), "err", err)
			return
		}
		wc.over(sc)
	}
	b, err := readFrame(wc.r, maxHandshakeBytes)
	if err != nil {
		t.log.Debug("controller connection closed before its handshake", "remote", wc.c.RemoteAddr(), "err", err)
		return
	}
	refuse := func(status byte, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		t.log.Warn("refused controller connection", "remote", wc.c.RemoteAddr(), "reason", msg)
		_ = wc.writeAndFlush(encodeWelcome(welcome{status: status, nodeID: t.cfg.NodeID, clusterID: t.cfg.ClusterID, message: msg}), handshakeTimeout)
	}
	h, err := decodeHello(b)
	switch {
	case err != nil:
		refuse(helloBadRequest, "%v", err)
		return
	case h.clusterID != t.cfg.ClusterID:
		t.noteWrongCluster(h.from, h.clusterID)
		refuse(helloWrongCluster, "node %d belongs to cluster %q, not %q", h.from, h.clusterID, t.cfg.ClusterID)
		return
	case h.from == 0 || h.from == t.cfg.NodeID:
		refuse(helloBadRequest, "bad peer node ID %d", h.from)
		return
	case h.to != 0 && h.to != t.cfg.NodeID:
		refuse(helloWrongNode, "this is node %d, not %d", t.cfg.NodeID, h.to)
		return
	case t.node.Load() == nil:
		refuse(helloNotReady, "the metadata node is not running")
		return
	}
	if err := wc.writeAndFlush(encodeWelcome(welcome{status: helloOK, nodeID: t.cfg.NodeID, clusterID: t.cfg.ClusterID}), handshakeTimeout); err != nil {
		return
	}
	wc.c.SetDeadline(time.Time{})
	t.peerReached(h.from)
	if h.kind == connRPC {
		t.serveRPC(wc, h.from)
		return
	}
	// A peer this node cannot dial (a learner) is sent to over the
	// connection it opened.
	t.mu.Lock()
	p := t.peers[h.from]
	if p == nil {
		p = t.newPeer(h.from, "")
		t.peers[h.from] = p
	}
	sendOn := p.addr == ""
	t.mu.Unlock()
	t.runRaftConn(wc, p, sendOn)
}

// dial connects to addr and completes the handshake. expect is the node ID
// expected there, 0 if unknown. It returns the peer's node ID.
func (t *TCPTransport) dial(ctx context.Context, addr string, kind byte, expect uint64) (*wireConn, uint64, error) {
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	if expect != 0 {
		// Something listens there: not (or no longer) a dead process,
		// even if the handshake fails.
		t.peerReached(expect)
	}
	wc := newWireConn(c)
	if !t.track(wc) {
		wc.close()
		return nil, 0, errTransportDown
	}
	fail := func(err error) (*wireConn, uint64, error) {
		t.untrack(wc)
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if t.cfg.SecureDial != nil {
		sctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		sc, err := t.cfg.SecureDial(sctx, c, addr)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("secure connection to %s: %w", addr, err))
		}
		wc.over(sc)
	}
	if err := wc.writeAndFlush(encodeHello(hello{kind: kind, from: t.cfg.NodeID, to: expect, clusterID: t.cfg.ClusterID}), handshakeTimeout); err != nil {
		return fail(fmt.Errorf("handshake with %s: %w", addr, err))
	}
	b, err := readFrame(wc.r, maxHandshakeBytes)
	if err != nil {
		return fail(fmt.Errorf("handshake with %s: %w", addr, err))
	}
	w, err := decodeWelcome(b)
	switch {
	case err != nil:
		return fail(fmt.Errorf("handshake with %s: %w", addr, err))
	case w.status == helloWrongCluster || w.status == helloOK && w.clusterID != t.cfg.ClusterID:
		t.noteWrongCluster(w.nodeID, w.clusterID)
		return fail(fmt.Errorf("handshake with %s: %w: %s", addr, errWrongCluster, w.message))
	case w.status != helloOK:
		return fail(fmt.Errorf("handshake with %s refused: %s", addr, w.message))
	case expect != 0 && w.nodeID != expect:
		return fail(fmt.Errorf("handshake with %s: it is node %d, not %d", addr, w.nodeID, expect))
	}
	c.SetDeadline(time.Time{})
	return wc, w.nodeID, nil
}

// dialLoop keeps a raft connection open to addr, reconnecting with
// backoff, until the transport closes. id is the node expected there, 0
// for a bootstrap address whose node is learnt in the handshake.
func (t *TCPTransport) dialLoop(addr string, id uint64) {
	backoff := t.cfg.MinBackoff
	for t.ctx.Err() == nil {
		wc, got, err := t.dial(t.ctx, addr, connRaft, id)
		if err == nil && got == t.cfg.NodeID {
			t.untrack(wc)
			return // a bootstrap address of this very node
		}
		if err == nil {
			if id == 0 {
				id = got
			}
			p := t.learnPeer(id, addr)
			start := time.Now()
			t.runRaftConn(wc, p, true)
			if time.Since(start) > t.cfg.MaxBackoff {
				backoff = t.cfg.MinBackoff
			}
		} else if errors.Is(err, errWrongCluster) {
			t.log.Error("controller peer refused: wrong cluster", "addr", addr, "err", err)
		} else if errors.Is(err, syscall.ECONNREFUSED) && id != 0 && t.ctx.Err() == nil {
			t.peerRefused(id)
			t.log.Debug("controller peer refuses connections", "addr", addr, "node", id)
		} else if t.ctx.Err() == nil {
			t.log.Debug("cannot reach controller peer", "addr", addr, "node", id, "err", err)
		}
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, t.cfg.MaxBackoff)
	}
}

// peerRefused records that node id's listener refused a connection: its
// process is gone. The node learns it at once (a dead leader is replaced
// without waiting out an election timeout).
func (t *TCPTransport) peerRefused(id uint64) {
	t.mu.Lock()
	t.refused[id] = true
	t.mu.Unlock()
	if n := t.node.Load(); n != nil {
		n.ReportPeerDown(id)
	}
}

// peerReached records a connection made with node id, either way.
func (t *TCPTransport) peerReached(id uint64) {
	t.mu.Lock()
	delete(t.refused, id)
	t.mu.Unlock()
}

// refusing implements peerRefuser.
func (t *TCPTransport) refusing(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused[id]
}

// noteWrongCluster records that node id belongs to cluster other.
func (t *TCPTransport) noteWrongCluster(id uint64, other string) {
	if id == 0 || id == t.cfg.NodeID {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wrongCluster == nil {
		t.wrongCluster = make(map[uint64]string)
	}
	t.wrongCluster[id] = other
}

// WrongClusterPeers returns the nodes found to belong to another cluster
// (a handshake refused either way), each with that cluster's id. The
// broker stops at start when they leave it no majority of voters, rather
// than wait for a quorum that cannot form.
func (t *TCPTransport) WrongClusterPeers() map[uint64]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.wrongCluster)
}

// learnPeer returns the peer for id, recording addr as its address.
func (t *TCPTransport) learnPeer(id uint64, addr string) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	if p == nil {
		p = t.newPeer(id, addr)
		t.peers[id] = p
	}
	p.addr = addr
	delete(t.refused, id)
	return p
}

// runRaftConn reads messages from a raft connection until it fails. If
// sendOn, the connection also carries messages to the peer, replacing any
// earlier one.
func (t *TCPTransport) runRaftConn(wc *wireConn, p *peer, sendOn bool) {
	defer t.untrack(wc)
	if sendOn {
		t.mu.Lock()
		old := p.send
		p.send = wc
		t.mu.Unlock()
		if old != nil {
			old.close()
		}
		if !t.goTracked(func() { t.writeLoop(p, wc) }) {
			return
		}
		defer t.endSend(p, wc)
	}
	err := t.readLoop(wc, p.id)
	t.logConnEnd("raft connection ended", p.id, err)
}

func (t *TCPTransport) logConnEnd(msg string, peer uint64, err error) {
	if t.ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		t.log.Debug(msg, "peer", peer, "err", err)
		return
	}
	t.log.Info(msg, "peer", peer, "err", err)
}

// endSend stops using wc for p; what is still queued is reported dropped
// unless a newer connection has taken over.
func (t *TCPTransport) endSend(p *peer, wc *wireConn) {
	wc.close()
	t.mu.Lock()
	current := p.send == wc
	if current {
		p.send = nil
	}
	t.mu.Unlock()
	if !current {
		return
	}
	for {
		select {
		case f := <-p.queue:
			t.dropped(p.id, f.snap)
		default:
			return
		}
	}
}

// writeLoop writes p's queued messages to wc until wc closes. A snapshot
// is reported to raft once it has been written out.
func (t *TCPTransport) writeLoop(p *peer, wc *wireConn) {
	for {
		var f outFrame
		select {
		case f = <-p.queue:
		case <-wc.done:
			return
		}
		wc.c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		err := writeFrame(wc.w, f.b)
		if err == nil && (f.snap || len(p.queue) == 0) {
			err = wc.w.Flush()
		}
		n := t.node.Load()
		if err != nil {
			t.log.Debug("raft send failed", "peer", p.id, "err", err)
			t.dropped(p.id, f.snap)
			wc.close()
			return
		}
		if f.snap && n != nil {
			n.ReportSnapshot(p.id, raft.SnapshotFinish)
		}
	}
}

// readLoop steps the messages read from wc into the node.
func (t *TCPTransport) readLoop(wc *wireConn, from uint64) error {
	for {
		b, err := readFrame(wc.r, t.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		m := new(pb.Message)
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("decode raft message: %w", err)
		}
		// A peer speaks only for itself and only to this node, and never
		// sends the messages raft keeps local.
		if m.GetFrom() != from || m.GetTo() != t.cfg.NodeID || raft.IsLocalMsg(m.GetType()) {
			return fmt.Errorf("bad raft message %v from %d to %d on the connection of node %d", m.GetType(), m.GetFrom(), m.GetTo(), from)
		}
		n := t.node.Load()
		if n == nil {
			continue
		}
		if err := n.Step(t.ctx, m); err != nil && !errors.Is(err, ErrClosed) {
			return err
		}
	}
}

// joinAsLearner asks the active controller to add this node as a learner.
// It implements learnerJoiner.
func (t *TCPTransport) joinAsLearner(ctx context.Context) error {
	ids := t.ControllerIDs()
	if len(ids) == 0 {
		return errors.New("join the metadata quorum: no controller addresses")
	}
	var lastErr error
	var hint uint64
	for i := 0; i < 2*len(ids); i++ {
		to := ids[i%len(ids)]
		if hint != 0 {
			to, hint = hint, 0
		}
		body, leader, err := t.Call(ctx, to, APIAddLearner, nil)
		if err == nil {
			err = decodeAddLearnerAnswer(body)
		}
		if err == nil {
			return nil
		}
		lastErr = err
		if errors.Is(err, kerr.NotController) && leader != 0 && leader != to && leader != t.cfg.NodeID {
			hint = leader
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("join the metadata quorum: %w", lastErr)
}

// ControllerIDs returns the IDs of the peers this node can dial (the
// controllers), sorted.
func (t *TCPTransport) ControllerIDs() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []uint64
	for id, p := range t.peers {
		if p.addr != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// decodeAddLearnerAnswer returns the error an APIAddLearner answer holds:
// the call's, else AddLearner's.
func decodeAddLearnerAnswer(b []byte) error {
	d := compact.Decoder{Buf: b}
	if err := readCallError(&d); err != nil {
		return err
	}
	err := readCallError(&d)
	if derr := d.Finish("response"); derr != nil {
		return derr
	}
	return err
}

// Close stops the listeners, connections and dialers and waits for their
// goroutines. Messages still queued are dropped.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for ln := range t.listeners {
		ln.Close()
	}
	for wc := range t.conns {
		wc.close()
	}
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	return nil
}
