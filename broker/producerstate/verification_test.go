package producerstate

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func verifyBatch(pid int64, epoch int16, seq, n int32) BatchInfo {
	return BatchInfo{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastSequence: LastSequence(seq, n-1), IsTransactional: true, NumRecords: n}
}

// TestVerificationGuard: a transactional batch that would start a
// transaction passes only with the guard of the producer's pending
// verification; a marker written while the coordinator answers voids the
// guard (the late batch of an aborted transaction), and a new verification
// hands out a new guard that the old one does not pass for.
func TestVerificationGuard(t *testing.T) {
	const day = 86400000
	st := New()
	b := verifyBatch(7, 0, 0, 2)
	if err := st.CheckVerified(b, NoGuard, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("unverified batch: %v, want INVALID_TXN_STATE", err)
	}
	if err := st.CheckVerified(b, NoGuard, false); err != nil {
		t.Fatalf("unverified batch with verification off: %v", err)
	}
	g := st.StartVerification(7, 0, 0, false, 1000, day)
	if g == NoGuard || st.VerificationGuard(7) != g {
		t.Fatalf("guard %d, pending %d", g, st.VerificationGuard(7))
	}
	if again := st.StartVerification(7, 0, 0, false, 1001, day); again != g {
		t.Fatalf("a retry got guard %d, want the pending %d", again, g)
	}

	// The abort marker lands between the coordinator's answer and the
	// append: the guard is gone.
	st.ApplyMarker(Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 1}, 10, 1002)
	if err := st.CheckVerified(b, g, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("batch verified before a marker: %v, want INVALID_TXN_STATE", err)
	}
	g2 := st.StartVerification(7, 0, 0, false, 1003, day)
	if g2 == NoGuard || g2 == g {
		t.Fatalf("new verification guard %d (old %d)", g2, g)
	}
	if err := st.CheckVerified(b, g, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("stale guard: %v, want INVALID_TXN_STATE", err)
	}
	if err := st.CheckVerified(b, g2, true); err != nil {
		t.Fatalf("verified batch: %v", err)
	}
	st.Update(b, 11, 12, 1004)
	if st.VerificationGuard(7) != NoGuard {
		t.Fatal("the transaction's first batch did not end the verification")
	}
	// Later batches of the open transaction need no guard.
	if g := st.StartVerification(7, 2, 0, false, 1005, day); g != NoGuard {
		t.Fatalf("ongoing transaction got guard %d", g)
	}
	if err := st.CheckVerified(verifyBatch(7, 0, 2, 1), NoGuard, true); err != nil {
		t.Fatalf("batch of an open transaction: %v", err)
	}
	// A marker of a bumped epoch (transaction version 2) fences the old
	// epoch before verification is looked at.
	st.ApplyMarker(Marker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 1, Commit: true, TransactionVersion: 2}, 13, 1006)
	if err := st.CheckVerified(verifyBatch(7, 0, 3, 1), NoGuard, true); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("epoch older than the marker's: %v, want INVALID_PRODUCER_EPOCH", err)
	}
}

// TestVerificationSequences: while a verification is pending, a batch may
// not overtake the lowest sequence waiting for it, and a transaction
// version 2 producer new to the partition starts at sequence 0.
func TestVerificationSequences(t *testing.T) {
	const day = 86400000
	st := New()
	g := st.StartVerification(9, 5, 3, false, 0, day)
	st.StartVerification(9, 3, 3, false, 0, day) // a lower retry lowers the bar
	if err := st.CheckVerified(verifyBatch(9, 3, 5, 1), g, true); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence 5 above waiting 3: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	if err := st.CheckVerified(verifyBatch(9, 3, 3, 1), g, true); err != nil {
		t.Fatalf("sequence 3: %v", err)
	}
	// A newer epoch restarts the sequences.
	st.StartVerification(9, 0, 4, false, 0, day)
	if err := st.CheckVerified(verifyBatch(9, 4, 0, 1), g, true); err != nil {
		t.Fatalf("new epoch at 0: %v", err)
	}

	g2 := st.StartVerification(11, 4, 0, true, 0, day)
	if err := st.CheckVerified(verifyBatch(11, 0, 4, 1), g2, true); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("TV2 producer unknown here at sequence 4: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
}

// TestVerificationExpiry: verifications that never appended are dropped
// after producer.id.expiration.ms, so failed ones do not pile up.
func TestVerificationExpiry(t *testing.T) {
	st := New()
	for pid := int64(0); pid < 100; pid++ {
		st.StartVerification(pid, 0, 0, false, 0, 1000)
	}
	if n := len(st.verifying); n != 100 {
		t.Fatalf("%d pending verifications, want 100", n)
	}
	for pid := int64(100); pid < 200; pid++ {
		st.StartVerification(pid, 0, 0, false, 5000, 1000)
	}
	if n := len(st.verifying); n > 150 {
		t.Fatalf("%d pending verifications after the first hundred expired, want at most 150", n)
	}
	if st.VerificationGuard(199) == NoGuard {
		t.Fatal("a fresh verification was dropped")
	}
}

// TestVerificationSurvivesTV2Marker: a transaction version 2 producer
// verifying its next transaction at the bumped epoch keeps its guard when
// the last transaction's marker (which carries that epoch) lands during
// the check; a classic producer's verification ends with the marker.
func TestVerificationSurvivesTV2Marker(t *testing.T) {
	const day = 86400000
	st := New()
	st.Update(verifyBatch(3, 4, 0, 1), 0, 0, 1) // the last transaction, at epoch 4
	g := st.StartVerification(3, 0, 5, true, 2, day)
	st.ApplyMarker(Marker{ProducerID: 3, ProducerEpoch: 5, Commit: true, TransactionVersion: 2}, 1, 3)
	if err := st.CheckVerified(verifyBatch(3, 5, 0, 1), g, true); err != nil {
		t.Fatalf("next transaction after the marker of the last: %v", err)
	}

	st.Update(verifyBatch(8, 0, 0, 1), 2, 2, 4)
	g = st.StartVerification(8, 1, 0, false, 5, day)
	st.ApplyMarker(Marker{ProducerID: 8, ProducerEpoch: 0}, 3, 6)
	if err := st.CheckVerified(verifyBatch(8, 0, 1, 1), g, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("classic batch verified before the marker: %v, want INVALID_TXN_STATE", err)
	}
}
