package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/vfs"
)

// Raft timing. With 100 ms ticks a follower calls an election after 1-2 s
// without a leader and a leader heartbeats every tick. A node that is the
// only voter does not wait: it campaigns as soon as it has replayed its log.
const (
	defaultTickInterval  = 100 * time.Millisecond
	heartbeatTicks       = 1
	defaultSnapshotEvery = 10000
	// defaultSnapshotMargin entries stay in the log below each snapshot,
	// so that a follower a little behind catches up from the log and only
	// a new or far-behind node needs the whole image.
	defaultSnapshotMargin = 1000

	maxMsgBytes       = 1 << 20
	maxInflightMsgs   = 256
	maxEntryBytes     = 8 << 20
	maxProposalsBatch = 256
)

// ElectionTicks is the election timeout in ticks: a follower that hears
// from no leader for ElectionTicks to twice that many ticks campaigns.
const ElectionTicks = 10

// Transport carries raft messages between nodes. Send is called from the
// Ready loop after the messages' preconditions are durable; it must not
// block for long (queue, and drop when full: raft retries). The receiving
// side hands messages to Node.Step. A single-node cluster has nothing to
// send and needs no transport.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Config configures a Node.
type Config struct {
	// NodeID is this node's raft ID (Kafka's node.id); it must not be 0.
	NodeID uint64
	// Voters are the IDs of the controller quorum, used to bootstrap an
	// empty log. Empty means this node alone, unless Observer is set. A
	// node not among the voters starts empty and, if its transport can
	// reach the controllers (TCPTransport), asks the active controller to
	// add it as a learner.
	Voters []uint64
	// Observer marks a node that is never a voter (process.roles=broker):
	// it never bootstraps a log of its own, even with Voters empty (when
	// only controller.quorum.bootstrap.servers names the controllers).
	Observer bool
	// Dir is the metadata log dir; the log itself goes in
	// Dir/__cluster_metadata-0.
	Dir string
	// FS is the filesystem, vfs.Default if nil.
	FS vfs.FS
	// Transport sends messages to other nodes; nil for a single node.
	Transport Transport
	// Logger receives the node's logs, slog.Default() if nil.
	Logger *slog.Logger
	// ClusterID is written into a new log and checked against an existing
	// one. Empty takes the stored ID, or a random one for a new log.
	ClusterID string
	// SnapshotEvery is the number of applied entries between snapshots
	// (default 10,000). Each snapshot compacts the log.
	SnapshotEvery uint64
	// TickInterval is the raft tick (default 100 ms).
	TickInterval time.Duration
	// Ticks, if set, replaces the ticker: each value received is one tick.
	// Tests use it to drive time.
	Ticks <-chan time.Time
	// SnapshotMargin is the number of entries kept in memory below each
	// snapshot for followers that lag a little (default 1,000).
	SnapshotMargin uint64
	// Handlers answer the rpcs that other nodes send to this one over its
	// TCPTransport, by API number: the transport serves them while the
	// node runs. The controller's calls come this way (package
	// controller); the node answers its own (AddLearner) itself.
	Handlers map[byte]RPCHandler
	// RPCPeerGone, if set, is called when the last rpc connection node
	// from had open to this node closes. A node whose process died has
	// its connections closed by its kernel at once, so this is the first
	// sign of a crash; the controller uses it to fence the node's broker
	// long before its session would time out. It must not block.
	RPCPeerGone func(from uint64)
	// PeerDown, if set, is called when node id's controller listener
	// refused a connection from this node: its process is gone (see
	// PeerDown). It must not block.
	PeerDown func(id uint64)
}

