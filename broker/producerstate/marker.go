package producerstate

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Marker is a transaction marker (a control batch's commit or abort
// record) written for one producer.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the WriteTxnMarkers request's transaction
	// version: 0 or 1 for the classic protocol, 2 for KIP-890's, where the
	// coordinator bumps the epoch before writing the marker.
	TransactionVersion int16
}

// CompletedTxn is a transaction ended by a marker: FirstOffset is its first
// batch, LastOffset the marker's offset.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	Aborted     bool
}

// CheckMarker validates a marker from the transaction coordinator before it
// is appended, as Kafka's ProducerAppendInfo.appendEndTxnMarker: a marker
// older than the producer's epoch (or, with transaction version 2, not
// newer) is INVALID_PRODUCER_EPOCH, except a version 2 retry of a marker
// already written (same epoch, no transaction open); a coordinator epoch
// older than the last one seen is TRANSACTION_COORDINATOR_FENCED.
func (s *State) CheckMarker(m Marker) error {
	e := s.producers[m.ProducerID]
	if e == nil {
		e = newEntry()
	}
	invalid := m.ProducerEpoch < e.epoch
	if m.TransactionVersion >= 2 {
		invalid = m.ProducerEpoch <= e.epoch
		if m.ProducerEpoch == e.epoch && e.txnFirstOffset < 0 {
			invalid = false
		}
	}
	if invalid {
		return fmt.Errorf("producer %d: marker epoch %d against last seen epoch %d (transaction version %d): %w",
			m.ProducerID, m.ProducerEpoch, e.epoch, m.TransactionVersion, kerr.InvalidProducerEpoch)
	}
	if e.coordinatorEpoch > m.CoordinatorEpoch {
		return fmt.Errorf("producer %d: coordinator epoch %d is older than %d: %w",
			m.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch, kerr.TransactionCoordinatorFenced)
	}
	return nil
}

// ApplyMarker records a marker appended at offset with the given record
// timestamp, after CheckMarker or when replaying the log (without checks).
// It ends the producer's open transaction, returned with ok set; a marker
// with no transaction open (nothing written in it on this partition) ends
// nothing. The transaction stops bounding LastStableOffsetFirst at once:
// keeping the last stable offset below a marker not yet replicated is the
// caller's.
func (s *State) ApplyMarker(m Marker, offset, timestamp int64) (txn CompletedTxn, ok bool) {
	e := s.producers[m.ProducerID]
	if e == nil {
		e = newEntry()
		s.producers[m.ProducerID] = e
	}
	if e.txnFirstOffset >= 0 {
		txn = CompletedTxn{ProducerID: m.ProducerID, FirstOffset: e.txnFirstOffset, LastOffset: offset, Aborted: !m.Commit}
		ok = true
	}
	e.setEpoch(m.ProducerEpoch)
	e.coordinatorEpoch = m.CoordinatorEpoch
	e.txnFirstOffset = -1
	e.lastTimestamp = timestamp
	delete(s.inTxn, m.ProducerID)
	s.markerEndsVerification(m)
	return txn, ok
}
