package broker

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/storage"
)

// The group coordinator's state lives in __consumer_offsets, a compacted
// internal topic created on the first FindCoordinator. The coordinator of
// a group is the leader of the group's partition of that topic; when this
// node becomes leader of such a partition it replays the partition into
// the coordinator (load), and when it stops leading it unloads it.
const offsetsTopic = "__consumer_offsets"

// groupCoordinator connects the group package to the broker: it is the
// coordinator's Store, and it tracks which partitions are loaded.
type groupCoordinator struct {
	s     *Server
	coord *group.Coordinator

	loader *partitionLoader

	topicsApplied uint64 // the image offset consumer groups last saw; guarded by Server.reconcileMu
}

func (s *Server) startGroupCoordinator() error {
	gc := &groupCoordinator{s: s}
	cfg := group.DefaultConfig()
	cfg.OffsetsTopicPartitions = s.cfg.OffsetsTopicNumPartitions
	cfg.Shards = runtime.GOMAXPROCS(0)
	cfg.GroupMinSessionTimeoutMs = s.cfg.GroupMinSessionTimeoutMs
	cfg.GroupMaxSessionTimeoutMs = s.cfg.GroupMaxSessionTimeoutMs
	cfg.GroupInitialRebalanceDelayMs = s.cfg.GroupInitialRebalanceDelayMs
	cfg.GroupMaxSize = s.cfg.GroupMaxSize
	cfg.OffsetMetadataMaxBytes = s.cfg.OffsetMetadataMaxBytes
	cfg.OffsetsRetentionMs = int64(s.cfg.OffsetsRetentionMinutes) * 60_000
	cfg.OffsetsRetentionCheckIntervalMs = s.cfg.OffsetsRetentionCheckIntervalMs
	cfg.Logger = s.log.With("component", "groups")
	cfg.Topics = imageTopics{s}
	cfg.ConsumerGroupSessionTimeoutMs = s.cfg.GroupConsumerSessionTimeoutMs
	cfg.ConsumerGroupHeartbeatIntervalMs = s.cfg.GroupConsumerHeartbeatIntervalMs
	cfg.ConsumerGroupMaxSize = s.cfg.GroupConsumerMaxSize
	cfg.ConsumerGroupMigrationPolicy = s.cfg.GroupConsumerMigrationPolicy
	coord, err := group.New(cfg, internalStore{s, offsetsTopic}, group.SystemClock{})
	if err != nil {
		return fmt.Errorf("start group coordinator: %w", err)
	}
	gc.coord = coord
	gc.loader = &partitionLoader{
		s: s, topic: offsetsTopic, loaded: make(map[int32]int32),
		load: func(ctx context.Context, partition, _ int32, p *partition) error {
			return coord.Load(ctx, partition, readPartition(ctx, p))
		},
		unload: coord.Unload,
	}
	s.groups = gc
	return nil
}

// internalStore is a coordinator's Store: it appends records to a
// partition of an internal topic as one batch and returns once the high
// watermark covers it.
type internalStore struct {
	s     *Server
	topic string
}

// Append writes non-transactional coordinator records.
func (st internalStore) Append(ctx context.Context, partition int32, records []group.Record) error {
	return st.s.appendInternal(ctx, st.topic, partition, records, -1, -1, false)
}

// AppendTxn writes a transactional offset commit: a transactional batch
// with the producer's id and epoch, pending until its marker, once the
// transaction coordinator verified or added the partition (KIP-890,
// txn_verify.go).
func (st internalStore) AppendTxn(ctx context.Context, partition int32, txn group.TxnAppend, records []group.Record) error {
	if err := st.s.verifyTxnOffsetCommit(ctx, partition, txn); err != nil {
		return err
	}
	return st.s.appendInternal(ctx, st.topic, partition, records, txn.ProducerID, txn.ProducerEpoch, true)
}

