package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/broker/internal/interbroker"
	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/broker/txn"
	"github.com/gregorbroker/gregor/protocol"
)

// Transactions server-side defense (KIP-890), the partition leader's part,
// as Kafka's ReplicaManager.handleProduceAppend and
// maybeSendPartitionsToTransactionCoordinator:
//
//   - Part 1. A transactional batch that would start a transaction on a
//     partition (its producer has none open there at its epoch) is
//     appended only once the transaction coordinator confirmed the
//     partition is in the producer's open transaction (AddPartitionsToTxn
//     v4+ with VerifyOnly). Otherwise the produce answers INVALID_TXN_STATE
//     (TRANSACTION_ABORTABLE from Produce v11) and nothing is written. A
//     late batch of an aborted transaction can then no longer open a
//     transaction nobody will end (a "hanging" transaction that pins the
//     last stable offset). The producer state's guard (producerstate
//     verification.go) closes the race with a marker written while the
//     coordinator answers. transaction.partition.verification.enable turns
//     this part off.
//   - Part 2, transaction version 2. Producers no longer send
//     AddPartitionsToTxn: a Produce v12+ makes the leader add the partition
//     to the transaction itself (VerifyOnly false), whatever the setting
//     above, and a TxnOffsetCommit v5+ does the same for its
//     __consumer_offsets partition.
//
// The first phase of a produce waits for the coordinator's answer: the
// appends of a connection stay in order, as they do in Kafka, which reads
// nothing more from a connection until its request is answered.

// Retrying CONCURRENT_TRANSACTIONS on the produce path (Kafka's
// add.partitions.to.txn.retry.backoff.ms and .max.ms defaults): a version
// 2 producer starts its next transaction while the coordinator still
// writes the markers of the last one, and a produce retried by the
// client would cost far more than a short wait here.
const (
	addPartitionsRetryBackoff = 20 * time.Millisecond
	addPartitionsRetryMax     = 100 * time.Millisecond
)

// produceVerification is the outcome of KIP-890's check for the
// partitions of one produce request.
type produceVerification struct {
	// code fails every partition of the request (a request whose
	// transactional batches carry more than one producer).
	code   int16
	guards map[txn.TopicPartition]producerstate.Guard
	failed map[txn.TopicPartition]int16
}

// failure returns the error a partition answers instead of appending, and
// its message; 0 when the partition may append.
func (v *produceVerification) failure(topic string, partition int32) (int16, string) {
	if v == nil {
		return 0, ""
	}
	if v.code != 0 {
		return v.code, "transactional records of more than one producer in one request"
	}
	code := v.failed[txn.TopicPartition{Topic: topic, Partition: partition}]
	switch code {
	case 0:
		return 0, ""
	case kerr.InvalidTxnState.Code:
		return code, "Partition was not added to the transaction"
	}
	return code, ""
}

// guard returns the guard a partition's append presents.
func (v *produceVerification) guard(topic string, partition int32) producerstate.Guard {
	if v == nil {
		return producerstate.NoGuard
	}
	return v.guards[txn.TopicPartition{Topic: topic, Partition: partition}]
}

// verifyProduce runs KIP-890's check for the transactional batches of a
// produce request before any of them is appended. It returns nil when
// there is nothing to check.
func (s *Server) verifyProduce(ctx context.Context, req *kmsg.ProduceRequest) *produceVerification {
	if req.TransactionID == nil || req.Version < 3 {
		// Without a transactional id there is no coordinator to ask; a
		// transactional batch then fails the append's check. Versions
		// before 3 answer UNSUPPORTED_VERSION.
		return nil
	}
	op := interbroker.ProduceOperation(req.Version)
	if op != interbroker.OpAddPartition && !s.cfg.TransactionPartitionVerificationEnable {
		return nil
	}
	type candidate struct {
		p   *partition.Partition
		tp  txn.TopicPartition
		seq int32
	}
	var (
		cands     []candidate
		pid       int64 = -1
		epoch     int16
		producers int
	)
	for i := range req.Topics {
		rt := &req.Topics[i]
		name, topicErr := s.produceTopicName(req.Version, rt)
		if topicErr != nil {
			continue
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := s.leaderPartition(name, rp.Partition)
			if p == nil {
				continue // the append path answers the error
			}
			h, err := protocol.ParseBatchHeader(rp.Records)
			if err != nil || !h.IsTransactional() || h.ProducerID < 0 {
				continue
			}
			if producers == 0 || h.ProducerID != pid || h.ProducerEpoch != epoch {
				producers++
				pid, epoch = h.ProducerID, h.ProducerEpoch
			}
			cands = append(cands, candidate{p, txn.TopicPartition{Topic: name, Partition: rp.Partition}, h.BaseSequence})
		}
	}
	switch {
	case len(cands) == 0:
		return nil
	case producers > 1:
		return &produceVerification{code: kerr.InvalidProducerIDMapping.Code}
	}

	ctx, cancel := context.WithTimeout(ctx, interbroker.RequestTimeout)
	defer cancel()
	start := time.Now()
	for {
		// Each attempt starts the verifications again, as Kafka's retry
		// does: a marker of the producer's last transaction landing
		// meanwhile ends the pending ones, and their guards with them.
		v := &produceVerification{guards: make(map[txn.TopicPartition]producerstate.Guard), failed: make(map[txn.TopicPartition]int16)}
		nowMs := s.now().UnixMilli()
		var ask []txn.TopicPartition
		for _, c := range cands {
			c.p.Mu.Lock()
			st, err := c.p.TxnStateLocked()
			guard := producerstate.NoGuard
			if err == nil {
				guard = st.StartVerification(pid, c.seq, epoch, op == interbroker.OpAddPartition, nowMs, int64(s.cfg.ProducerIDExpirationMs))
			}
			c.p.Mu.Unlock()
			switch {
			case err != nil:
				s.log.Error("start transaction verification", "topic", c.tp.Topic, "partition", c.tp.Partition, "err", err)
				v.failed[c.tp] = kerr.KafkaStorageError.Code
			case guard != producerstate.NoGuard:
				v.guards[c.tp] = guard
				ask = append(ask, c.tp)
			}
		}
		if len(ask) == 0 {
			return v
		}
		codes := s.addSender.AddOrVerify(ctx, *req.TransactionID, pid, epoch, ask, op)
		// A version 2 producer often starts its next transaction while
		// the coordinator still writes the markers of the last one:
		// retry here for a moment rather than fail the produce.
		if op == interbroker.OpAddPartition && hasCode(codes, kerr.ConcurrentTransactions.Code) && time.Since(start) < addPartitionsRetryMax {
			select {
			case <-time.After(addPartitionsRetryBackoff):
				continue
			case <-ctx.Done():
			}
		}
		for tp, code := range codes {
			if code = produceVerifyCode(code, op); code != 0 {
				v.failed[tp] = code
			}
		}
		return v
	}
}

