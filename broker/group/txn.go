package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// This file is transactional offset commits: TxnOffsetCommit and the
// transaction markers that end them, after Kafka 4's
// OffsetMetadataManager.commitTransactionalOffset and
// replayEndTransactionMarker, and CoordinatorRuntime's
// scheduleTransactionCompletion.

// TxnAppend says whose transaction a transactional append belongs to.
type TxnAppend struct {
	// TransactionalID is the producer's transactional.id, for verifying
	// that the partition was added to the transaction (KIP-890).
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// APIVersion is the TxnOffsetCommit version the offsets came with; v5
	// and up are transaction version 2, where the broker adds the
	// partition to the transaction itself.
	APIVersion int16
}

// TxnMarker is a transaction marker for a __consumer_offsets partition, as
// one partition of a WriteTxnMarkers request.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the marker's transaction version (0 before
	// WriteTxnMarkers v2).
	TransactionVersion int16
}

// TxnStore is a Store that also writes the two kinds of batches
// transactions need. TxnOffsetCommit and CompleteTransaction require it;
// with a plain Store they fail with UNSUPPORTED_VERSION. Both calls are
// issued in order with Append on the same partition and return, like
// Append, once the batch is durable or failed; errors wrapping a
// *kerr.Error reach clients as Append's do (INVALID_PRODUCER_EPOCH,
// PRODUCER_FENCED, TRANSACTION_COORDINATOR_FENCED pass through).
type TxnStore interface {
	Store
	// AppendTxn writes records as one transactional batch (the
	// transactional attribute set) with txn's producer id and epoch and no
	// sequence, after the checks a transactional produce gets: the
	// producer epoch, and the transaction's verification.
	AppendTxn(ctx context.Context, partition int32, txn TxnAppend, records []Record) error
	// AppendMarker writes a control batch holding the COMMIT or ABORT
	// marker, after the checks WriteTxnMarkers makes.
	AppendMarker(ctx context.Context, partition int32, marker TxnMarker) error
}

// TxnOffsetCommit handles TxnOffsetCommit v0-v5. The offsets are written to
// __consumer_offsets as a transactional batch of the request's producer and
// stay invisible to OffsetFetch until CompleteTransaction commits them. The
// answer comes once they are durable. As for OffsetCommit, the broker
// answers UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) Pending[*kmsg.TxnOffsetCommitResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.TxnOffsetCommitResponse)) {
		m.txnOffsetCommit(req, reply)
	}, func(code int16) *kmsg.TxnOffsetCommitResponse { return txnCommitResponse(req, code) })
	return coord.Then(p, func(r *kmsg.TxnOffsetCommitResponse) *kmsg.TxnOffsetCommitResponse {
		r.Version = req.Version
		if req.Version < 2 {
			// Clients before 2.0 may crash on COORDINATOR_LOAD_IN_PROGRESS
			// (KAFKA-7296); Kafka answers them COORDINATOR_NOT_AVAILABLE.
			for i := range r.Topics {
				for j := range r.Topics[i].Partitions {
					if p := &r.Topics[i].Partitions[j]; p.ErrorCode == errCoordinatorLoadInProgress {
						p.ErrorCode = errCoordinatorNotAvailable
					}
				}
			}
		}
		return r
	})
}

// CompleteTransaction ends a producer's transaction on a __consumer_offsets
// partition: it writes the marker through TxnStore.AppendMarker, after the
// appends already issued there, and then commits the producer's pending
// offsets (each unless a later commit of its partition exists) or drops
// them. As in Kafka 4, where KafkaApis hands __consumer_offsets markers to
// the group coordinator, the broker calls this instead of writing the
// marker itself. It returns nil once the marker is durable; an error wraps
// the *kerr.Error for the WriteTxnMarkers answer: NOT_LEADER_OR_FOLLOWER
// when this coordinator does not serve the partition (yet), else the
// store's.
func (c *Coordinator) CompleteTransaction(ctx context.Context, partition int32, marker TxnMarker) error {
	if partition < 0 || partition >= c.cfg.OffsetsTopicPartitions {
		return fmt.Errorf("complete transaction of producer %d on __consumer_offsets-%d: %w", marker.ProducerID, partition, kerr.UnknownTopicOrPartition)
	}
	return coord.Call(c.rt, ctx, c.rt.ShardOf(partition), func(m *machine, reply func(error)) {
		m.completeTransaction(partition, marker, reply)
	}, func(code int16) error {
		return fmt.Errorf("complete transaction of producer %d on __consumer_offsets-%d: %w", marker.ProducerID, partition, markerError(code))
	})
}

// markerError maps the coordinator's state to the code the transaction
// coordinator retries on, as KafkaApis.handleWriteTxnMarkersRequest does.
func markerError(code int16) error {
	switch code {
	case errCoordinatorNotAvailable, errCoordinatorLoadInProgress, errNotCoordinator:
		return kerr.NotLeaderForPartition
	}
	return kerr.ErrorForCode(code)
}

