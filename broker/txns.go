package broker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/broker/internal/coordhost"
	"github.com/gregorbroker/gregor/broker/internal/interbroker"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/broker/txn"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/storage"
)

// Transactions: the transaction coordinator (broker/txn) keeps its state
// in __transaction_state, created on the first FindCoordinator for a
// transactional id, and moves with the leadership of that topic's
// partitions like the group coordinator. To end a transaction it writes
// commit or abort markers to every partition of the transaction: through
// writeMarker, the path WriteTxnMarkers (key 27) also serves, where this
// node leads the partition, and with WriteTxnMarkers to the leader
// elsewhere (broker/internal/interbroker).

const txnStateTopic = txn.TransactionStateTopic

// txnCoordinator connects the transaction coordinator to the broker.
type txnCoordinator struct {
	coord  *txn.Coordinator
	loader *coordhost.Loader
	// markers sends the coordinator's markers to the partition leaders.
	markers *interbroker.MarkerSender
}

func (s *Server) startTxnCoordinator() error {
	cfg := txn.DefaultConfig()
	cfg.TransactionStateTopicPartitions = s.cfg.TransactionStateLogNumPartitions
	cfg.Shards = runtime.GOMAXPROCS(0)
	cfg.TransactionMaxTimeoutMs = s.cfg.TransactionMaxTimeoutMs
	cfg.TransactionalIDExpirationMs = int64(s.cfg.TransactionalIDExpirationMs)
	cfg.AbortTimedOutTransactionCleanupIntervalMs = int64(s.cfg.TransactionAbortTimedOutTransactionCleanupIntervalMs)
	cfg.RemoveExpiredTransactionalIDCleanupIntervalMs = int64(s.cfg.TransactionRemoveExpiredTransactionCleanupIntervalMs)
	// The finalized transaction.version (18_api_versions.go).
	cfg.TransactionVersion = transactionVersion
	// Kafka bounds the coordinator's appends and marker requests with
	// request.timeout.ms; Gregor's inter-broker requests use the same 30 s.
	cfg.RequestTimeoutMs = interbroker.RequestTimeout.Milliseconds()
	cfg.Logger = s.log.With("component", "transactions")
	markers := interbroker.NewMarkerSender(s.cfg.NodeID, s.cfg.InterBrokerListenerName,
		func() *image.Image { return s.meta.Image() }, s.writeMarker, s.interBroker.kgoOpts()...)
	coord, err := txn.New(cfg, txn.Deps{
		Store:   internalStore{s, txnStateTopic},
		Markers: markers,
		AllocateProducerID: func(ctx context.Context) (int64, error) {
			id, _, err := s.producerIDs.Next(ctx)
			return id, err
		},
		PartitionForGroup: func(groupID string) int32 {
			return group.PartitionFor(groupID, s.cfg.OffsetsTopicNumPartitions)
		},
		PartitionExists: func(topic string, partition int32) bool {
			t, ok := s.meta.Image().Topic(topic)
			return ok && partition >= 0 && int(partition) < len(t.Partitions)
		},
		Clock: group.SystemClock{},
	})
	if err != nil {
		return fmt.Errorf("start transaction coordinator: %w", err)
	}
	// The connections to other leaders go when the server stops; a
	// marker send after that fails and the stopping coordinator drops it.
	s.goTracked(func() {
		<-s.ctx.Done()
		markers.Clients().Close()
	})
	s.txns = &txnCoordinator{
		coord:   coord,
		markers: markers,
		loader: s.newCoordinatorLoader(txnStateTopic,
			func(ctx context.Context, partition, epoch int32, log *storage.Log) error {
				return coord.Load(ctx, partition, epoch, coordhost.ReadLog(ctx, log))
			},
			coord.Unload),
	}
	return nil
}

// ensureInternalTopic creates an internal topic if it does not exist yet
// and returns the image that holds it.
func (s *Server) ensureInternalTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) (*image.Image, error) {
	img := s.meta.Image()
	if _, ok := img.Topic(name); ok {
		return img, nil
	}
	res := s.ctrl.CreateTopics(ctx, []controller.CreateTopic{{
		Name: name, NumPartitions: partitions, ReplicationFactor: rf, Configs: configs,
	}}, false)
	if err := res[0].Err; err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, err
	}
	// The controller answers once the topic committed, or at once with
	// TOPIC_ALREADY_EXISTS while another request's creation of it is in
	// flight; this node's image applies the commit a moment later. Until
	// it holds the topic the caller would answer COORDINATOR_NOT_AVAILABLE
	// to a client that merely came second.
	img, err := s.awaitTopicInImage(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.reconcile(img); err != nil {
		s.log.Error("apply metadata", "err", err)
	}
	return img, nil
}

