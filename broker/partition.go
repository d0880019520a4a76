package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// partition is one partition this node hosts. Appends take mu; readers
// use the log end offset and high watermark published as atomics and never
// wait for a writer.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *storage.Log
	self    int32 // this node's id

	// assign is the partition's replicas, ISR, leader and epochs as last
	// applied; followers is what a leader knows of each follower (guarded
	// by mu). See replication.go.
	assign    atomic.Pointer[assignment]
	followers map[int32]*replicaState

	mu        sync.Mutex           // serializes appends; see LOCKS.md
	producers *producerstate.State // guarded by mu; nil until first needed
	epochs    []epochEntry         // guarded by mu; nil until first needed
	// lso is the last stable offset, from producers; txnReady says it
	// can be read without the lock.
	lso      atomic.Int64
	txnReady atomic.Bool

	// appendedEpoch is the leader epoch the epoch cache was last checked
	// for, so appends check it once per epoch. Guarded by mu.
	appendedEpoch int32
	hw            atomic.Int64
	flushTarget   atomic.Int64 // the end of the last append the flush policy wants durable
	leaderEpoch   atomic.Int32
	cfg           atomic.Pointer[config.Topic]

	// demotions counts the times this node stopped leading the
	// partition (applyAssignment, under mu). An acks=all produce or a
	// coordinator write notes it before its append and is answered
	// NOT_LEADER_OR_FOLLOWER if it moved: as a follower the node may have
	// truncated the batch and then taken a new leader's high watermark
	// past it, so that high watermark says nothing about the batch.
	demotions atomic.Int64

	waitMu  sync.Mutex
	waiters map[chan struct{}]struct{}

	// noSpaceErrors counts writes refused for a full disk, and
	// noSpaceLoggedMs is when one was last logged (diskfull.go).
	noSpaceErrors   atomic.Int64
	noSpaceLoggedMs atomic.Int64
	env             *partitionEnv
}

// partitionEnv is what a partition needs of the server that hosts it.
type partitionEnv struct {
	fs        vfs.FS
	log       *slog.Logger
	now       func() time.Time
	ctx       context.Context // ends when the server closes
	goTracked func(func())    // starts a goroutine the server waits for when it closes
	cfg       *config.Broker
	// storageFailed takes a partition's log dir offline after a disk
	// error (produce_helpers.go).
	storageFailed func(p *partition, err error)
}

func newPartition(env *partitionEnv, self int32, topic string, index int32, id [16]byte, log *storage.Log, cfg config.Topic, epoch int32) *partition {
	p := &partition{env: env, self: self, topic: topic, index: index, topicID: id, log: log, waiters: make(map[chan struct{}]struct{})}
	p.cfg.Store(&cfg)
	p.leaderEpoch.Store(epoch)
	p.appendedEpoch = -1
	// A replica's high watermark starts where the last
	// replication-offset-checkpoint left it (else at the log start), as in
	// Kafka; applyAssignment raises it at once for a leader that is its
	// own ISR, and replication for the others.
	if hw, ok := log.CheckpointedHighWatermark(); ok {
		p.hw.Store(hw)
	} else {
		p.hw.Store(log.LogStartOffset())
	}
	p.lso.Store(p.hw.Load())
	log.SetHighWatermark(p.hw.Load())
	return p
}

// leaderLocked is NOT_LEADER_OR_FOLLOWER unless this node leads the
// partition. Appends check it under mu, which applyAssignment holds to
// change leadership: a produce that passed the lock-free check in
// leaderPartition must not land in a log that has meanwhile become a
// follower's, where the fetcher appends the new leader's batches at the
// same offsets.
func (p *partition) leaderLocked() error {
	if a := p.assign.Load(); a != nil && a.leader != p.self {
		return fmt.Errorf("%w: %s-%d is led by %d now", kerr.NotLeaderForPartition, p.topic, p.index, a.leader)
	}
	return nil
}

// highWatermark is the offset below which records are committed and
// visible to consumers.
func (p *partition) highWatermark() int64 { return p.hw.Load() }

// advanceHighWatermarkLocked moves the high watermark after an append (at
// once when this node is the whole ISR) and wakes fetches waiting for data,
// followers' long polls among them.
func (p *partition) advanceHighWatermarkLocked() {
	p.maybeAdvanceHighWatermarkLocked()
	p.wakeWaiters()
}

// addWaiter registers ch to be signalled (without blocking) when new data
// becomes visible.
func (p *partition) addWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	p.waiters[ch] = struct{}{}
	p.waitMu.Unlock()
}

func (p *partition) removeWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

func (p *partition) wakeWaiters() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// topicPartitions is one topic's hosted partitions, by index. A nil entry
// is a partition this node does not host.
type topicPartitions struct {
	name  string
	id    [16]byte
	parts []*partition
	// failed holds, for the partitions this node hosts whose log could
	// not be created (out of file descriptors or space), the error of the
	// last try; nil when there are none. The broker tries again with a
	// backoff (metadata_sync.go); meanwhile they answer
	// KAFKA_STORAGE_ERROR.
	failed map[int32]error
}

