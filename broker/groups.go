package broker

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/broker/internal/coordhost"
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

	loader *coordhost.Loader

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
	cfg.Topics = newImageTopics(s)
	cfg.ConsumerGroupSessionTimeoutMs = s.cfg.GroupConsumerSessionTimeoutMs
	cfg.ConsumerGroupHeartbeatIntervalMs = s.cfg.GroupConsumerHeartbeatIntervalMs
	cfg.ConsumerGroupMaxSize = s.cfg.GroupConsumerMaxSize
	cfg.ConsumerGroupMigrationPolicy = s.cfg.GroupConsumerMigrationPolicy
	cfg.ConsumerGroupAssignmentIntervalMs = s.cfg.GroupConsumerAssignmentIntervalMs
	cfg.ConsumerGroupConfig = s.consumerGroupOverrides
	cfg.StreamsGroupSessionTimeoutMs = s.cfg.GroupStreamsSessionTimeoutMs
	cfg.StreamsGroupHeartbeatIntervalMs = s.cfg.GroupStreamsHeartbeatIntervalMs
	cfg.StreamsGroupMaxSize = s.cfg.GroupStreamsMaxSize
	cfg.StreamsGroupNumStandbyReplicas = s.cfg.GroupStreamsNumStandbyReplicas
	cfg.StreamsGroupTaskOffsetIntervalMs = s.cfg.GroupStreamsTaskOffsetIntervalMs
	cfg.StreamsGroupAcceptableRecoveryLag = s.cfg.GroupStreamsAcceptableRecoveryLag
	cfg.StreamsGroupInitialRebalanceDelayMs = s.cfg.GroupStreamsInitialRebalanceDelay
	cfg.StreamsGroupAssignmentIntervalMs = s.cfg.GroupStreamsAssignmentIntervalMs
	cfg.StreamsGroupRackAwareAssignmentTags = s.cfg.GroupStreamsRackAwareAssignmentTags
	cfg.StreamsGroupConfig = s.streamsGroupOverrides
	coord, err := group.New(cfg, internalStore{s, offsetsTopic}, group.SystemClock{})
	if err != nil {
		return fmt.Errorf("start group coordinator: %w", err)
	}
	gc.coord = coord
	gc.loader = s.newCoordinatorLoader(offsetsTopic,
		func(ctx context.Context, partition, _ int32, log *storage.Log) error {
			return coord.Load(ctx, partition, coordhost.ReadLog(ctx, log))
		},
		coord.Unload)
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
	if maxBytes := p.Cfg.Load().MaxMessageBytes; len(batch) > int(maxBytes) {
		return fmt.Errorf("append %s-%d: batch of %d bytes over max.message.bytes %d: %w", topic, partition, len(batch), maxBytes, kerr.MessageTooLarge)
	}
	var last int64
	if transactional {
		last, err = p.AppendTransactional(batch, now)
	} else {
		last, err = p.AppendLocal(batch, now)
	}
	if err != nil {
		return err
	}
	return p.WaitHighWatermark(ctx, last+1)
}

// imageTopics is the coordinator's view of the topics, for KIP-848
// assignments. It keeps the last map it made and the image it made it
// from, and makes the next from a copy of that and the topics changed
// since (image.ChangedTopicNames) rather than from every topic: the
// metadata watcher asks after each change, each CreateTopics. A map once
// returned is never written; concurrent callers may both make one.
type imageTopics struct {
	s    *Server
	last *atomic.Pointer[topicsView]
}

// topicsView is the maps imageTopics made and the image they show.
type topicsView struct {
	img    *image.Image
	topics map[string]group.TopicInfo
	names  map[[16]byte]string // the topics' names by id
}

// The coordinator takes the names by id from the view, not from a pass
// over its map.
var _ group.TopicNamesView = imageTopics{}

func newImageTopics(s *Server) imageTopics {
	return imageTopics{s: s, last: new(atomic.Pointer[topicsView])}
}

func (v imageTopics) Topics() map[string]group.TopicInfo {
	topics, _ := v.TopicsAndNames()
	return topics
}

// TopicsAndNames is Topics and the topics' names by id
// (group.TopicNamesView).
func (v imageTopics) TopicsAndNames() (map[string]group.TopicInfo, map[[16]byte]string) {
	img := v.s.meta.Image()
	prev := v.last.Load()
	if prev != nil && prev.img == img {
		return prev.topics, prev.names
	}
	next := &topicsView{img: img}
	if prev == nil {
		next.topics = make(map[string]group.TopicInfo, img.NumTopics())
		next.names = make(map[[16]byte]string, img.NumTopics())
		for t := range img.AllTopics() {
			next.set(t)
		}
	} else {
		next.topics, next.names = maps.Clone(prev.topics), maps.Clone(prev.names)
		for name := range img.ChangedTopicNames(prev.img) {
			if old, ok := next.topics[name]; ok {
				delete(next.names, old.ID)
				delete(next.topics, name)
			}
			if t, ok := img.Topic(name); ok {
				next.set(t)
			}
		}
	}
	v.last.Store(next)
	return next.topics, next.names
}

// set puts topic t in the view being made.
func (v *topicsView) set(t *image.TopicImage) {
	v.topics[t.Name] = group.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	v.names[t.ID] = t.Name
}

// reconcile loads the __consumer_offsets partitions this node now leads
// and unloads those it no longer leads, and tells consumer groups (whose
// assignments follow the topics) that metadata changed.
func (gc *groupCoordinator) reconcile(img *image.Image) {
	if gc.topicsApplied != img.Offset() {
		gc.topicsApplied = img.Offset()
		gc.coord.TopicsChanged()
	}
	gc.loader.Reconcile(img)
}

// newCoordinatorLoader loads and unloads a coordinator's partitions of
// topic as this node's leadership of them comes and goes.
func (s *Server) newCoordinatorLoader(topic string, load func(ctx context.Context, partition, leaderEpoch int32, log *storage.Log) error, unload func(partition int32)) *coordhost.Loader {
	return coordhost.NewLoader(coordhost.LoaderConfig{
		Topic: topic, Self: s.cfg.NodeID, Ctx: s.ctx, Go: s.goTracked, Logger: s.log,
		Log: func(partition int32) *storage.Log {
			if p := s.parts.get(topic, partition); p != nil {
				return p.Log
			}
			return nil
		},
		Load:   load,
		Unload: unload,
	})
}

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
