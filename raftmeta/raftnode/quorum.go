package raftnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// nodeAttacher is a transport that delivers incoming messages to a node:
// Start binds it to the node before the Ready loop runs, and Close unbinds
// it after the loop stops.
type nodeAttacher interface {
	attach(n *Node) error
	detach(n *Node)
}

// learnerJoiner is a transport that can ask the active controller to add
// this node to the quorum as a learner.
type learnerJoiner interface {
	joinAsLearner(ctx context.Context) error
}

// ReportUnreachable tells raft that the last message to node id could not
// be sent, so that the leader stops streaming entries to it and probes
// instead. It never blocks; the Ready loop takes the report on its next
// turn. Transports call it.
func (n *Node) ReportUnreachable(id uint64) {
	n.reportMu.Lock()
	n.unreachable[id] = true
	n.reportMu.Unlock()
	n.signalReports()
}

// ReportSnapshot tells raft whether a snapshot sent to node id arrived.
// Until it hears, the leader sends that follower nothing more, so a
// transport must report every MsgSnap it takes, sent or dropped. It never
// blocks, and reports are never lost: the last status per node is kept
// until the Ready loop takes it.
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	n.reportMu.Lock()
	n.snapReports[id] = status
	n.reportMu.Unlock()
	n.signalReports()
}

func (n *Node) signalReports() {
	select {
	case n.reportc <- struct{}{}:
	default: // a signal is pending; the loop takes every report at once
	}
}

// applyReports runs on the loop.
func (n *Node) applyReports() {
	n.reportMu.Lock()
	unreachable, snaps, down := n.unreachable, n.snapReports, n.downReports
	n.unreachable, n.snapReports, n.downReports = map[uint64]bool{}, map[uint64]raft.SnapshotStatus{}, map[uint64]bool{}
	n.reportMu.Unlock()
	for id := range down {
		n.leaderDown(id)
	}
	for id := range unreachable {
		n.rn.ReportUnreachable(id)
	}
	for id, st := range snaps {
		n.rn.ReportSnapshot(id, st)
	}
}

// step hands a received message to raft, on the loop, and notes when the
// leader hears from a follower for DescribeQuorum.
func (n *Node) step(m *pb.Message) {
	if err := n.rn.Step(m); err != nil {
		n.log.Debug("dropped raft message", "type", m.GetType(), "from", m.GetFrom(), "err", err)
		return
	}
	if !n.raftLeader {
		return
	}
	switch m.GetType() {
	case pb.MsgAppResp, pb.MsgHeartbeatResp:
	default:
		return
	}
	from := m.GetFrom()
	now := time.Now()
	n.peerSeen[from] = now
	last, _ := n.st.LastIndex()
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == from && pr.Match >= last {
			n.peerCaughtUp[from] = now
		}
	})
}

// onLoop runs fn on the Ready loop, which drains raft's Ready after it.
func (n *Node) onLoop(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case n.loopc <- func() { fn(); close(done) }:
	case <-n.donec:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// The loop runs what it took before anything else, so done closes.
	<-done
	return nil
}

// publishMembers makes the loop's configuration readable by other
// goroutines.
func (n *Node) publishMembers() {
	n.members.Store(proto.Clone(n.confState).(*pb.ConfState))
}

// Voters returns the IDs of the quorum's voters, as of the newest applied
// configuration.
func (n *Node) Voters() []uint64 {
	return slices.Clone(n.members.Load().GetVoters())
}

// Learners returns the IDs of the learners (observers: brokers that are
// not controllers), as of the newest applied configuration.
func (n *Node) Learners() []uint64 {
	return slices.Clone(n.members.Load().GetLearners())
}

// isMember reports whether id is a voter or learner in cs.
func isMember(cs *pb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id) ||
		slices.Contains(cs.GetVotersOutgoing(), id) || slices.Contains(cs.GetLearnersNext(), id)
}

// AddLearner adds node id to the quorum as a learner: it receives and
// applies the committed log but never votes or leads. It succeeds at once
// if id is already a member, fails with ErrNotController unless this node
// is the active controller, and otherwise returns once the configuration
// change has applied here.
func (n *Node) AddLearner(ctx context.Context, id uint64) error {
	if id == 0 {
		return errors.New("add learner: node ID 0 is reserved")
	}
	for {
		member := false
		var err error
		if lerr := n.onLoop(ctx, func() {
			if !n.active.Load() {
				err = ErrNotController
				return
			}
			if isMember(n.confState, id) {
				member = true
				return
			}
			// raft turns the proposal into an empty entry if another
			// change is pending; the wait below then times out and the
			// change is proposed again.
			err = n.rn.ProposeConfChange(&pb.ConfChange{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(id)})
		}); lerr != nil {
			return fmt.Errorf("add learner %d: %w", id, lerr)
		}
		if member {
			return nil
		}
		if err != nil {
			return fmt.Errorf("add learner %d: %w", id, err)
		}
		n.log.Info("adding a learner to the metadata quorum", "learner", id)
		if n.waitMember(ctx, id, 20*n.cfg.TickInterval) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("add learner %d: %w", id, ctx.Err())
		}
	}
}

// waitMember polls the published configuration until id is in it, for at
// most d.
func (n *Node) waitMember(ctx context.Context, id uint64, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		if isMember(n.members.Load(), id) {
			return true
		}
		select {
		case <-poll.C:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		case <-n.donec:
			return false
		}
	}
}

