package producerstate

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-890 part 1 (transactions server-side defense), as Kafka's
// VerificationStateEntry, VerificationGuard and the verification check of
// UnifiedLog.analyzeAndValidateProducerState.
//
// Before a transactional batch starts a transaction on a partition (the
// producer has no ongoing transaction there at the batch's epoch), the
// partition leader asks the transaction coordinator whether the partition
// is in the producer's open transaction (or, with transaction version 2,
// has the coordinator add it). StartVerification hands out a guard when
// that check begins and keeps it until the producer's next transactional
// append or marker; the append must present the same guard. A marker that
// lands between the check and the append clears the guard, so a stale
// answer can never start a transaction the coordinator already ended (the
// hanging transaction KIP-890 is about). A guard is unique, so an answer
// for an earlier transaction of the same producer never passes for a later
// one.

// Guard is a token for one verification of one producer on one partition.
// NoGuard verifies nothing.
type Guard uint64

// NoGuard is the guard of a batch that needs no verification, or whose
// verification did not start.
const NoGuard Guard = 0

// lastGuard numbers guards process-wide, so no two verifications share one.
var lastGuard atomic.Uint64

// verification is one producer's pending verification on a partition.
type verification struct {
	guard   Guard
	startMs int64
	// lowestSeq is the lowest first sequence seen at epoch while verifying:
	// a higher sequence may not be written before it, so a batch that
	// failed verification with a retriable error and is retried cannot be
	// overtaken and then loop on OUT_OF_ORDER_SEQUENCE_NUMBER.
	lowestSeq int32
	epoch     int16
	// supportsEpochBump marks a transaction version 2 producer, whose
	// batches start at sequence 0 on a partition that knows nothing of it.
	supportsEpochBump bool
}

// HasOngoingTransaction reports whether the producer has a transaction
// open on this partition at this epoch, so its batches need no
// verification (Kafka's UnifiedLog.hasOngoingTransaction).
func (s *State) HasOngoingTransaction(producerID int64, epoch int16) bool {
	e := s.producers[producerID]
	return e != nil && e.txnFirstOffset >= 0 && e.epoch == epoch
}

// StartVerification starts verifying a transactional batch of the producer
// whose first sequence is seq, as Kafka's
// UnifiedLog.maybeStartTransactionVerification: NoGuard when the producer
// already has a transaction open here at this epoch, else the guard of
// its pending verification, created if needed. supportsEpochBump marks a
// transaction version 2 producer. Pending verifications older than
// expirationMs (producer.id.expiration.ms) are dropped now and then, as
// Kafka's removeExpiredProducers does: a verification that failed leaves
// its entry behind.
func (s *State) StartVerification(producerID int64, seq int32, epoch int16, supportsEpochBump bool, nowMs, expirationMs int64) Guard {
	if s.HasOngoingTransaction(producerID, epoch) {
		return NoGuard
	}
	if s.verifying == nil {
		s.verifying = make(map[int64]*verification)
	}
	v := s.verifying[producerID]
	if v == nil {
		s.expireVerifications(nowMs, expirationMs)
		v = &verification{guard: Guard(lastGuard.Add(1)), startMs: nowMs, lowestSeq: seq, epoch: epoch}
		s.verifying[producerID] = v
	}
	v.supportsEpochBump = supportsEpochBump
	// Kafka's maybeUpdateLowestSequenceAndEpoch: a lower sequence at the
	// same epoch, or any sequence of a newer epoch (sequences restart).
	switch {
	case epoch == v.epoch && seq < v.lowestSeq:
		v.lowestSeq = seq
	case epoch > v.epoch:
		v.epoch, v.lowestSeq = epoch, seq
	}
	return v.guard
}

// expireVerifications drops verifications older than expirationMs once
// their number has doubled since the last sweep, which keeps the cost of
// sweeping constant per verification started.
func (s *State) expireVerifications(nowMs, expirationMs int64) {
	if len(s.verifying) < s.verifySweepAt {
		return
	}
	for id, v := range s.verifying {
		if nowMs-v.startMs >= expirationMs {
			delete(s.verifying, id)
		}
	}
	s.verifySweepAt = max(16, 2*len(s.verifying))
}

// markerEndsVerification ends the producer's pending verification when a
// marker lands, as Kafka's UnifiedLog.updateProducers: a verification
// that started before the marker answered for the transaction the marker
// ended, and its guard must not start another. Except with transaction
// version 2, where the marker of the last transaction carries the bumped
// epoch the next one already runs at: a verification at that epoch is
// for the next transaction (the coordinator adds it only once every
// marker of the last one is written), so it stands.
func (s *State) markerEndsVerification(m Marker) {
	if v := s.verifying[m.ProducerID]; v != nil && v.supportsEpochBump && v.epoch == m.ProducerEpoch {
		return
	}
	delete(s.verifying, m.ProducerID)
}

// VerificationGuard returns the guard of the producer's pending
// verification, or NoGuard.
func (s *State) VerificationGuard(producerID int64) Guard {
	if v := s.verifying[producerID]; v != nil {
		return v.guard
	}
	return NoGuard
}

// CheckVerified validates a client's transactional batch that Check
// accepted against its verification, as Kafka's
// analyzeAndValidateProducerState and ProducerAppendInfo.checkSequence do:
//
//   - with required (transaction.partition.verification.enable), a batch
//     that would start a transaction here must present the guard of the
//     producer's pending verification, else INVALID_TXN_STATE: the
//     coordinator never said the partition is in the transaction, or a
//     marker ended that transaction since;
//   - while a verification is pending, a batch may not start above its
//     lowest sequence (OUT_OF_ORDER_SEQUENCE_NUMBER);
//   - a transaction version 2 producer unknown here must start at
//     sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER).
//
// Non-transactional batches and batches without a producer id pass.
func (s *State) CheckVerified(b BatchInfo, guard Guard, required bool) error {
	if b.ProducerID < 0 || !b.IsTransactional {
		return nil
	}
	if !s.HasOngoingTransaction(b.ProducerID, b.ProducerEpoch) {
		if e := s.producers[b.ProducerID]; e != nil && b.ProducerEpoch < e.epoch {
			return fmt.Errorf("producer %d: epoch %d is older than the last seen epoch %d: %w",
				b.ProducerID, b.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
		}
		if required && (guard == NoGuard || s.VerificationGuard(b.ProducerID) != guard) {
			return fmt.Errorf("producer %d epoch %d: record was not part of an ongoing transaction: %w",
				b.ProducerID, b.ProducerEpoch, kerr.InvalidTxnState)
		}
	}
	v := s.verifying[b.ProducerID]
	if v == nil {
		return nil
	}
	if e := s.producers[b.ProducerID]; v.supportsEpochBump && b.BaseSequence != 0 && (e == nil || e.n == 0) {
		return fmt.Errorf("producer %d: sequence %d of a transaction version 2 producer with no state here, want 0: %w",
			b.ProducerID, b.BaseSequence, kerr.OutOfOrderSequenceNumber)
	}
	if b.BaseSequence > v.lowestSeq {
		return fmt.Errorf("producer %d: sequence %d above the earliest sequence %d waiting for verification: %w",
			b.ProducerID, b.BaseSequence, v.lowestSeq, kerr.OutOfOrderSequenceNumber)
	}
	return nil
}