func txnCommitResponse(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// txnOffsetCommit is commitTransactionalOffset: validate the group and
// member, append the offsets as the producer's transactional batch, and
// keep them pending once durable.
func (m *machine) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	if req.Group == "" {
		reply(txnCommitResponse(req, errInvalidGroupID))
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		reply(txnCommitResponse(req, code))
		return
	}
	var (
		store   *offsetStore
		created *classicGroup
	)
	if cg := p.consumers[req.Group]; cg != nil {
		if code := validateConsumerTxnCommit(cg, req); code != 0 {
			reply(txnCommitResponse(req, code))
			return
		}
		store = &cg.offsetStore
	} else if sg := p.streams[req.Group]; sg != nil {
		if code := validateStreamsTxnCommit(sg, req); code != 0 {
			reply(txnCommitResponse(req, code))
			return
		}
		store = &sg.offsetStore
	} else {
		g := p.groups[req.Group]
		if g == nil {
			if req.Generation >= 0 {
				reply(txnCommitResponse(req, errIllegalGeneration))
				return
			}
			g = newClassicGroup(req.Group, p.id, m.nowMs())
			p.groups[req.Group] = g
			created = g
		}
		if code := validateClassicTxnCommit(g, req); code != 0 {
			reply(txnCommitResponse(req, code))
			return
		}
		store = &g.offsetStore
	}

	now := m.nowMs()
	resp := txnCommitResponse(req, 0)
	var (
		recs    []Record
		tps     []tp
		values  []offsetValue
		pending []*inflightCommit
	)
	for i, t := range req.Topics {
		for j, pt := range t.Partitions {
			md := ""
			if pt.Metadata != nil {
				md = *pt.Metadata
			}
			if utf16Len(md) > int(m.cfg.OffsetMetadataMaxBytes) {
				resp.Topics[i].Partitions[j].ErrorCode = errOffsetMetadataTooLarge
				continue
			}
			k := tp{t.Topic, pt.Partition}
			// TxnOffsetCommit carries no retention time.
			v := offsetValue{offset: pt.Offset, leaderEpoch: pt.LeaderEpoch, metadata: md, commitTimestamp: now, expireTimestamp: -1, order: p.takeOrder()}
			ic := store.inflight[k]
			if ic == nil {
				ic = &inflightCommit{}
				store.inflight[k] = ic
			}
			ic.n++
			recs = append(recs, offsetCommitRecord(req.Group, k, v))
			tps = append(tps, k)
			values = append(values, v)
			pending = append(pending, ic)
		}
	}
	if len(recs) == 0 {
		m.dropIfUnused(p, created)
		reply(resp)
		return
	}
	txn := TxnAppend{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, APIVersion: req.Version}
	m.fx.appendTxn(p.id, txn, recs, func(err error) {
		if err == nil {
			// The transaction is open for the group even if a tombstone
			// issued meanwhile deletes the offsets below, as a replay of
			// the log would find.
			p.txns.begin(req.ProducerID, req.Group)
		}
		for i, k := range tps {
			ic := pending[i]
			if store.inflight[k] != ic {
				continue // a tombstone was issued after this commit
			}
			ic.n--
			if ic.n == 0 {
				delete(store.inflight, k)
			}
			if err == nil {
				p.txns.put(req.ProducerID, req.Group, k, values[i])
			}
		}
		if err != nil {
			m.dropIfUnused(p, created)
			reply(txnCommitResponse(req, appendErrorCode(err)))
			return
		}
		reply(resp)
	})
}

// dropIfUnused deletes a simple group created for a commit that wrote
// nothing, unless something else uses it by now.
func (m *machine) dropIfUnused(p *partitionState, g *classicGroup) {
	if g != nil && m.current(g) && g.isSimple() && len(g.offsets) == 0 && len(g.inflight) == 0 && !p.txns.hasOpen(g.id) {
		delete(p.groups, g.id)
		g.transitionTo(stateDead, m.nowMs())
	}
}

// validateClassicTxnCommit is ClassicGroup.validateOffsetCommit for a
// transactional commit: requests before v3 carry no member, and the group
// state is not enforced.
func validateClassicTxnCommit(g *classicGroup, req *kmsg.TxnOffsetCommitRequest) int16 {
	if g.is(stateDead) {
		return errCoordinatorNotAvailable
	}
	if req.Generation < 0 && g.is(stateEmpty) {
		return 0
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return errIllegalGeneration
		}
	}
	return 0
}

// validateConsumerTxnCommit is ConsumerGroup.validateOffsetCommit for a
// transactional commit: a stale member epoch is ILLEGAL_GENERATION, which
// is what transactional producers understand.
func validateConsumerTxnCommit(g *consumerGroup, req *kmsg.TxnOffsetCommitRequest) int16 {
	if req.Generation < 0 && len(g.members) == 0 {
		return 0
	}
	mem := g.members[req.MemberID]
	switch {
	case mem == nil:
		return errUnknownMemberID
	case req.Generation != mem.epoch:
		return errIllegalGeneration
	}
	return 0
}

// completeTransaction writes a marker behind the partition's appends and
// applies it once durable.
func (m *machine) completeTransaction(partition int32, marker TxnMarker, reply func(error)) {
	p := m.partitions[partition]
	switch {
	case p == nil:
		reply(fmt.Errorf("complete transaction of producer %d: __consumer_offsets-%d is not loaded here: %w", marker.ProducerID, partition, kerr.NotLeaderForPartition))
		return
	case p.loading:
		reply(fmt.Errorf("complete transaction of producer %d: __consumer_offsets-%d is loading: %w", marker.ProducerID, partition, kerr.NotLeaderForPartition))
		return
	}
	m.fx.appendMarker(partition, marker, func(err error) {
		if errors.Is(err, context.Canceled) {
			// The coordinator is closing: the partition moves.
			err = fmt.Errorf("%w: %w", kerr.NotLeaderForPartition, err)
		}
		if err != nil {
			reply(fmt.Errorf("write marker of producer %d to __consumer_offsets-%d: %w", marker.ProducerID, partition, err))
			return
		}
		if m.partitions[partition] == p {
			// Unloaded meanwhile, the next load replays the marker.
			n := p.txns.applyMarker(p.groups, p.consumers, p.streams, partition, marker.ProducerID, marker.Commit, m.nowMs())
			m.log.Debug("transaction ended", "partition", partition, "producer", marker.ProducerID, "commit", marker.Commit, "offsets", n)
		}
		reply(nil)
	})
}