// Node is one member of the metadata quorum. One goroutine, the Ready
// loop, owns the raft state machine and does all of its I/O: it persists
// entries and hard state, sends messages, applies committed entries to the
// image and publishes the new image.
type Node struct {
	cfg Config
	log *slog.Logger
	st  *diskStorage
	rn  *raft.RawNode

	image  atomic.Pointer[image.Image]
	active atomic.Bool   // raft leader and caught up with its own term
	lead   atomic.Uint64 // raft leader ID, 0 when unknown

	propc  chan *proposal
	recvc  chan *pb.Message
	stopc  chan struct{}
	donec  chan struct{}
	ticks  <-chan time.Time
	ticker *time.Ticker

	stopOnce sync.Once
	err      error // why the loop stopped; written before donec closes

	subsMu     sync.Mutex
	subs       []chan struct{}
	subsClosed bool
	// activec is signalled when this node becomes the active controller
	// or stops being it (ActiveChanges).
	activec chan struct{}

	// Reports from the transport, taken by the loop (see quorum.go).
	reportMu    sync.Mutex
	unreachable map[uint64]bool
	snapReports map[uint64]raft.SnapshotStatus
	downReports map[uint64]bool // peers whose listener refused (deadpeer.go)
	reportc     chan struct{}

	loopc      chan func()                  // functions run on the loop
	members    atomic.Pointer[pb.ConfState] // published after each change
	activeTerm atomic.Uint64                // term in which active was last set
	snapsIn    atomic.Uint64                // snapshots received from a leader
	// commits and commitNanos add up the proposals committed and their
	// latency (CommitLatency).
	commits     atomic.Int64
	commitNanos atomic.Int64
	bg          sync.WaitGroup // background goroutines (learner join)
	attachedTo  nodeAttacher

	// Owned by the Ready loop.
	incarnation uint64
	seq         uint64
	waiters     []*proposal // in sequence order
	confState   *pb.ConfState
	snapIndex   uint64
	raftLeader  bool
	leaderTerm  uint64
	resolved    []resolution
	// When the leader last heard from each peer, and when each peer was
	// last caught up with the leader's log (for DescribeQuorum).
	peerSeen     map[uint64]time.Time
	peerCaughtUp map[uint64]time.Time
	// The campaign for a dead leader's place (deadpeer.go): from when
	// this node campaigns, until when it keeps trying, and the timer of
	// its next try (electC is nil when none is set).
	electFrom, electUntil time.Time
	electTimer            *time.Timer
	electC                <-chan time.Time
}

type proposal struct {
	data []byte
	seq  uint64
	done chan proposeResult // buffered: the loop never blocks on it; nil with then
	// then, when set, is run on the Ready loop with the result instead
	// (SubmitFunc), from when start was taken.
	then  func(*image.Image, error)
	start time.Time
}

// finish hands p its result: on its channel, or to its callback.
func (n *Node) finish(p *proposal, res proposeResult) {
	if p.then == nil {
		p.done <- res
		return
	}
	if res.err == nil {
		n.commits.Add(1)
		n.commitNanos.Add(int64(time.Since(p.start)))
	}
	p.then(res.img, res.err)
}

type proposeResult struct {
	img *image.Image
	err error
}

type resolution struct {
	p   *proposal
	res proposeResult
}

// Start opens (or creates) the metadata log in cfg.Dir, replays its
// snapshot and entries into the image, and starts the Ready loop. A node
// that is the only voter is the leader when Start returns.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("start metadata node: node ID 0 is reserved")
	}
	if cfg.Dir == "" {
		return nil, errors.New("start metadata node: no directory")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = defaultSnapshotEvery
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = defaultTickInterval
	}
	if cfg.SnapshotMargin == 0 {
		cfg.SnapshotMargin = defaultSnapshotMargin
	}
	if cfg.Observer && slices.Contains(cfg.Voters, cfg.NodeID) {
		return nil, fmt.Errorf("start metadata node: observer %d is listed among the voters", cfg.NodeID)
	}
	if len(cfg.Voters) == 0 && !cfg.Observer {
		cfg.Voters = []uint64{cfg.NodeID}
	}
	if slices.Contains(cfg.Voters, 0) {
		return nil, errors.New("start metadata node: voter ID 0 is reserved")
	}
	if _, ok := cfg.Handlers[APIAddLearner]; ok {
		return nil, fmt.Errorf("start metadata node: rpc %d is the node's own", APIAddLearner)
	}
	log := cfg.Logger.With("component", "raftmeta", "node", cfg.NodeID)

	st, err := openStorage(cfg.FS, filepath.Join(cfg.Dir, metadataDirName), log)
	if err != nil {
		return nil, fmt.Errorf("start metadata node: %w", err)
	}
	n, err := newNode(cfg, log, st)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("start metadata node: %w", err)
	}
	if cfg.Ticks != nil {
		n.ticks = cfg.Ticks
	} else {
		n.ticker = time.NewTicker(cfg.TickInterval)
		n.ticks = n.ticker.C
	}
	if a, ok := cfg.Transport.(nodeAttacher); ok {
		if err := a.attach(n); err != nil {
			if n.ticker != nil {
				n.ticker.Stop()
			}
			st.close()
			return nil, fmt.Errorf("start metadata node: %w", err)
		}
		n.attachedTo = a
	}
	go n.run()
	if j, ok := cfg.Transport.(learnerJoiner); ok && !slices.Contains(cfg.Voters, cfg.NodeID) {
		n.bg.Add(1)
		go n.joinAsLearner(j)
	}
	return n, nil
}

