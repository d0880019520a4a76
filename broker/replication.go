package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Replication, leader side. Followers fetch from the leader with the Fetch
// API carrying their replica id; each fetch tells the leader how far the
// follower's log reaches (its fetch offset). The high watermark is the
// smallest log end offset in the ISR, and only rises. A follower that has
// not caught up to the leader's log end for replica.lag.time.max.ms leaves
// the ISR; one that reaches the high watermark joins it again. ISR changes
// go to the controller (AlterPartition), which commits them to the
// metadata log; the leader uses the new ISR once the controller answers.
//
// KIP-903: each fetch names the follower's broker epoch (the epoch of its
// current registration, which a restart renews). The leader records it,
// refuses fetches from an incarnation older than the registered one, adds
// a follower only when the epoch it fetched under is the registered one,
// and names every member's epoch in its ISR changes, so that the
// controller refuses a member whose fetches came from an earlier
// incarnation (one that may have lost its disk since).

// replicaState is what the leader knows of one follower.
type replicaState struct {
	brokerEpoch          int64     // the broker epoch its last fetch named, -1 if none or unknown
	leo                  int64     // the follower's log end offset, from its last fetch
	lastFetch            time.Time // when it last fetched
	lastFetchLeaderLEO   int64     // the leader's log end offset at that fetch
	lastCaughtUp         time.Time // when it last had everything the leader had
	pendingISRChangeSent bool
	// joining says an AlterPartition adding this follower to the ISR may
	// have committed: the high watermark counts it until an answer or a
	// newer partition epoch settles it (Kafka's maximal ISR, KIP-497).
	joining        bool
	lastISRAttempt time.Time // when its last ISR change was asked for
}

// assignment is a partition's replicas, ISR and epochs from the metadata
// image, as this node last applied them.
type assignment struct {
	replicas       []int32
	isr            []int32
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
}

// isLeader reports whether this node leads the partition.
func (p *partition) isLeader(self int32) bool {
	a := p.assign.Load()
	return a != nil && a.leader == self
}

// applyAssignment takes a partition's new replicas, ISR and epochs from
// the image. A new leader epoch resets what the leader knew of followers
// and, for a follower, what it knew of producers: a leader rebuilds
// producer state from its log when it needs it.
func (s *Server) applyAssignment(p *partition, pi image.PartitionImage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.assign.Load()
	if prev != nil && pi.PartitionEpoch < prev.partitionEpoch {
		// An image older than the controller's answer to an ISR change
		// (alterISR applies that at once) must not undo it: after a
		// reassignment moved the leadership away, it would make this node
		// lead again.
		return
	}
	a := &assignment{replicas: pi.Replicas, isr: pi.ISR, leader: pi.Leader, leaderEpoch: pi.LeaderEpoch, partitionEpoch: pi.PartitionEpoch}
	p.assign.Store(a)
	p.leaderEpoch.Store(pi.LeaderEpoch)
	if prev != nil && prev.leader == s.cfg.NodeID && pi.Leader != s.cfg.NodeID {
		// Produces waiting for followers answer NOT_LEADER_OR_FOLLOWER
		// now, as Kafka completes its delayed produces when a leader
		// becomes a follower (see partition.demotions).
		p.demotions.Add(1)
		defer p.wakeWaiters()
	}
	now := s.now()
	if prev != nil && prev.leaderEpoch == pi.LeaderEpoch && prev.leader == pi.Leader {
		if pi.PartitionEpoch > prev.partitionEpoch {
			// Every ISR change in flight was made at an older epoch: it
			// committed (and pi shows it) or can no longer commit.
			for _, f := range p.followers {
				f.joining = false
			}
		}
		// A reassignment adds replicas without a new leader epoch: the
		// leader starts tracking them (and forgets removed ones) now.
		for _, r := range pi.Replicas {
			if r != s.cfg.NodeID && p.followers[r] == nil {
				p.followers[r] = &replicaState{brokerEpoch: -1, leo: -1, lastCaughtUp: now}
			}
		}
		for r := range p.followers {
			if !slices.Contains(pi.Replicas, r) {
				delete(p.followers, r)
			}
		}
		p.maybeAdvanceHighWatermarkLocked()
		return
	}
	p.followers = make(map[int32]*replicaState)
	for _, r := range pi.Replicas {
		if r != s.cfg.NodeID {
			// A new leader starts its followers' clocks now, as Kafka does,
			// so none is dropped from the ISR before it could fetch.
			p.followers[r] = &replicaState{brokerEpoch: -1, leo: -1, lastCaughtUp: now}
		}
	}
	if pi.Leader != s.cfg.NodeID {
		p.producers = nil
		p.txnReady.Store(false)
	}
	p.maybeAdvanceHighWatermarkLocked()
}

