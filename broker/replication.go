package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/internal/partition"
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

// applyAssignment takes a partition's new replicas, ISR and epochs from
// the image. A new leader epoch resets what the leader knew of followers
// and, for a follower, what it knew of producers: a leader rebuilds
// producer state from its log when it needs it.
func (s *Server) applyAssignment(p *partition.Partition, pi image.PartitionImage) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	prev := p.Assign.Load()
	if prev != nil && pi.PartitionEpoch < prev.PartitionEpoch {
		// An image older than the controller's answer to an ISR change
		// (alterISR applies that at once) must not undo it: after a
		// reassignment moved the leadership away, it would make this node
		// lead again.
		return
	}
	a := &partition.Assignment{Replicas: pi.Replicas, ISR: pi.ISR, Leader: pi.Leader, LeaderEpoch: pi.LeaderEpoch, PartitionEpoch: pi.PartitionEpoch}
	p.Assign.Store(a)
	p.LeaderEpoch.Store(pi.LeaderEpoch)
	if prev != nil && prev.Leader == s.cfg.NodeID && pi.Leader != s.cfg.NodeID {
		// Produces waiting for followers answer NOT_LEADER_OR_FOLLOWER
		// now, as Kafka completes its delayed produces when a leader
		// becomes a follower (see partition.Partition.Demotions).
		p.Demotions.Add(1)
		defer p.WakeWaiters()
	}
	now := s.now()
	if prev != nil && prev.LeaderEpoch == pi.LeaderEpoch && prev.Leader == pi.Leader {
		if pi.PartitionEpoch > prev.PartitionEpoch {
			// Every ISR change in flight was made at an older epoch: it
			// committed (and pi shows it) or can no longer commit.
			for _, f := range p.Followers {
				f.Joining = false
			}
		}
		// A reassignment adds replicas without a new leader epoch: the
		// leader starts tracking them (and forgets removed ones) now.
		for _, r := range pi.Replicas {
			if r != s.cfg.NodeID && p.Followers[r] == nil {
				p.Followers[r] = &partition.ReplicaState{BrokerEpoch: -1, LEO: -1, LastCaughtUp: now}
			}
		}
		for r := range p.Followers {
			if !slices.Contains(pi.Replicas, r) {
				delete(p.Followers, r)
			}
		}
		p.MaybeAdvanceHighWatermarkLocked()
		return
	}
	p.Followers = make(map[int32]*partition.ReplicaState)
	for _, r := range pi.Replicas {
		if r != s.cfg.NodeID {
			// A new leader starts its followers' clocks now, as Kafka does,
			// so none is dropped from the ISR before it could fetch.
			p.Followers[r] = &partition.ReplicaState{BrokerEpoch: -1, LEO: -1, LastCaughtUp: now}
		}
	}
	if pi.Leader != s.cfg.NodeID {
		p.Producers = nil
		p.TxnReady.Store(false)
	}
	p.MaybeAdvanceHighWatermarkLocked()
}