// joinAsLearner runs on a node that is not a voter until the leader has
// added it as a learner and the change has reached this node.
func (n *Node) joinAsLearner(j learnerJoiner) {
	defer n.bg.Done()
	if isMember(n.members.Load(), n.cfg.NodeID) {
		return // joined before a restart
	}
	backoff := 20 * time.Millisecond
	for !isMember(n.members.Load(), n.cfg.NodeID) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		go func() {
			select {
			case <-n.stopc:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := j.joinAsLearner(ctx)
		if err == nil {
			// The leader has the change; wait for it to arrive here.
			n.waitMember(ctx, n.cfg.NodeID, 5*time.Second)
		}
		cancel()
		if isMember(n.members.Load(), n.cfg.NodeID) {
			break
		}
		if err != nil {
			n.log.Debug("joining the metadata quorum as a learner", "err", err)
		}
		select {
		case <-n.stopc:
			return
		case <-n.donec:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	n.log.Info("joined the metadata quorum as a learner")
}

// transferLeadership hands raft leadership to the most caught-up other
// voter and waits, for at most two election timeouts, until another node
// leads. It does nothing unless this node leads and has another voter.
func (n *Node) transferLeadership() {
	var target uint64
	if err := n.onLoop(context.Background(), func() {
		if !n.raftLeader {
			return
		}
		target = n.transferee()
		if target != 0 {
			n.rn.TransferLeader(target)
		}
	}); err != nil || target == 0 {
		return
	}
	n.log.Info("transferring metadata leadership before shutdown", "to", target)
	timeout := 2 * ElectionTicks * n.cfg.TickInterval
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if lead := n.lead.Load(); lead != 0 && lead != n.cfg.NodeID {
			return
		}
		select {
		case <-n.donec:
			return
		case <-time.After(n.cfg.TickInterval / 2):
		}
	}
	n.log.Warn("leadership transfer did not complete", "to", target, "timeout", timeout)
}

// transferee picks the recently active voter with the longest matched log,
// or 0. It runs on the loop of the leader.
func (n *Node) transferee() uint64 {
	st := n.rn.Status()
	var best uint64
	var bestMatch uint64
	for _, id := range slices.Sorted(slices.Values(n.confState.GetVoters())) {
		pr, ok := st.Progress[id]
		if id == n.cfg.NodeID || !ok || pr.IsLearner || !pr.RecentActive {
			continue
		}
		if best == 0 || pr.Match > bestMatch {
			best, bestMatch = id, pr.Match
		}
	}
	return best
}

// QuorumInfo is what Kafka's DescribeQuorum (key 55) reports about the
// metadata partition. Offsets are Kafka offsets of the metadata log: the
// entry at raft index i is offset i-1, so a log end offset or high
// watermark is the raft index of the last entry it covers.
type QuorumInfo struct {
	// LeaderID is the active controller's node ID, -1 if unknown.
	LeaderID int32
	// LeaderEpoch is the raft term.
	LeaderEpoch int32
	// HighWatermark is the commit index.
	HighWatermark int64
	// Voters and Observers (learners) are sorted by ID. Only the leader
	// knows the others' progress: elsewhere their offsets and times are -1.
	Voters    []ReplicaInfo
	Observers []ReplicaInfo
}

// ReplicaInfo is one replica's progress in QuorumInfo. Times are Unix
// milliseconds, -1 when unknown.
type ReplicaInfo struct {
	ID                    int32
	LogEndOffset          int64
	LastFetchTimestamp    int64
	LastCaughtUpTimestamp int64
}

// QuorumInfo returns the quorum's state as this node sees it; the leader's
// view is the one DescribeQuorum answers with. After Close it returns the
// zero QuorumInfo with LeaderID -1.
func (n *Node) QuorumInfo() QuorumInfo {
	info := QuorumInfo{LeaderID: -1}
	_ = n.onLoop(context.Background(), func() { info = n.quorumInfo() })
	return info
}

func (n *Node) quorumInfo() QuorumInfo {
	st := n.rn.Status()
	info := QuorumInfo{LeaderID: -1, LeaderEpoch: int32(st.GetTerm()), HighWatermark: int64(st.GetCommit())}
	if st.Lead != 0 {
		info.LeaderID = int32(st.Lead)
	}
	last, _ := n.st.LastIndex()
	now := time.Now()
	replica := func(id uint64) ReplicaInfo {
		r := ReplicaInfo{ID: int32(id), LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}
		switch {
		case id == n.cfg.NodeID:
			r.LogEndOffset = int64(last)
			if n.raftLeader {
				// Kafka reports the leader as fetching and caught up now.
				r.LastFetchTimestamp, r.LastCaughtUpTimestamp = now.UnixMilli(), now.UnixMilli()
			}
		case n.raftLeader:
			if pr, ok := st.Progress[id]; ok {
				r.LogEndOffset = int64(pr.Match)
			}
			if t, ok := n.peerSeen[id]; ok {
				r.LastFetchTimestamp = t.UnixMilli()
			}
			if t, ok := n.peerCaughtUp[id]; ok {
				r.LastCaughtUpTimestamp = t.UnixMilli()
			}
		}
		return r
	}
	for _, id := range slices.Sorted(slices.Values(n.confState.GetVoters())) {
		info.Voters = append(info.Voters, replica(id))
	}
	for _, id := range slices.Sorted(slices.Values(n.confState.GetLearners())) {
		info.Observers = append(info.Observers, replica(id))
	}
	return info
}
