package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/internal/metrics"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// Partition is one partition this node hosts. Appends take Mu; readers
// use the log end offset and high watermark published as atomics and never
// wait for a writer.
type Partition struct {
	Topic   string
	Index   int32
	TopicID [16]byte
	Log     *storage.Log
	Self    int32 // this node's id

	// Assign is the partition's replicas, ISR, leader and epochs as last
	// applied; Followers is what a leader knows of each follower (guarded
	// by Mu). See replication.go here and broker/replication.go.
	Assign    atomic.Pointer[Assignment]
	Followers map[int32]*ReplicaState

	Mu        sync.Mutex           // serializes appends; see LOCKS.md
	Producers *producerstate.State // guarded by Mu; nil until first needed
	Epochs    []EpochEntry         // guarded by Mu; nil until first needed
	// LSO is the last stable offset, from Producers; TxnReady says it
	// can be read without the lock.
	LSO      atomic.Int64
	TxnReady atomic.Bool

	// appendedEpoch is the leader epoch the epoch cache was last checked
	// for, so appends check it once per epoch. Guarded by Mu.
	appendedEpoch int32
	// epochFileAbsent says the partition has no leader-epoch-checkpoint
	// file and its log no batch with an epoch (EpochsLocked found
	// nothing to rebuild); epochsUnwritten says Epochs holds an entry
	// that file does not, its write deferred (epochs.go). Guarded by Mu;
	// epochsUnwritten is read without it by the deferred writer.
	epochFileAbsent bool
	epochsUnwritten atomic.Bool
	// epochSeq numbers the epoch cache's states as they are captured for
	// the checkpoint file, or deferred (guarded by Mu); epochWritten is
	// the newest state in the file, and epochFileMu, taken after Mu when
	// both are, serializes the file's writes (they share its .tmp name):
	// a write of an older state than the file holds is skipped, so the
	// background writer, which fsyncs without Mu, never puts back an
	// older checkpoint over a newer one.
	epochSeq     uint64
	epochFileMu  sync.Mutex
	epochWritten uint64 // guarded by epochFileMu
	HW           atomic.Int64
	FlushTarget  atomic.Int64 // the end of the last append the flush policy wants durable
	LeaderEpoch  atomic.Int32
	Cfg          atomic.Pointer[config.Topic]

	// Demotions counts the times this node stopped leading the
	// partition (applyAssignment, under Mu). An acks=all produce or a
	// coordinator write notes it before its append and is answered
	// NOT_LEADER_OR_FOLLOWER if it moved: as a follower the node may have
	// truncated the batch and then taken a new leader's high watermark
	// past it, so that high watermark says nothing about the batch.
	Demotions atomic.Int64

	waitMu  sync.Mutex
	waiters map[chan struct{}]struct{} // nil until the first AddWaiter

	// NoSpaceErrors counts writes refused for a full disk, and
	// NoSpaceLoggedMs is when one was last logged (broker/diskfull.go).
	NoSpaceErrors   atomic.Int64
	NoSpaceLoggedMs atomic.Int64

	Env *Env // what the partition needs of the server

	// Metrics are its topic's counters, resolved once when the partition
	// is made (broker/internal/metrics); nil counts nothing.
	Metrics *metrics.Topic
}

// Env is what a partition needs of the server that hosts it.
type Env struct {
	FS  vfs.FS
	Log *slog.Logger
	Now func() time.Time
	Ctx context.Context // ends when the server closes
	Go  func(func())    // starts a goroutine the server waits for when it closes
	Cfg *config.Broker
	// StorageFailed takes a partition's log dir offline after a disk
	// error (broker/produce_helpers.go).
	StorageFailed func(p *Partition, err error)
}

// New is a hosted partition of topic over log, at leader epoch epoch, on
// node self. cfg is the topic's effective config, which the topic's
// partitions share and nothing modifies (a copy each is 300 bytes, 3 MB
// over 10,000 idle partitions).
func New(env *Env, self int32, topic string, index int32, id [16]byte, log *storage.Log, cfg *config.Topic, epoch int32) *Partition {
	p := &Partition{Env: env, Self: self, Topic: topic, Index: index, TopicID: id, Log: log}
	p.Cfg.Store(cfg)
	p.LeaderEpoch.Store(epoch)
	p.appendedEpoch = -1
	// A replica's high watermark starts where the last
	// replication-offset-checkpoint left it (else at the log start), as in
	// Kafka; applyAssignment raises it at once for a leader that is its
	// own ISR, and replication for the others.
	if hw, ok := log.CheckpointedHighWatermark(); ok {
		p.HW.Store(hw)
	} else {
		p.HW.Store(log.LogStartOffset())
	}
	p.LSO.Store(p.HW.Load())
	log.SetHighWatermark(p.HW.Load())
	return p
}

// LeaderLocked is NOT_LEADER_OR_FOLLOWER unless this node leads the
// partition. Appends check it under Mu, which applyAssignment holds to
// change leadership: a produce that passed the lock-free check in
// leaderPartition must not land in a log that has meanwhile become a
// follower's, where the fetcher appends the new leader's batches at the
// same offsets.
func (p *Partition) LeaderLocked() error {
	if a := p.Assign.Load(); a != nil && a.Leader != p.Self {
		return fmt.Errorf("%w: %s-%d is led by %d now", kerr.NotLeaderForPartition, p.Topic, p.Index, a.Leader)
	}
	return nil
}