// newNode recovers the image and raft state and runs the Ready loop inline
// until the committed log is applied (and, for a sole voter, until it leads).
func newNode(cfg Config, log *slog.Logger, st *diskStorage) (*Node, error) {
	clusterID := cfg.ClusterID
	if st.hasMeta && clusterID == "" {
		clusterID = st.meta.clusterID
	}
	if clusterID == "" {
		clusterID = image.UUIDString(image.NewUUID())
	}
	if err := st.setMeta(storageMeta{nodeID: cfg.NodeID, clusterID: clusterID}); err != nil {
		return nil, err
	}
	img := image.NewImage(clusterID)
	var snapIndex uint64
	confState := &pb.ConfState{}
	if st.snap != nil {
		var err error
		if img, err = image.DecodeImage(st.snap.GetData()); err != nil {
			return nil, fmt.Errorf("load snapshot: %w", err)
		}
		snapIndex = st.snap.GetMetadata().GetIndex()
		if img.ClusterID != clusterID || img.Offset() != snapIndex {
			return nil, fmt.Errorf("snapshot at %d holds cluster %q at offset %d", snapIndex, img.ClusterID, img.Offset())
		}
		confState = proto.Clone(st.snap.GetMetadata().GetConfState()).(*pb.ConfState)
	}
	n := &Node{
		cfg:          cfg,
		log:          log,
		st:           st,
		propc:        make(chan *proposal, maxProposalsBatch),
		recvc:        make(chan *pb.Message, 256),
		stopc:        make(chan struct{}),
		donec:        make(chan struct{}),
		activec:      make(chan struct{}, 1),
		reportc:      make(chan struct{}, 1),
		loopc:        make(chan func()),
		unreachable:  map[uint64]bool{},
		snapReports:  map[uint64]raft.SnapshotStatus{},
		downReports:  map[uint64]bool{},
		incarnation:  rand.Uint64(),
		confState:    confState,
		snapIndex:    snapIndex,
		peerSeen:     map[uint64]time.Time{},
		peerCaughtUp: map[uint64]time.Time{},
	}
	n.image.Store(img)
	n.publishMembers()

	rn, err := newRawNode(&raft.Config{
		ID:              cfg.NodeID,
		ElectionTick:    ElectionTicks,
		HeartbeatTick:   heartbeatTicks,
		Storage:         st,
		Applied:         snapIndex,
		MaxSizePerMsg:   maxMsgBytes,
		MaxInflightMsgs: maxInflightMsgs,
		CheckQuorum:     true,
		PreVote:         true,
		Logger:          raftLogger{log},
	})
	if err != nil {
		return nil, err
	}
	n.rn = rn
	if st.empty() && slices.Contains(cfg.Voters, cfg.NodeID) {
		peers := make([]raft.Peer, 0, len(cfg.Voters))
		for _, id := range cfg.Voters {
			peers = append(peers, raft.Peer{ID: id})
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		log.Debug("bootstrapped metadata log", "cluster_id", clusterID, "voters", cfg.Voters)
	}
	if err := n.drainReady(); err != nil {
		return nil, err
	}
	if n.soleVoter() {
		if err := rn.Campaign(); err != nil {
			return nil, fmt.Errorf("campaign: %w", err)
		}
		if err := n.drainReady(); err != nil {
			return nil, err
		}
	}
	log.Debug("metadata node started", "cluster_id", clusterID, "offset", n.Image().Offset(), "leader", n.active.Load())
	return n, nil
}

// newRawNode turns raft's panics on an inconsistent stored state into an
// error.
func newRawNode(c *raft.Config) (rn *raft.RawNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raft: %v", r)
		}
	}()
	return raft.NewRawNode(c)
}

