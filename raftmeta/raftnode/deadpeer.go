package raftnode

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

// A dead leader. A process killed with SIGKILL has its sockets closed by
// its kernel: its peers' connections end at once and the next dial to its
// controller listener is refused (ECONNREFUSED), which a live process,
// however slow, never answers while it listens. The transport reports
// such a refusal (ReportPeerDown). A follower whose leader is refused
// forgets that leader (raft's ForgetLeader): it stays a follower in the
// same term but no longer holds the leader's lease, so it grants
// pre-votes at once instead of after an election timeout. The surviving
// voter ranked first then campaigns at once, the next ones a few ticks
// later if no leader has come by then, so that they do not split the
// vote. A new leader still needs a majority of pre-votes and votes with
// logs no older than its own: raft's safety holds, and a live leader is
// deposed only if a majority of voters found its listener closed.

// deadLeaderStagger is how long each surviving voter, by rank, waits
// after the first one before campaigning for a dead leader's place.
func (n *Node) deadLeaderStagger() time.Duration { return 3 * n.cfg.TickInterval }

// deadLeaderRetry is how often a voter that campaigns for a dead
// leader's place asks again while no leader is known: a voter that has
// not yet seen the refusal ignores the first pre-votes.
func (n *Node) deadLeaderRetry() time.Duration { return n.cfg.TickInterval / 4 }

// peerRefuser is a transport that knows which peers refuse connections.
type peerRefuser interface {
	refusing(id uint64) bool
}

// ReportPeerDown tells the node that node id's controller listener
// refused a connection: its process is gone. It never blocks; the Ready
// loop takes the report on its next turn. Transports call it.
func (n *Node) ReportPeerDown(id uint64) {
	n.reportMu.Lock()
	n.downReports[id] = true
	n.reportMu.Unlock()
	n.signalReports()
	if n.cfg.PeerDown != nil {
		n.cfg.PeerDown(id)
	}
}

// PeerDown reports whether node id's controller listener refused this
// node's latest connection attempt and no connection with it has been
// made since: its process is gone, not merely slow. It is false without
// a TCPTransport.
func (n *Node) PeerDown(id uint64) bool {
	r, ok := n.cfg.Transport.(peerRefuser)
	return ok && r.refusing(id)
}

// leaderDown runs on the loop when node id was reported down: if it is
// this follower's leader, the follower forgets it and starts campaigning
// for its place (see the comment at the top of the file).
func (n *Node) leaderDown(id uint64) {
	st := n.rn.BasicStatus()
	voters := n.confState.GetVoters()
	if st.RaftState != raft.StateFollower || st.Lead != id || !slices.Contains(voters, n.cfg.NodeID) {
		return
	}
	if err := n.rn.ForgetLeader(); err != nil {
		n.log.Warn("cannot forget the dead leader", "leader", id, "err", err)
		return
	}
	rank := 0
	for _, v := range voters {
		if v != id && v < n.cfg.NodeID {
			rank++
		}
	}
	now := time.Now()
	n.electFrom = now.Add(time.Duration(rank) * n.deadLeaderStagger())
	n.electUntil = now.Add(ElectionTicks * n.cfg.TickInterval)
	n.log.Info("the active controller's node refuses connections; electing another", "leader", id, "campaign_in", n.electFrom.Sub(now))
	n.campaignForDeadLeader()
}

// campaignForDeadLeader runs on the loop after leaderDown and whenever
// its timer fires: it campaigns if this node's turn has come and still no
// leader is known, and sets the timer for the next try. It stops once a
// leader is known or an election timeout after the report, when raft's
// own election timer has taken over.
func (n *Node) campaignForDeadLeader() {
	n.electC = nil
	now := time.Now()
	st := n.rn.BasicStatus()
	if n.electUntil.IsZero() || now.After(n.electUntil) || st.Lead != raft.None || st.RaftState == raft.StateLeader {
		n.electUntil = time.Time{}
		return
	}
	wait := n.electFrom.Sub(now)
	if wait <= 0 {
		if err := n.rn.Campaign(); err != nil {
			n.log.Debug("campaign for the dead leader's place", "err", err)
		}
		wait = n.deadLeaderRetry()
	}
	if n.electTimer == nil {
		n.electTimer = time.NewTimer(wait)
	} else {
		n.electTimer.Reset(wait)
	}
	n.electC = n.electTimer.C
}