// AppendMarker writes a transaction marker to a partition of the group
// coordinator's topic, for the coordinator, which orders it behind the
// commits it is still writing there.
func (st internalStore) AppendMarker(ctx context.Context, partition int32, m group.TxnMarker) error {
	return st.s.writeMarkerLocal(ctx, st.topic, partition, producerstate.Marker{
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
		Commit: m.Commit, TransactionVersion: m.TransactionVersion,
	})
}

// appendInternal writes records to a partition of an internal topic this
// node leads, as one batch (transactional, with the producer's id and
// epoch, for transactional offset commits).
func (s *Server) appendInternal(ctx context.Context, topic string, partition int32, records []group.Record, producerID int64, producerEpoch int16, transactional bool) error {
	p := s.leaderPartition(topic, partition)
	if p == nil {
		return fmt.Errorf("append %s-%d: %w", topic, partition, kerr.NotLeaderForPartition)
	}
	recs := make([]protocol.Record, len(records))
	for i, r := range records {
		recs[i] = protocol.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	now := s.now().UnixMilli()
	h := protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: producerID, ProducerEpoch: producerEpoch, BaseSequence: -1}
	if transactional {
		h.Attributes |= protocol.AttrTransactional
	}
	batch, err := protocol.BuildBatch(h, recs, protocol.CodecNone)
	if err != nil {
		return fmt.Errorf("append %s-%d: %w", topic, partition, err)
	}
	// The log's limit holds for the coordinators too, as Kafka's runtime
	// checks it: a group record with oversized member metadata fails.
	if maxBytes := p.cfg.Load().MaxMessageBytes; len(batch) > int(maxBytes) {
		return fmt.Errorf("append %s-%d: batch of %d bytes over max.message.bytes %d: %w", topic, partition, len(batch), maxBytes, kerr.MessageTooLarge)
	}
	var last int64
	if transactional {
		last, err = s.appendTransactional(p, batch, now)
	} else {
		last, err = s.appendLocal(p, batch, now)
	}
	if err != nil {
		return err
	}
	return p.waitHighWatermark(ctx, last+1)
}

// imageTopics is the coordinator's view of the topics, for KIP-848
// assignments: a new map from the current image on every call.
type imageTopics struct{ s *Server }