func (n *Node) soleVoter() bool {
	cs := n.confState
	return len(cs.GetVoters()) == 1 && cs.GetVoters()[0] == n.cfg.NodeID && len(cs.GetVotersOutgoing()) == 0
}

func (n *Node) drainReady() error {
	for n.rn.HasReady() {
		if err := n.handleReady(); err != nil {
			return err
		}
	}
	return nil
}

// run is the Ready loop.
func (n *Node) run() {
	defer n.shutdown()
	for {
		select {
		case <-n.ticks:
			n.rn.Tick()
		case p := <-n.propc:
			n.propose(p)
			// Take whatever else is queued so one fsync covers all of it.
			// Only this goroutine receives, so a non-empty channel cannot
			// block.
			for i := 0; i < maxProposalsBatch && len(n.propc) > 0; i++ {
				n.propose(<-n.propc)
			}
		case m := <-n.recvc:
			n.step(m)
		case <-n.reportc:
			n.applyReports()
		case <-n.electC:
			n.campaignForDeadLeader()
		case fn := <-n.loopc:
			fn()
		case <-n.stopc:
			return
		}
		if err := n.drainReady(); err != nil {
			n.err = err
			n.log.Error("metadata node stopped", "err", err)
			return
		}
	}
}

// shutdown runs on the loop goroutine as it exits: it fails every pending
// proposal and releases what the loop owns.
func (n *Node) shutdown() {
	n.active.Store(false)
	n.lead.Store(0)
	if n.ticker != nil {
		n.ticker.Stop()
	}
	if n.electTimer != nil {
		n.electTimer.Stop()
	}
	cause := ErrClosed
	if n.err != nil {
		cause = fmt.Errorf("%w: %w", ErrClosed, n.err)
	}
	n.failWaiters(cause)
	// Proposals queued after this are answered by their callers seeing
	// donec closed (see wait).
	for len(n.propc) > 0 {
		p := <-n.propc
		n.finish(p, proposeResult{err: cause})
	}
	if err := n.st.close(); err != nil && n.err == nil {
		n.err = err
	}
	close(n.donec)
	n.subsMu.Lock()
	n.subsClosed = true
	for _, c := range n.subs {
		close(c)
	}
	n.subs = nil
	n.subsMu.Unlock()
}

func (n *Node) propose(p *proposal) {
	if !n.active.Load() {
		n.finish(p, proposeResult{err: ErrNotController})
		return
	}
	n.seq++
	p.seq = n.seq
	setEntryHeader(p.data, entryHeader{node: n.cfg.NodeID, incarnation: n.incarnation, seq: p.seq})
	if err := n.rn.Propose(p.data); err != nil {
		n.finish(p, proposeResult{err: fmt.Errorf("%w: %w", ErrProposalDropped, err)})
		return
	}
	n.waiters = append(n.waiters, p)
}

// notAppendOrHeartbeat says m is not one a leader may send before its own
// write (handleReady).
func notAppendOrHeartbeat(m *pb.Message) bool {
	t := m.GetType()
	return t != pb.MessageType_MsgApp && t != pb.MessageType_MsgHeartbeat
}