// awaitTopicInImage polls this node's metadata image until it holds topic
// name or ctx ends. It runs only on the rare creation of an internal
// topic, so a short poll is simpler than a subscription.
func (s *Server) awaitTopicInImage(ctx context.Context, name string) (*image.Image, error) {
	const every = 2 * time.Millisecond
	for {
		img := s.meta.Image()
		if _, ok := img.Topic(name); ok {
			return img, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s in the metadata image: %w", name, ctx.Err())
		case <-time.After(every):
		}
	}
}

func (s *Server) ensureTxnTopic(ctx context.Context) (*image.Image, error) {
	return s.ensureInternalTopic(ctx, txnStateTopic, s.cfg.TransactionStateLogNumPartitions, s.cfg.TransactionStateLogReplicationFactor,
		map[string]string{
			"cleanup.policy":      "compact",
			"compression.type":    "uncompressed",
			"min.insync.replicas": strconv.Itoa(int(s.cfg.TransactionStateLogMinISR)),
			"segment.bytes":       strconv.Itoa(int(s.cfg.TransactionStateLogSegmentBytes)),
		})
}

// writeMarker writes a transaction marker to a partition this node leads,
// for the local coordinator or a remote one's WriteTxnMarkers.
// Markers for __consumer_offsets go through the group coordinator, which
// writes them in order with its pending commits and then makes the
// producer's offsets visible or drops them.
func (s *Server) writeMarker(ctx context.Context, topic string, partition int32, m producerstate.Marker) error {
	if topic == offsetsTopic {
		return s.groups.coord.CompleteTransaction(ctx, partition, group.TxnMarker{
			ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
			Commit: m.Commit, TransactionVersion: m.TransactionVersion,
		})
	}
	return s.writeMarkerLocal(ctx, topic, partition, m)
}

// writeMarkerLocal appends a commit or abort control batch for a producer to a
// partition this node leads, completes the producer's transaction there
// (moving the last stable offset; the log indexes an aborted one), and
// waits until the marker is committed.
func (s *Server) writeMarkerLocal(ctx context.Context, topic string, partition int32, m producerstate.Marker) error {
	p := s.leaderPartition(topic, partition)
	if p == nil {
		if t, ok := s.meta.Image().Topic(topic); !ok || int(partition) >= len(t.Partitions) {
			return fmt.Errorf("marker for %s-%d: %w", topic, partition, txn.ErrPartitionDeleted)
		}
		return fmt.Errorf("marker for %s-%d: %w", topic, partition, kerr.NotLeaderForPartition)
	}
	now := s.now().UnixMilli()
	typ := kmsg.ControlRecordKeyTypeAbort
	if m.Commit {
		typ = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
	value := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: m.CoordinatorEpoch}).AppendTo(nil)
	batch, err := protocol.BuildBatch(protocol.BatchHeader{
		Attributes:     protocol.AttrTransactional | protocol.AttrControl,
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, BaseSequence: -1,
	}, []protocol.Record{{Key: key, Value: value}}, protocol.CodecNone)
	if err != nil {
		return fmt.Errorf("marker for %s-%d: %w", topic, partition, err)
	}
	p.Mu.Lock()
	st, err := p.ProducerStateLocked()
	if err == nil {
		err = st.CheckMarker(m)
	}
	var offset int64
	if err == nil {
		offset, err = p.AppendLocked(batch, now)
	}
	if err == nil {
		// The log indexed an aborted transaction as it appended the
		// marker (storage's .txnindex).
		st.ApplyMarker(m, offset, now)
		p.UpdateLastStableOffsetLocked()
	}
	p.Mu.Unlock()
	if err == nil {
		err = p.Durable(offset)
	}
	if err != nil {
		return fmt.Errorf("marker for %s-%d: %w", topic, partition, err)
	}
	return p.WaitHighWatermark(ctx, offset+1)
}

// txnContext bounds a request to the transaction coordinator.
func (s *Server) txnContext(r *request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.conn.ctx, 30*time.Second)
}
