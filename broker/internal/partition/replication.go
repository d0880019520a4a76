package partition

import (
	"slices"
	"time"
)

// What a partition's leader knows of its assignment and followers, and
// the high watermark it derives from them. The broker applies assignments
// and follower fetches (broker/replication.go); the followers' own side is
// broker/internal/replica.

// ReplicaState is what the leader knows of one follower.
type ReplicaState struct {
	BrokerEpoch          int64     // the broker epoch its last fetch named, -1 if none or unknown
	LEO                  int64     // the follower's log end offset, from its last fetch
	LastFetch            time.Time // when it last fetched
	LastFetchLeaderLEO   int64     // the leader's log end offset at that fetch
	LastCaughtUp         time.Time // when it last had everything the leader had
	PendingISRChangeSent bool
	// Joining says an AlterPartition adding this follower to the ISR may
	// have committed: the high watermark counts it until an answer or a
	// newer partition epoch settles it (Kafka's maximal ISR, KIP-497).
	Joining        bool
	LastISRAttempt time.Time // when its last ISR change was asked for
}

// Assignment is a partition's replicas, ISR and epochs from the metadata
// image, as this node last applied them.
type Assignment struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// IsLeader reports whether this node leads the partition.
func (p *Partition) IsLeader(self int32) bool {
	a := p.Assign.Load()
	return a != nil && a.Leader == self
}

// MaybeAdvanceHighWatermarkLocked raises a leader's high watermark to the
// smallest log end offset in the ISR, the leader's own counted only as far
// as the flush policy lets it (CommittableEnd). The caller holds p.Mu.
func (p *Partition) MaybeAdvanceHighWatermarkLocked() {
	a := p.Assign.Load()
	if a == nil || a.Leader != p.Self {
		return
	}
	hw := p.CommittableEnd()
	for _, r := range a.ISR {
		if r == p.Self {
			continue
		}
		f := p.Followers[r]
		if f == nil {
			return // an ISR member we have not heard from yet holds it
		}
		hw = min(hw, f.LEO)
	}
	// A follower whose joining the ISR may have committed counts as a
	// member (Kafka's maximal ISR, KIP-497): the controller may make it
	// the leader, when that completes a reassignment, before this node
	// hears of it, so nothing it lacks may be committed meanwhile.
	for r, f := range p.Followers {
		if f.Joining && !slices.Contains(a.ISR, r) {
			hw = min(hw, f.LEO)
		}
	}
	if hw > p.HW.Load() {
		p.SetHighWatermarkLocked(hw)
	}
}

// TruncatedLocked is called, holding p.Mu, once p's log was cut (a
// follower's truncation, a restart at the leader's log start): an append
// the flush policy wanted durable that the cut removed wants nothing any
// more. Left above the log's end, FlushTarget would stay above the
// recovery point, which the cut lowered, and CommittableEnd would hold
// the high watermark at the recovery point until some later flush passed
// the removed append's end. Appends move FlushTarget only under p.Mu, so
// the load and store here are not raced.
func (p *Partition) TruncatedLocked() {
	if leo := p.Log.LogEndOffset(); p.FlushTarget.Load() > leo {
		p.FlushTarget.Store(leo)
	}
}

// CommittableEnd is how far the leader's own log may be committed: its
// log end offset, except while an append that the flush policy
// (flush.messages, flush.ms) wants durable is not yet fsynced, when it is
// the recovery point. As in Kafka, where Log.append flushes before the
// partition increments its high watermark, a record the policy makes
// durable before its acknowledgement is not visible to consumers (nor
// acknowledged to acks=all) before it is on disk, so a crash cannot take
// back what a consumer read. Durable advances the high watermark once its
// flush is done. The caller holds p.Mu, under which FlushTarget only
// moves; the recovery point only grows meanwhile, so reading it after
// FlushTarget errs on the safe side.
func (p *Partition) CommittableEnd() int64 {
	leo := p.Log.LogEndOffset()
	if rp := p.Log.RecoveryPoint(); p.FlushTarget.Load() > rp {
		return min(leo, rp)
	}
	return leo
}

// SetHighWatermarkLocked publishes a new high watermark and wakes those
// waiting for it.
func (p *Partition) SetHighWatermarkLocked(hw int64) {
	p.HW.Store(hw)
	p.Log.SetHighWatermark(hw)
	p.UpdateLastStableOffsetLocked()
	p.WakeWaiters()
}

// InSyncReplicas is the partition's ISR size, for min.insync.replicas.
func (p *Partition) InSyncReplicas() int {
	a := p.Assign.Load()
	if a == nil {
		return 1
	}
	return len(a.ISR)
}