func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	lostLead := false
	if rd.SoftState != nil {
		n.lead.Store(rd.SoftState.Lead)
		isLeader := rd.SoftState.RaftState == raft.StateLeader
		if isLeader && !n.raftLeader {
			n.leaderTerm = n.rn.BasicStatus().GetTerm()
			clear(n.peerSeen)
			clear(n.peerCaughtUp)
		}
		lostLead = n.raftLeader && !isLeader
		n.raftLeader = isLeader
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.st.applySnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	// A leader sends its appends and heartbeats before its own write, so
	// that the followers' append and fsync overlap the leader's (Raft
	// thesis 10.2.1, as etcd's server does): a commit waits for the
	// slower of the two fsyncs and a round trip, not for the leader's
	// fsync, the round trip and the follower's in turn. It is safe
	// because etcd raft counts the leader's own copy only at Advance,
	// after this write, and steps the followers' answers after it too.
	// Every other message (an acknowledgement, a vote) goes once what it
	// vouches for is durable.
	early, late := rd.Messages, []*pb.Message(nil)
	if !n.raftLeader || !raft.IsEmptySnap(rd.Snapshot) {
		early, late = nil, rd.Messages
	} else if !slices.ContainsFunc(rd.Messages, notAppendOrHeartbeat) {
		// All early: the common case, no copy.
	} else {
		early = nil
		for _, m := range rd.Messages {
			if notAppendOrHeartbeat(m) {
				late = append(late, m)
			} else {
				early = append(early, m)
			}
		}
	}
	if len(early) > 0 && n.cfg.Transport != nil {
		n.cfg.Transport.Send(early)
	}
	if err := n.st.append(rd.HardState, rd.Entries, rd.MustSync); err != nil {
		return err
	}
	if len(late) > 0 && n.cfg.Transport != nil {
		n.cfg.Transport.Send(late)
	}

	prev := n.image.Load()
	img := prev
	if !raft.IsEmptySnap(rd.Snapshot) {
		snapImg, err := image.DecodeImage(rd.Snapshot.GetData())
		if err != nil {
			return fmt.Errorf("install snapshot: %w", err)
		}
		if snapImg.ClusterID != prev.ClusterID {
			return fmt.Errorf("install snapshot: it belongs to cluster %q, not %q", snapImg.ClusterID, prev.ClusterID)
		}
		img = snapImg
		n.confState = proto.Clone(rd.Snapshot.GetMetadata().GetConfState()).(*pb.ConfState)
		n.snapIndex = rd.Snapshot.GetMetadata().GetIndex()
		n.publishMembers()
		n.snapsIn.Add(1)
		n.log.Info("installed metadata snapshot from the leader", "offset", n.snapIndex)
	}
	for _, e := range rd.CommittedEntries {
		var err error
		if img, err = n.applyEntry(img, e); err != nil {
			return err
		}
	}
	if img != prev {
		n.image.Store(img)
		n.notify()
	}
	for _, r := range n.resolved {
		n.finish(r.p, r.res)
	}
	clear(n.resolved)
	n.resolved = n.resolved[:0]
	if lostLead {
		n.active.Store(false)
		n.signalActive()
		n.log.Info("no longer the active controller", "leader", n.lead.Load())
		n.failWaiters(ErrNotController)
	}
	if img.Offset() >= n.snapIndex+n.cfg.SnapshotEvery {
		var keepFrom uint64
		if img.Offset() > n.cfg.SnapshotMargin {
			keepFrom = img.Offset() - n.cfg.SnapshotMargin
		}
		if err := n.st.createSnapshot(img.Offset(), keepFrom, n.confState, image.EncodeImage(img)); err != nil {
			return err
		}
		n.log.Info("wrote metadata snapshot", "offset", img.Offset())
		n.snapIndex = img.Offset()
	}
	n.rn.Advance(rd)
	return nil
}

func (n *Node) applyEntry(img *image.Image, e *pb.Entry) (*image.Image, error) {
	idx := e.GetIndex()
	if n.raftLeader && e.GetTerm() == n.leaderTerm && !n.active.Load() {
		// The first entry of the leader's own term has applied, so the image
		// now holds every entry of earlier terms: it is safe to validate
		// requests against it.
		n.activeTerm.Store(n.leaderTerm)
		n.active.Store(true)
		n.signalActive()
		n.log.Debug("became the active controller", "term", n.leaderTerm, "offset", idx)
	}
	switch e.GetType() {
	case pb.EntryConfChange:
		cc := new(pb.ConfChange)
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return img, fmt.Errorf("entry %d: decode conf change: %w", idx, err)
		}
		n.confState = n.rn.ApplyConfChange(cc)
		n.publishMembers()
		return img.WithOffset(idx), nil
	case pb.EntryConfChangeV2:
		cc := new(pb.ConfChangeV2)
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return img, fmt.Errorf("entry %d: decode conf change: %w", idx, err)
		}
		n.confState = n.rn.ApplyConfChange(cc)
		n.publishMembers()
		return img.WithOffset(idx), nil
	}
	if len(e.GetData()) == 0 {
		return img.WithOffset(idx), nil
	}
	h, recs, err := decodeEntry(e.GetData())
	if err != nil {
		// Every node skips the same entry, so the images stay equal.
		n.log.Error("skipping undecodable metadata entry", "index", idx, "err", err)
		return img.WithOffset(idx), nil
	}
	next, err := img.Apply(idx, recs...)
	if err != nil {
		n.log.Warn("rejected metadata entry", "index", idx, "err", err)
		next = img.WithOffset(idx)
	}
	if h.node == n.cfg.NodeID && h.incarnation == n.incarnation {
		n.resolve(h.seq, proposeResult{img: next, err: err})
	}
	return next, nil
}