// maybeAdvanceHighWatermarkLocked raises a leader's high watermark to the
// smallest log end offset in the ISR. The caller holds p.mu.
func (p *partition) maybeAdvanceHighWatermarkLocked() {
	a := p.assign.Load()
	if a == nil || a.leader != p.self {
		return
	}
	hw := p.log.LogEndOffset()
	for _, r := range a.isr {
		if r == p.self {
			continue
		}
		f := p.followers[r]
		if f == nil {
			return // an ISR member we have not heard from yet holds it
		}
		hw = min(hw, f.leo)
	}
	// A follower whose joining the ISR may have committed counts as a
	// member (Kafka's maximal ISR, KIP-497): the controller may make it
	// the leader, when that completes a reassignment, before this node
	// hears of it, so nothing it lacks may be committed meanwhile.
	for r, f := range p.followers {
		if f.joining && !slices.Contains(a.isr, r) {
			hw = min(hw, f.leo)
		}
	}
	if hw > p.hw.Load() {
		p.setHighWatermarkLocked(hw)
	}
}

// setHighWatermarkLocked publishes a new high watermark and wakes those
// waiting for it.
func (p *partition) setHighWatermarkLocked(hw int64) {
	p.hw.Store(hw)
	p.log.SetHighWatermark(hw)
	p.updateLastStableOffsetLocked()
	p.wakeWaiters()
}

// followerFetched records a follower's fetch at offset (its log end),
// made under brokerEpoch (-1 when the fetch does not say), moves the high
// watermark, and asks the controller to add the follower to the ISR when
// it has caught up.
func (s *Server) followerFetched(p *partition, replica int32, brokerEpoch int64, offset int64) error {
	if brokerEpoch != -1 {
		// As Kafka: a fetch from an incarnation older than the registered
		// one is stale (sent before a restart, delivered after it).
		if b, ok := s.meta.Image().Broker(replica); ok && b.Epoch > brokerEpoch {
			return fmt.Errorf("%w: broker %d fetched at broker epoch %d, registered at %d", kerr.NotLeaderForPartition, replica, brokerEpoch, b.Epoch)
		}
	}
	p.mu.Lock()
	a := p.assign.Load()
	if a == nil || a.leader != s.cfg.NodeID {
		p.mu.Unlock()
		return kerr.NotLeaderForPartition
	}
	f := p.followers[replica]
	if f == nil || !slices.Contains(a.replicas, replica) {
		p.mu.Unlock()
		return fmt.Errorf("%w: broker %d is not a replica", kerr.NotLeaderForPartition, replica)
	}
	now := s.now()
	leo := p.log.LogEndOffset()
	if brokerEpoch != f.brokerEpoch && !f.lastFetch.IsZero() {
		// Another incarnation: what the previous one fetched says nothing
		// of this one's log, so it starts as if it had never fetched and
		// has not been caught up since.
		f.lastFetch, f.lastFetchLeaderLEO, f.lastCaughtUp = time.Time{}, 0, time.Time{}
	}
	f.brokerEpoch = brokerEpoch
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case offset >= f.lastFetchLeaderLEO && !f.lastFetch.IsZero():
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.lastFetchLeaderLEO = offset, now, leo
	p.maybeAdvanceHighWatermarkLocked()
	// A fenced broker (restarting, not yet heartbeating), or one whose
	// fetch names another registration than the image's, cannot join the
	// ISR: the controller would refuse it. A refused change is asked again
	// no sooner than isrRetry.
	join := !slices.Contains(a.isr, replica) && offset >= p.hw.Load() && !f.pendingISRChangeSent &&
		now.Sub(f.lastISRAttempt) >= isrRetry && s.brokerEligible(replica, brokerEpoch)
	var newISR []controller.ISRMember
	if join {
		f.pendingISRChangeSent = true
		f.joining = true
		f.lastISRAttempt = now
		ids := append(slices.Clone(a.isr), replica)
		slices.Sort(ids)
		// The epochs are taken now, with the fetch that qualified the
		// follower: a later fetch may come from another incarnation.
		newISR = s.isrMembersLocked(p, ids)
	}
	p.mu.Unlock()
	if join {
		s.goTracked(func() { s.alterISR(p, a, newISR) })
	}
	return nil
}

// isrRetry spaces out ISR changes the controller refused.
const isrRetry = 500 * time.Millisecond

