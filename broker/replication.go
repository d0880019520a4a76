package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta"
)

// Replication, leader side. Followers fetch from the leader with the Fetch
// API carrying their replica id; each fetch tells the leader how far the
// follower's log reaches (its fetch offset). The high watermark is the
// smallest log end offset in the ISR, and only rises. A follower that has
// not caught up to the leader's log end for replica.lag.time.max.ms leaves
// the ISR; one that reaches the high watermark joins it again. ISR changes
// go to the controller (AlterPartition), which commits them to the
// metadata log; the leader uses the new ISR once the controller answers.

// replicaState is what the leader knows of one follower.
type replicaState struct {
	leo                  int64     // the follower's log end offset, from its last fetch
	lastFetch            time.Time // when it last fetched
	lastFetchLeaderLEO   int64     // the leader's log end offset at that fetch
	lastCaughtUp         time.Time // when it last had everything the leader had
	pendingISRChangeSent bool
	lastISRAttempt       time.Time // when its last ISR change was asked for
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
func (s *Server) applyAssignment(p *partition, pi raftmeta.PartitionImage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.assign.Load()
	a := &assignment{replicas: pi.Replicas, isr: pi.ISR, leader: pi.Leader, leaderEpoch: pi.LeaderEpoch, partitionEpoch: pi.PartitionEpoch}
	p.assign.Store(a)
	p.leaderEpoch.Store(pi.LeaderEpoch)
	if prev != nil && prev.leaderEpoch == pi.LeaderEpoch && prev.leader == pi.Leader {
		p.maybeAdvanceHighWatermarkLocked()
		return
	}
	now := s.now()
	p.followers = make(map[int32]*replicaState)
	for _, r := range pi.Replicas {
		if r != s.cfg.NodeID {
			// A new leader starts its followers' clocks now, as Kafka does,
			// so none is dropped from the ISR before it could fetch.
			p.followers[r] = &replicaState{leo: -1, lastCaughtUp: now}
		}
	}
	if pi.Leader != s.cfg.NodeID {
		p.producers, p.txnLoaded = nil, false
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

// followerFetched records a follower's fetch at offset (its log end) and
// moves the high watermark. It returns whether the follower should join
// the ISR.
func (s *Server) followerFetched(p *partition, replica int32, offset int64) error {
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
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case offset >= f.lastFetchLeaderLEO && !f.lastFetch.IsZero():
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.lastFetchLeaderLEO = offset, now, leo
	p.maybeAdvanceHighWatermarkLocked()
	// A fenced broker (restarting, not yet heartbeating) cannot join the
	// ISR: the controller would refuse it. A refused change is asked again
	// no sooner than isrRetry.
	join := !slices.Contains(a.isr, replica) && offset >= p.hw.Load() && !f.pendingISRChangeSent &&
		now.Sub(f.lastISRAttempt) >= isrRetry && s.brokerEligible(replica)
	if join {
		f.pendingISRChangeSent = true
		f.lastISRAttempt = now
	}
	p.mu.Unlock()
	if join {
		newISR := append(slices.Clone(a.isr), replica)
		slices.Sort(newISR)
		s.goTracked(func() { s.alterISR(p, a, newISR) })
	}
	return nil
}

// isrRetry spaces out ISR changes the controller refused.
const isrRetry = 500 * time.Millisecond

// brokerEligible reports whether a broker may be in an ISR: registered and
// not fenced.
func (s *Server) brokerEligible(id int32) bool {
	b, ok := s.meta.Image().Broker(id)
	return ok && !b.Fenced
}

// alterISR asks the controller for a new ISR and, when it agrees, applies
// the answer at once instead of waiting for the metadata log to reach this
// node.
func (s *Server) alterISR(p *partition, a *assignment, newISR []int32) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	pi, err := s.ctrl.AlterPartition(ctx, p.topicID, p.index, a.leaderEpoch, a.partitionEpoch, newISR)
	p.mu.Lock()
	for _, f := range p.followers {
		f.pendingISRChangeSent = false
	}
	p.mu.Unlock()
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Debug("ISR change refused", "topic", p.topic, "partition", p.index, "isr", newISR, "err", err)
		}
		return
	}
	s.log.Info("ISR changed", "topic", p.topic, "partition", p.index, "isr", pi.ISR, "partition_epoch", pi.PartitionEpoch)
	s.applyAssignment(p, pi)
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
				p.mu.Unlock()
				if len(out) == 0 {
					continue
				}
				newISR := slices.DeleteFunc(slices.Clone(a.isr), func(r int32) bool { return slices.Contains(out, r) })
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