// resolve answers the waiter for seq. Raft keeps a leader's proposals in
// order, so waiters before it whose entries never applied were dropped.
func (n *Node) resolve(seq uint64, res proposeResult) {
	for len(n.waiters) > 0 && n.waiters[0].seq <= seq {
		p := n.waiters[0]
		n.waiters[0] = nil
		n.waiters = n.waiters[1:]
		if p.seq == seq {
			n.resolved = append(n.resolved, resolution{p, res})
		} else {
			n.resolved = append(n.resolved, resolution{p, proposeResult{err: ErrProposalDropped}})
		}
	}
}

func (n *Node) failWaiters(err error) {
	for _, p := range n.waiters {
		n.finish(p, proposeResult{err: err})
	}
	n.waiters = nil
}

func (n *Node) notify() {
	n.subsMu.Lock()
	defer n.subsMu.Unlock()
	for _, c := range n.subs {
		select {
		case c <- struct{}{}:
		default: // already signalled; the reader will see the newest image
		}
	}
}

// Image returns the newest applied image.
func (n *Node) Image() *image.Image { return n.image.Load() }

// Changes returns a channel that receives a value after one or more new
// images are published, and is closed when the node stops. Signals
// coalesce: a reader compares its last image with Image() (see DiffTopics)
// rather than counting signals. Each caller gets its own channel.
func (n *Node) Changes() <-chan struct{} {
	c := make(chan struct{}, 1)
	n.subsMu.Lock()
	defer n.subsMu.Unlock()
	if n.subsClosed {
		close(c)
		return c
	}
	n.subs = append(n.subs, c)
	return c
}

// ActiveChanges returns a channel that receives a value after this node
// becomes the active controller or stops being it (signals coalesce; the
// reader checks IsLeader and ActiveTerm). Unlike Changes it does not wake
// its reader for every image, as each CreateTopics makes one. There is
// one channel for all callers: it is for the controller goroutine.
func (n *Node) ActiveChanges() <-chan struct{} { return n.activec }

// signalActive tells the reader of ActiveChanges that the active flag moved.
func (n *Node) signalActive() {
	select {
	case n.activec <- struct{}{}:
	default: // already signalled
	}
}

// IsLeader reports whether this node is the active controller: the raft
// leader, with its image caught up to its own term.
func (n *Node) IsLeader() bool { return n.active.Load() }

// LeaderID returns the raft ID of the current leader (the active
// controller's node ID), if known.
func (n *Node) LeaderID() (uint64, bool) {
	id := n.lead.Load()
	return id, id != 0
}

// ActiveTerm returns the raft term in which this node last became the
// active controller, 0 if it never has.
func (n *Node) ActiveTerm() uint64 { return n.activeTerm.Load() }

// NodeID returns this node's raft ID.
func (n *Node) NodeID() uint64 { return n.cfg.NodeID }