func hasCode(codes map[txn.TopicPartition]int16, code int16) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// produceVerifyCode translates a coordinator's answer into the error a
// produce answers, as Kafka's postVerificationCallback: errors older
// clients would not retry correctly become NOT_ENOUGH_REPLICAS, which
// they retry without a metadata refresh; a version 2 producer sees
// CONCURRENT_TRANSACTIONS as it is.
func produceVerifyCode(code int16, op interbroker.Operation) int16 {
	switch code {
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ConcurrentTransactions.Code:
		if op != interbroker.OpAddPartition {
			return kerr.NotEnoughReplicas.Code
		}
	}
	return code
}

// verifyTxnOffsetCommit is KIP-890's check for a transactional offset
// commit, before its batch is appended to partition of __consumer_offsets:
// the partition must be in the producer's open transaction (TxnOffsetCommit
// v0-v4, when verification is on), or is added to it (v5+, transaction
// version 2, where the producer sends no AddOffsetsToTxn). The group
// coordinator issues this append in order with the markers of the
// partition, so a marker cannot land between the answer and the append.
// The error wraps the coordinator's *kerr.Error.
func (s *Server) verifyTxnOffsetCommit(ctx context.Context, partition int32, t group.TxnAppend) error {
	op := interbroker.TxnOffsetCommitOperation(t.APIVersion)
	if t.TransactionalID == "" || (op != interbroker.OpAddPartition && !s.cfg.TransactionPartitionVerificationEnable) {
		return nil
	}
	p := s.leaderPartition(offsetsTopic, partition)
	if p == nil {
		return fmt.Errorf("verify transaction on %s-%d: %w", offsetsTopic, partition, kerr.NotLeaderForPartition)
	}
	p.Mu.Lock()
	st, err := p.TxnStateLocked()
	ongoing := err == nil && st.HasOngoingTransaction(t.ProducerID, t.ProducerEpoch)
	p.Mu.Unlock()
	switch {
	case err != nil:
		return fmt.Errorf("verify transaction on %s-%d: %w: %v", offsetsTopic, partition, kerr.KafkaStorageError, err)
	case ongoing:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, interbroker.RequestTimeout)
	defer cancel()
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: partition}
	code := s.addSender.AddOrVerify(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, []txn.TopicPartition{tp}, op)[tp]
	if code == 0 {
		return nil
	}
	return fmt.Errorf("verify transaction %q on %s-%d: %w", t.TransactionalID, offsetsTopic, partition, kerr.ErrorForCode(code))
}

// txnCoordinatorNode is the node leading the __transaction_state
// partition of a transactional id, if it is alive.
func (s *Server) txnCoordinatorNode(id string) (int32, bool) {
	img := s.meta.Image()
	t, ok := img.Topic(txnStateTopic)
	if !ok {
		return 0, false
	}
	idx := txn.PartitionFor(id, s.cfg.TransactionStateLogNumPartitions)
	if int(idx) >= len(t.Partitions) {
		return 0, false
	}
	leader := t.Partitions[idx].Leader
	if leader < 0 {
		return 0, false
	}
	if b, ok := img.Broker(leader); !ok || b.Fenced {
		return 0, false
	}
	return leader, true
}