// partitionTable maps topics to their hosted partitions. Readers load the
// current immutable map; reconcile replaces it whole.
type partitionTable struct {
	byName atomic.Pointer[map[string]*topicPartitions]
}

func (t *partitionTable) topic(name string) *topicPartitions {
	m := t.byName.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

func (t *partitionTable) get(topic string, index int32) *partition {
	tp := t.topic(topic)
	if tp == nil || index < 0 || int(index) >= len(tp.parts) {
		return nil
	}
	return tp.parts[index]
}

// createFailed is the error that kept the hosted partition's log from
// being created, or nil.
func (t *partitionTable) createFailed(topic string, index int32) error {
	tp := t.topic(topic)
	if tp == nil {
		return nil
	}
	return tp.failed[index]
}

// anyCreateFailed reports whether some hosted partition has no log yet
// because its creation failed.
func (t *partitionTable) anyCreateFailed() bool {
	for _, tp := range t.all() {
		if len(tp.failed) > 0 {
			return true
		}
	}
	return false
}

func (t *partitionTable) all() map[string]*topicPartitions {
	m := t.byName.Load()
	if m == nil {
		return nil
	}
	return *m
}

// appendLocal appends an already validated batch to a partition this node
// leads and returns the offset of its last record, once the flush policy
// is satisfied.
func (p *partition) appendLocal(batch []byte, nowMs int64) (int64, error) {
	p.mu.Lock()
	last, err := p.appendLocked(batch, nowMs)
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return last, p.durable(last)
}

// appendLocked is appendLocal for a caller that holds p.mu, without the
// flush: the caller calls durable after it lets go of p.mu, so that an
// fsync never holds the partition and concurrent appends share fsyncs.
func (p *partition) appendLocked(batch []byte, nowMs int64) (int64, error) {
	if err := p.leaderLocked(); err != nil {
		return 0, err
	}
	epoch := p.leaderEpoch.Load()
	if epoch != p.appendedEpoch {
		if err := p.noteLeaderEpochLocked(epoch); err != nil {
			if p.log.Closed() {
				return 0, fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.topic, p.index)
			}
			p.env.storageFailed(p, err)
			return 0, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
		p.appendedEpoch = epoch
	}
	ar, flush, err := p.log.AppendDeferFlush(batch, epoch, nowMs)
	if errors.Is(err, storage.ErrClosed) {
		// The log went with its partition (deleted, or moved off this
		// node by a reassignment) between the leadership check and the
		// append: not a disk failure. The client looks for the leader.
		return 0, fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.topic, p.index)
	}
	if err != nil {
		if storage.IsExhausted(err) {
			// The producer state may have learned the batch that was
			// not written: rebuild it from the log when next needed.
			p.producers = nil
			p.txnReady.Store(false)
		}
		p.env.storageFailed(p, err)
		return 0, fmt.Errorf("%w: append %s-%d: %v", kerr.KafkaStorageError, p.topic, p.index, err)
	}
	if flush {
		storeMax(&p.flushTarget, ar.LastOffset+1)
	}
	p.advanceHighWatermarkLocked()
	return ar.LastOffset, nil
}

// durable makes the append that ended at last durable when the flush
// policy (flush.messages, flush.ms) asked for it: group commit, since a
// flush covers every append before it and later callers find their
// offsets covered.
func (p *partition) durable(last int64) error {
	if p.flushTarget.Load() <= last {
		return nil
	}
	if err := p.log.FlushTo(last + 1); errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.topic, p.index)
	} else if err != nil {
		p.env.storageFailed(p, err)
		return fmt.Errorf("%w: flush %s-%d: %v", kerr.KafkaStorageError, p.topic, p.index, err)
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

// waitHighWatermark waits until the partition's high watermark reaches
// offset. A leader that steps down meanwhile answers NOT_LEADER_OR_FOLLOWER
// (see partition.demotions): the write may be gone.
func (p *partition) waitHighWatermark(ctx context.Context, offset int64) error {
	demotions := p.demotions.Load()
	deposed := func() error {
		if p.demotions.Load() != demotions || !p.isLeader(p.self) {
			return fmt.Errorf("wait for high watermark %d of %s-%d: %w", offset, p.topic, p.index, kerr.NotLeaderForPartition)
		}
		return nil
	}
	if p.highWatermark() >= offset {
		return deposed()
	}
	wake := make(chan struct{}, 1)
	p.addWaiter(wake)
	defer p.removeWaiter(wake)
	for p.highWatermark() < offset {
		if err := deposed(); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("wait for high watermark %d of %s-%d: %w", offset, p.topic, p.index, kerr.RequestTimedOut)
		}
	}
	return deposed()
}