// Done is closed when the Ready loop has stopped, after Close or a storage
// failure (see Err).
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err returns why the Ready loop stopped on its own (a failed write or
// fsync), or nil.
func (n *Node) Err() error {
	select {
	case <-n.donec:
		return n.err
	default:
		return nil
	}
}

// Propose appends recs to the metadata log as one entry and returns the
// image just after that entry applied. It fails with ErrNotController
// unless this node is the active controller, with the apply error if the
// records do not apply to the image (the entry is then a no-op everywhere),
// or with ctx's error. After a ctx error the entry may still commit.
func (n *Node) Propose(ctx context.Context, recs ...image.Record) (*image.Image, error) {
	p, err := n.Submit(ctx, recs...)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is an entry Submit queued whose commit is not yet known.
type Pending struct {
	n     *Node
	p     *proposal
	start time.Time
}

// Submit queues recs as one entry, as Propose does, without waiting for
// the entry to commit: the caller waits with Wait. Entries submitted one
// after the other keep their order in the log, and those queued while the
// Ready loop writes share its next fsync, which is what lets a caller
// validate several requests in order and wait for their commits
// elsewhere.
func (n *Node) Submit(ctx context.Context, recs ...image.Record) (*Pending, error) {
	p := &proposal{done: make(chan proposeResult, 1), start: time.Now()}
	if err := n.submit(ctx, p, recs); err != nil {
		return nil, err
	}
	return &Pending{n: n, p: p, start: p.start}, nil
}

// SubmitFunc queues recs as one entry, as Submit does, and runs then on
// the Ready loop with what Wait would return once the entry has applied
// or failed, without a goroutine waiting for it: a CreateTopics answer
// then wakes one goroutine less on its way. then must not block (it
// holds up the metadata log). It runs exactly once unless SubmitFunc
// returns an error, or the node stops (Done) with the entry still queued.
func (n *Node) SubmitFunc(ctx context.Context, then func(*image.Image, error), recs ...image.Record) error {
	return n.submit(ctx, &proposal{then: then, start: time.Now()}, recs)
}

// Wait returns the image just after the entry applied, or why it did not:
// ErrNotController, ErrProposalDropped, ErrClosed, the apply error, or
// ctx's error (the entry may still commit then). Only one Wait may see
// the result.
func (pp *Pending) Wait(ctx context.Context) (*image.Image, error) {
	r := pp.n.wait(ctx.Done(), pp.p)
	if r.err == nil && r.img == nil {
		return nil, ctx.Err()
	}
	if r.err == nil {
		pp.n.commits.Add(1)
		pp.n.commitNanos.Add(int64(time.Since(pp.start)))
	}
	return r.img, r.err
}

// CommitLatency returns how many proposals of this node committed and
// the time they took in all, from proposed to committed and applied
// (Kafka's raft-metrics commit-latency).
func (n *Node) CommitLatency() (uint64, time.Duration) {
	return uint64(n.commits.Load()), time.Duration(n.commitNanos.Load())
}

// wait returns p's result, or a zero result if cancel closes first. The loop
// answers every proposal it took before it closes donec, so once donec is
// closed a missing answer means the proposal was never taken.
func (n *Node) wait(cancel <-chan struct{}, p *proposal) proposeResult {
	select {
	case r := <-p.done:
		return r
	case <-cancel:
		return proposeResult{}
	case <-n.donec:
		select {
		case r := <-p.done:
			return r
		default:
			return proposeResult{err: ErrClosed}
		}
	}
}

// submit encodes recs into p and queues it for the Ready loop.
func (n *Node) submit(ctx context.Context, p *proposal, recs []image.Record) error {
	if len(recs) == 0 {
		return errors.New("propose: no records")
	}
	p.data = encodeEntry(recs)
	if len(p.data) > maxEntryBytes {
		return fmt.Errorf("propose: entry of %d bytes exceeds %d", len(p.data), maxEntryBytes)
	}
	select {
	case <-n.donec:
		return ErrClosed
	default:
	}
	select {
	case n.propc <- p:
		return nil
	case <-n.donec:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Step hands the node a message received from another node.
func (n *Node) Step(ctx context.Context, m *pb.Message) error {
	select {
	case n.recvc <- m:
		return nil
	case <-n.donec:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the node. The active controller first hands raft
// leadership to the most caught-up other voter, if there is one, so that
// the quorum does not wait an election timeout for a new controller. Then
// Close stops the Ready loop, fails pending proposals with ErrClosed and
// closes the log. It returns the error that stopped the loop, if any. A
// transport passed in Config stays open: close it after the node.
func (n *Node) Close() error { return n.close(true) }

// Stop is Close without the leadership handover: the other voters notice
// this node gone only after an election timeout, as after a crash.
func (n *Node) Stop() error { return n.close(false) }

// SnapshotsInstalled returns how many snapshots this node has installed
// from a leader since it started, rather than catching up from the log.
func (n *Node) SnapshotsInstalled() uint64 { return n.snapsIn.Load() }

// FirstIndex returns the raft index of the oldest entry the log still
// holds: snapshots compact what is below.
func (n *Node) FirstIndex() uint64 {
	i, _ := n.st.FirstIndex()
	return i
}

func (n *Node) close(transfer bool) error {
	if transfer {
		n.transferLeadership()
	}
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.donec
	n.bg.Wait()
	if n.attachedTo != nil {
		n.attachedTo.detach(n)
	}
	return n.err
}