// followerFetched records a follower's fetch at offset (its log end),
// made under brokerEpoch (-1 when the fetch does not say), moves the high
// watermark, and asks the controller to add the follower to the ISR when
// it has caught up.
func (s *Server) followerFetched(p *partition.Partition, replica int32, brokerEpoch int64, offset int64) error {
	if brokerEpoch != -1 {
		// As Kafka: a fetch from an incarnation older than the registered
		// one is stale (sent before a restart, delivered after it).
		if b, ok := s.meta.Image().Broker(replica); ok && b.Epoch > brokerEpoch {
			return fmt.Errorf("%w: broker %d fetched at broker epoch %d, registered at %d", kerr.NotLeaderForPartition, replica, brokerEpoch, b.Epoch)
		}
	}
	p.Mu.Lock()
	a := p.Assign.Load()
	if a == nil || a.Leader != s.cfg.NodeID {
		p.Mu.Unlock()
		return kerr.NotLeaderForPartition
	}
	f := p.Followers[replica]
	if f == nil || !slices.Contains(a.Replicas, replica) {
		p.Mu.Unlock()
		return fmt.Errorf("%w: broker %d is not a replica", kerr.NotLeaderForPartition, replica)
	}
	now := s.now()
	leo := p.Log.LogEndOffset()
	if brokerEpoch != f.BrokerEpoch && !f.LastFetch.IsZero() {
		// Another incarnation: what the previous one fetched says nothing
		// of this one's log, so it starts as if it had never fetched and
		// has not been caught up since.
		f.LastFetch, f.LastFetchLeaderLEO, f.LastCaughtUp = time.Time{}, 0, time.Time{}
	}
	f.BrokerEpoch = brokerEpoch
	switch {
	case offset >= leo:
		f.LastCaughtUp = now
	case offset >= f.LastFetchLeaderLEO && !f.LastFetch.IsZero():
		f.LastCaughtUp = f.LastFetch
	}
	f.LEO, f.LastFetch, f.LastFetchLeaderLEO = offset, now, leo
	p.MaybeAdvanceHighWatermarkLocked()
	// A fenced broker (restarting, not yet heartbeating), or one whose
	// fetch names another registration than the image's, cannot join the
	// ISR: the controller would refuse it. A refused change is asked again
	// no sooner than isrRetry.
	join := !slices.Contains(a.ISR, replica) && offset >= p.HW.Load() && !f.PendingISRChangeSent &&
		now.Sub(f.LastISRAttempt) >= isrRetry && s.brokerEligible(replica, brokerEpoch)
	var newISR []controller.ISRMember
	if join {
		f.PendingISRChangeSent = true
		f.Joining = true
		f.LastISRAttempt = now
		ids := append(slices.Clone(a.ISR), replica)
		slices.Sort(ids)
		// The epochs are taken now, with the fetch that qualified the
		// follower: a later fetch may come from another incarnation.
		newISR = s.isrMembersLocked(p, ids)
	}
	p.Mu.Unlock()
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
// its last fetch, -1 when unknown. The caller holds p.Mu.
func (s *Server) isrMembersLocked(p *partition.Partition, isr []int32) []controller.ISRMember {
	out := make([]controller.ISRMember, len(isr))
	for i, r := range isr {
		out[i] = controller.ISRMember{ID: r, BrokerEpoch: -1}
		switch f := p.Followers[r]; {
		case r == s.cfg.NodeID:
			out[i].BrokerEpoch = s.ownBrokerEpoch()
		case f != nil:
			out[i].BrokerEpoch = f.BrokerEpoch
		}
	}
	return out
}

// alterISR asks the controller for a new ISR and, when it agrees, applies
// the answer at once instead of waiting for the metadata log to reach this
// node.
func (s *Server) alterISR(p *partition.Partition, a *partition.Assignment, members []controller.ISRMember) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	pi, err := s.ctrl.AlterPartition(ctx, p.TopicID, p.Index, a.LeaderEpoch, a.PartitionEpoch, members)
	if err == nil {
		// Applied at once, so the high watermark never counts the old
		// ISR alone (applying a newer epoch settles joiners). It may name
		// another leader (a completed reassignment removed this node, as
		// Kafka's NEW_LEADER_ELECTED): this node then stops leading at
		// once rather than when the metadata log reaches it.
		s.log.Info("ISR changed", "topic", p.Topic, "partition", p.Index, "isr", pi.ISR, "leader", pi.Leader, "partition_epoch", pi.PartitionEpoch)
		s.applyAssignment(p, pi)
		// Counted as Kafka's leader counts its own committed changes
		// (IsrShrinksPerSec, IsrExpandsPerSec); an ISR the controller
		// changes on its own (a fenced broker) is not.
		s.ops.metrics.ISRChanged(len(members) < len(a.ISR), false)
	} else if s.ctx.Err() == nil {
		s.ops.metrics.ISRChanged(false, true)
	}
	// Only a refusal of a request whose epochs were the controller's
	// settles it: then no earlier request committed either. After a
	// timeout, a lost controller or a stale epoch an earlier change may
	// have committed, so the joiners keep counting until the metadata
	// log shows a newer partition epoch.
	refused := errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.InvalidRequest) ||
		errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
	p.Mu.Lock()
	for r, f := range p.Followers {
		f.PendingISRChangeSent = false
		if refused && slices.ContainsFunc(members, func(m controller.ISRMember) bool { return m.ID == r }) && !slices.Contains(a.ISR, r) {
			f.Joining = false
		}
	}
	p.MaybeAdvanceHighWatermarkLocked()
	p.Mu.Unlock()
	if err != nil && s.ctx.Err() == nil {
		s.log.Debug("ISR change refused", "topic", p.Topic, "partition", p.Index, "isr", members, "err", err)
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
				p.Mu.Lock()
				a := p.Assign.Load()
				var out []int32
				if a != nil && a.Leader == s.cfg.NodeID {
					for _, r := range a.ISR {
						if f := p.Followers[r]; f != nil && r != s.cfg.NodeID && now.Sub(f.LastCaughtUp) > lag && !f.PendingISRChangeSent {
							out = append(out, r)
							f.PendingISRChangeSent = true
						}
					}
				}
				var newISR []controller.ISRMember
				if len(out) > 0 {
					newISR = s.isrMembersLocked(p, slices.DeleteFunc(slices.Clone(a.ISR), func(r int32) bool { return slices.Contains(out, r) }))
				}
				p.Mu.Unlock()
				if len(out) == 0 {
					continue
				}
				s.log.Warn("shrinking ISR: followers lag", "topic", p.Topic, "partition", p.Index, "lagging", out)
				s.alterISR(p, a, newISR)
			}
		}
	}
}
