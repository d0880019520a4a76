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
// smallest log end offset in the ISR. The caller holds p.Mu.
func (p *Partition) MaybeAdvanceHighWatermarkLocked() {
	a := p.Assign.Load()
	if a == nil || a.Leader != p.Self {
		return
	}
	hw := p.Log.LogEndOffset()
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