// HighWatermark is the offset below which records are committed and
// visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.HW.Load() }

// AdvanceHighWatermarkLocked moves the high watermark after an append (at
// once when this node is the whole ISR) and wakes fetches waiting for data,
// followers' long polls among them.
func (p *Partition) AdvanceHighWatermarkLocked() {
	p.MaybeAdvanceHighWatermarkLocked()
	p.WakeWaiters()
}

// AddWaiter registers ch to be signalled (without blocking) when new data
// becomes visible.
func (p *Partition) AddWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	if p.waiters == nil {
		// Made on first use: most partitions of a large broker never
		// have a fetch waiting on them.
		p.waiters = make(map[chan struct{}]struct{})
	}
	p.waiters[ch] = struct{}{}
	p.waitMu.Unlock()
}

func (p *Partition) RemoveWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

func (p *Partition) WakeWaiters() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// AppendLocal appends an already validated batch to a partition this node
// leads and returns the offset of its last record, once the flush policy
// is satisfied.
func (p *Partition) AppendLocal(batch []byte, nowMs int64) (int64, error) {
	p.Mu.Lock()
	last, err := p.AppendLocked(batch, nowMs)
	p.Mu.Unlock()
	if err != nil {
		return 0, err
	}
	return last, p.Durable(last)
}

// AppendLocked is appendLocal for a caller that holds p.Mu, without the
// flush: the caller calls durable after it lets go of p.Mu, so that an
// fsync never holds the partition and concurrent appends share fsyncs.
func (p *Partition) AppendLocked(batch []byte, nowMs int64) (int64, error) {
	if err := p.LeaderLocked(); err != nil {
		return 0, err
	}
	epoch := p.LeaderEpoch.Load()
	if epoch != p.appendedEpoch {
		if err := p.noteLeaderEpochLocked(epoch); err != nil {
			if p.Log.Closed() {
				return 0, fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.Topic, p.Index)
			}
			p.Env.StorageFailed(p, err)
			return 0, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
		p.appendedEpoch = epoch
	}
	ar, flush, err := p.Log.AppendDeferFlush(batch, epoch, nowMs)
	if errors.Is(err, storage.ErrClosed) {
		// The log went with its partition (deleted, or moved off this
		// node by a reassignment) between the leadership check and the
		// append: not a disk failure. The client looks for the leader.
		return 0, fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.Topic, p.Index)
	}
	if err != nil {
		if storage.IsExhausted(err) {
			// The producer state may have learned the batch that was
			// not written: rebuild it from the log when next needed.
			p.Producers = nil
			p.TxnReady.Store(false)
		}
		p.Env.StorageFailed(p, err)
		return 0, fmt.Errorf("%w: append %s-%d: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
	}
	if flush {
		storeMax(&p.FlushTarget, ar.LastOffset+1)
	}
	p.AdvanceHighWatermarkLocked()
	return ar.LastOffset, nil
}

// Durable makes the append that ended at last durable when the flush
// policy (flush.messages, flush.ms) asked for it: group commit, since a
// flush covers every append before it and later callers find their
// offsets covered. Until then the high watermark stays below the append
// (CommittableEnd); Durable raises it after the flush. The caller must
// not hold p.Mu.
func (p *Partition) Durable(last int64) error {
	if p.FlushTarget.Load() <= last {
		return nil
	}
	if err := p.Log.FlushTo(last + 1); errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.Topic, p.Index)
	} else if err != nil {
		p.Env.StorageFailed(p, err)
		return fmt.Errorf("%w: flush %s-%d: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
	}
	if p.HW.Load() <= last {
		// The high watermark stopped short of the unflushed append
		// (CommittableEnd); the flush lets it cover it now. Whoever's
		// flush covered the append, each waiter advances it, so it
		// never waits on another caller's turn.
		p.Mu.Lock()
		p.MaybeAdvanceHighWatermarkLocked()
		p.Mu.Unlock()
	}
	return nil
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// WaitHighWatermark waits until the partition's high watermark reaches
// offset. A leader that steps down meanwhile answers NOT_LEADER_OR_FOLLOWER
// (see partition.Partition.Demotions): the write may be gone.
func (p *Partition) WaitHighWatermark(ctx context.Context, offset int64) error {
	demotions := p.Demotions.Load()
	deposed := func() error {
		if p.Demotions.Load() != demotions || !p.IsLeader(p.Self) {
			return fmt.Errorf("wait for high watermark %d of %s-%d: %w", offset, p.Topic, p.Index, kerr.NotLeaderForPartition)
		}
		return nil
	}
	if p.HighWatermark() >= offset {
		return deposed()
	}
	wake := make(chan struct{}, 1)
	p.AddWaiter(wake)
	defer p.RemoveWaiter(wake)
	for p.HighWatermark() < offset {
		if err := deposed(); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("wait for high watermark %d of %s-%d: %w", offset, p.Topic, p.Index, kerr.RequestTimedOut)
		}
	}
	return deposed()
}