// brokerEligible reports whether a broker may be in an ISR: registered,
// not fenced, and (unless epoch is -1, unknown) registered at epoch.
func (s *Server) brokerEligible(id int32, epoch int64) bool {
	b, ok := s.meta.Image().Broker(id)
	return ok && !b.Fenced && (epoch == -1 || b.Epoch == epoch)
}

// ownBrokerEpoch is this broker's registration epoch, or -1 before it has
// registered.
func (s *Server) ownBrokerEpoch() int64 {
	if e := s.epoch.Load(); e > 0 {
		return e
	}
	return -1
}

// isrMembersLocked names each broker of isr with the broker epoch it is
// known at (Kafka's NewIsrWithEpochs): this node's own, a follower's from
// its last fetch, -1 when unknown. The caller holds p.mu.
func (s *Server) isrMembersLocked(p *partition, isr []int32) []controller.ISRMember {
	out := make([]controller.ISRMember, len(isr))
	for i, r := range isr {
		out[i] = controller.ISRMember{ID: r, BrokerEpoch: -1}
		switch f := p.followers[r]; {
		case r == s.cfg.NodeID:
			out[i].BrokerEpoch = s.ownBrokerEpoch()
		case f != nil:
			out[i].BrokerEpoch = f.brokerEpoch
		}
	}
	return out
}

// alterISR asks the controller for a new ISR and, when it agrees, applies
// the answer at once instead of waiting for the metadata log to reach this
// node.
func (s *Server) alterISR(p *partition, a *assignment, members []controller.ISRMember) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	pi, err := s.ctrl.AlterPartition(ctx, p.topicID, p.index, a.leaderEpoch, a.partitionEpoch, members)
	if err == nil {
		// Applied at once, so the high watermark never counts the old
		// ISR alone (applying a newer epoch settles joiners). It may name
		// another leader (a completed reassignment removed this node, as
		// Kafka's NEW_LEADER_ELECTED): this node then stops leading at
		// once rather than when the metadata log reaches it.
		s.log.Info("ISR changed", "topic", p.topic, "partition", p.index, "isr", pi.ISR, "leader", pi.Leader, "partition_epoch", pi.PartitionEpoch)
		s.applyAssignment(p, pi)
	}
	// Only a refusal of a request whose epochs were the controller's
	// settles it: then no earlier request committed either. After a
	// timeout, a lost controller or a stale epoch an earlier change may
	// have committed, so the joiners keep counting until the metadata
	// log shows a newer partition epoch.
	refused := errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.InvalidRequest) ||
		errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
	p.mu.Lock()
	for r, f := range p.followers {
		f.pendingISRChangeSent = false
		if refused && slices.ContainsFunc(members, func(m controller.ISRMember) bool { return m.ID == r }) && !slices.Contains(a.isr, r) {
			f.joining = false
		}
	}
	p.maybeAdvanceHighWatermarkLocked()
	p.mu.Unlock()
	if err != nil && s.ctx.Err() == nil {
		s.log.Debug("ISR change refused", "topic", p.topic, "partition", p.index, "isr", members, "err", err)
	}
}

// isrLoop shrinks the ISR of the partitions this node leads: a follower
// that has not caught up for replica.lag.time.max.ms leaves it.
func (s *Server) isrLoop() {
	lag := time.Duration(s.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	t := time.NewTicker(max(lag/2, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := s.now()
		for _, tp := range s.parts.all() {
			for _, p := range tp.parts {
				if p == nil {
					continue
				}
				p.mu.Lock()
				a := p.assign.Load()
				var out []int32
				if a != nil && a.leader == s.cfg.NodeID {
					for _, r := range a.isr {
						if f := p.followers[r]; f != nil && r != s.cfg.NodeID && now.Sub(f.lastCaughtUp) > lag && !f.pendingISRChangeSent {
							out = append(out, r)
							f.pendingISRChangeSent = true
						}
					}
				}
				var newISR []controller.ISRMember
				if len(out) > 0 {
					newISR = s.isrMembersLocked(p, slices.DeleteFunc(slices.Clone(a.isr), func(r int32) bool { return slices.Contains(out, r) }))
				}
				p.mu.Unlock()
				if len(out) == 0 {
					continue
				}
				s.log.Warn("shrinking ISR: followers lag", "topic", p.topic, "partition", p.index, "lagging", out)
				s.alterISR(p, a, newISR)
			}
		}
	}
}

// inSyncReplicas is the partition's ISR size, for min.insync.replicas.
func (p *partition) inSyncReplicas() int {
	a := p.assign.Load()
	if a == nil {
		return 1
	}
	return len(a.isr)
}