func (v imageTopics) Topics() map[string]group.TopicInfo {
	img := v.s.meta.Image()
	out := make(map[string]group.TopicInfo)
	for _, name := range img.TopicNames() {
		t, _ := img.Topic(name)
		out[name] = group.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	return out
}

// reconcile loads the __consumer_offsets partitions this node now leads
// and unloads those it no longer leads, and tells consumer groups (whose
// assignments follow the topics) that metadata changed.
func (gc *groupCoordinator) reconcile(img *image.Image) {
	if gc.topicsApplied != img.Offset() {
		gc.topicsApplied = img.Offset()
		gc.coord.TopicsChanged()
	}
	gc.loader.reconcile(img)
}

// partitionLoader loads a coordinator's state from the partitions of its
// internal topic that this node leads, and unloads those it stops leading:
// coordinators move with the leadership of their partitions.
type partitionLoader struct {
	s      *Server
	topic  string
	load   func(ctx context.Context, partition, leaderEpoch int32, p *partition) error
	unload func(partition int32)

	mu     sync.Mutex
	loaded map[int32]int32 // partition → leader epoch loaded at (or loading)
}

func (l *partitionLoader) reconcile(img *image.Image) {
	leading := make(map[int32]int32)
	if t, ok := img.Topic(l.topic); ok {
		for i, pi := range t.Partitions {
			if pi.Leader == l.s.cfg.NodeID {
				leading[int32(i)] = pi.LeaderEpoch
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, epoch := range l.loaded {
		if e, ok := leading[p]; !ok || e != epoch {
			l.unload(p)
			delete(l.loaded, p)
		}
	}
	for p, epoch := range leading {
		if _, ok := l.loaded[p]; ok {
			continue
		}
		part := l.s.parts.get(l.topic, p)
		if part == nil {
			continue
		}
		l.loaded[p] = epoch
		l.s.goTracked(func() {
			if err := l.load(l.s.ctx, p, epoch, part); err != nil && l.s.ctx.Err() == nil {
				l.s.log.Error("load coordinator partition", "topic", l.topic, "partition", p, "err", err)
				l.mu.Lock()
				delete(l.loaded, p)
				l.mu.Unlock()
			}
		})
	}
}

// readPartition yields every record of a partition from its start to its
// log end offset at the time of the call, control records and the
// producer fields of transactional batches included.
func readPartition(ctx context.Context, p *partition) iter.Seq2[group.Record, error] {
	return func(yield func(group.Record, error) bool) {
		// Up to the log end, not the high watermark: a new leader's high
		// watermark lags the old leader's by up to a fetch round, and
		// records it holds past it were acknowledged there (commits the
		// old coordinator answered). The leader never truncates its own
		// log, so they stay, as Kafka's coordinator loader reads them.
		end := p.log.LogEndOffset()
		off := p.log.LogStartOffset()
		for off < end {
			if err := ctx.Err(); err != nil {
				yield(group.Record{}, err)
				return
			}
			rr, err := p.log.Read(off, 1<<20, end, true)
			if err != nil {
				yield(group.Record{}, err)
				return
			}
			if len(rr.Data) == 0 {
				return
			}
			data := rr.Data
			for len(data) > 0 {
				batch, rest, h, err := protocol.NextBatch(data)
				if err != nil {
					yield(group.Record{}, err)
					return
				}
				data = rest
				off = h.LastOffset() + 1
				stop := false
				err = protocol.DecodeBatch(batch, 64<<20, func(h *protocol.BatchHeader, r protocol.Record) error {
					if h.BaseOffset+int64(r.OffsetDelta) < p.log.LogStartOffset() {
						return nil
					}
					rec := group.Record{Key: r.Key, Value: r.Value, Transactional: h.IsTransactional(), Control: h.IsControl(),
						ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
					if !yield(rec, nil) {
						stop = true
						return errStopIteration
					}
					return nil
				})
				if stop {
					return
				}
				if err != nil {
					yield(group.Record{}, err)
					return
				}
			}
		}
	}
}

var errStopIteration = errors.New("stop")

// ensureOffsetsTopic creates __consumer_offsets if it does not exist yet,
// with Kafka's settings for it, and returns the image that holds it.
func (s *Server) ensureOffsetsTopic(ctx context.Context) (*image.Image, error) {
	return s.ensureInternalTopic(ctx, offsetsTopic, s.cfg.OffsetsTopicNumPartitions, s.cfg.OffsetsTopicReplicationFactor,
		map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    strconv.Itoa(int(s.cfg.OffsetsTopicSegmentBytes)),
		})
}

// appendLocal appends an already validated batch to a partition this node
// leads and returns the offset of its last record, once the flush policy
// is satisfied.
func (s *Server) appendLocal(p *partition, batch []byte, nowMs int64) (int64, error) {
	p.mu.Lock()
	last, err := s.appendLocked(p, batch, nowMs)
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return last, s.durable(p, last)
}

// appendLocked is appendLocal for a caller that holds p.mu, without the
// flush: the caller calls durable after it lets go of p.mu, so that an
// fsync never holds the partition and concurrent appends share fsyncs.
func (s *Server) appendLocked(p *partition, batch []byte, nowMs int64) (int64, error) {
	if err := p.leaderLocked(); err != nil {
		return 0, err
	}
	epoch := p.leaderEpoch.Load()
	if epoch != p.appendedEpoch {
		if err := s.noteLeaderEpochLocked(p, epoch); err != nil {
			if p.log.Closed() {
				return 0, fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.topic, p.index)
			}
			s.storageFailed(p, err)
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
		s.storageFailed(p, err)
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
func (s *Server) durable(p *partition, last int64) error {
	if p.flushTarget.Load() <= last {
		return nil
	}
	if err := p.log.FlushTo(last + 1); errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("%w: %s-%d is no longer hosted here", kerr.NotLeaderForPartition, p.topic, p.index)
	} else if err != nil {
		s.storageFailed(p, err)
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
