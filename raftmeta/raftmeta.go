// Package raftmeta runs a member of Gregor's metadata quorum, Kafka's
// KRaft: a raft node that keeps the replicated metadata log and its image
// (package raftnode) with the controller that writes it (package
// controller), started and stopped together and reachable from the other
// nodes over one transport.
//
// The work is layered in packages below this one, each importing only
// those under it:
//
//	raftmeta             Start: a node with its controller
//	raftmeta/controller  the controller state machine, its API, and the
//	                     client and table of rpcs that reach it from any node
//	raftmeta/raftnode    the raft node, its log on disk and the TCP transport
//	                     between nodes (raft messages and generic rpcs)
//	raftmeta/image       the metadata image, its records and their encoding
//	raftmeta/internal/compact  the binary encoding they all share
package raftmeta

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
	"github.com/gregorbroker/gregor/vfs"
)

// Config configures a Node: the fields of raftnode.Config that a caller
// sets, with the controller's settings.
type Config struct {
	// NodeID is this node's raft ID (Kafka's node.id); it must not be 0.
	NodeID uint64
	// Voters are the IDs of the controller quorum (see raftnode.Config).
	Voters []uint64
	// Observer marks a node that is never a voter (process.roles=broker).
	Observer bool
	// Dir is the metadata log dir; the log itself goes in
	// Dir/__cluster_metadata-0.
	Dir string
	// FS is the filesystem, vfs.Default if nil.
	FS vfs.FS
	// Transport sends messages to other nodes; nil for a single node. A
	// *raftnode.TCPTransport also serves the controller's rpcs.
	Transport raftnode.Transport
	// Logger receives the node's logs, slog.Default() if nil.
	Logger *slog.Logger
	// ClusterID is written into a new log and checked against an existing
	// one. Empty takes the stored ID, or a random one for a new log.
	ClusterID string
	// SnapshotEvery, TickInterval, Ticks and SnapshotMargin are as in
	// raftnode.Config.
	SnapshotEvery  uint64
	TickInterval   time.Duration
	Ticks          <-chan time.Time
	SnapshotMargin uint64
	// Controller configures the controller's timers and elections.
	Controller controller.Config
}

// Node is one member of the metadata quorum with its controller. The raft
// node's methods (Image, Changes, Propose, IsLeader, ...) are promoted.
type Node struct {
	*raftnode.Node
	ctrl *controller.Controller
	// serving is the controller the transport hands rpcs to: nil until it
	// runs and after Close, when they answer NOT_CONTROLLER.
	serving atomic.Pointer[controller.Controller]
}

// Start opens (or creates) the metadata log in cfg.Dir, replays it, and
// starts the raft node and its controller. A node that is the only voter
// is the active controller when Start returns.
func Start(cfg Config) (*Node, error) {
	n := &Node{}
	rn, err := raftnode.Start(raftnode.Config{
		NodeID:         cfg.NodeID,
		Voters:         cfg.Voters,
		Observer:       cfg.Observer,
		Dir:            cfg.Dir,
		FS:             cfg.FS,
		Transport:      cfg.Transport,
		Logger:         cfg.Logger,
		ClusterID:      cfg.ClusterID,
		SnapshotEvery:  cfg.SnapshotEvery,
		TickInterval:   cfg.TickInterval,
		Ticks:          cfg.Ticks,
		SnapshotMargin: cfg.SnapshotMargin,
		Handlers:       controller.Handlers(n.serving.Load),
		RPCPeerGone: func(from uint64) {
			if c := n.serving.Load(); c != nil {
				c.PeerGone(from)
			}
		},
		// A refused connection is a closed one that will not come back.
		PeerDown: func(id uint64) {
			if c := n.serving.Load(); c != nil {
				c.PeerGone(id)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	n.Node = rn
	n.ctrl = controller.New(rn, logger, cfg.Controller)
	n.serving.Store(n.ctrl)
	return n, nil
}

// Controller returns the node's controller. It serves requests only while
// the node is the active controller; Close stops it.
func (n *Node) Controller() *controller.Controller { return n.ctrl }

// Close stops the controller, then the raft node (see raftnode.Node.Close:
// the active controller first hands leadership to another voter). A
// transport passed in Config stays open: close it after the node.
func (n *Node) Close() error {
	n.ctrl.Close()
	err := n.Node.Close()
	n.serving.Store(nil)
	return err
}

// Stop is Close without the leadership handover: the other voters notice
// this node gone only after an election timeout, as after a crash.
func (n *Node) Stop() error {
	n.ctrl.Close()
	err := n.Node.Stop()
	n.serving.Store(nil)
	return err
}

var _ controller.Local = (*Node)(nil)
