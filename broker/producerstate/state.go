// Package producerstate keeps one partition's producer state for idempotent
// and transactional producers, as Kafka's ProducerStateManager does: per
// producer id the epoch, the metadata of the last five appended batches (to
// answer retried batches with their original offsets), the last timestamp,
// the coordinator epoch and the first offset of the ongoing transaction.
//
// The package is sans-I/O: the caller reads and writes snapshot files and
// passes their bytes. A State is not safe for concurrent use; the partition
// guards it with its append lock.
package producerstate

import (
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	// NumBatchesToRetain is how many batches per producer are remembered
	// for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN), which is
	// why clients keep at most five requests in flight.
	NumBatchesToRetain = 5
	// NoProducerID marks a batch written without a producer id.
	NoProducerID int64 = -1
	// NoProducerEpoch is the epoch of a producer known only by id.
	NoProducerEpoch int16 = -1
	// NoSequence is the sequence of a producer with no cached batch.
	NoSequence int32 = -1
	// DefaultExpirationMs is producer.id.expiration.ms's default (one day).
	DefaultExpirationMs int64 = 86400000
)

// BatchInfo is what producer state needs from a record batch's header.
type BatchInfo struct {
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	LastSequence    int32 // LastSequence(BaseSequence, LastOffsetDelta)
	IsTransactional bool
	NumRecords      int32
}

// Duplicate describes an already appended batch that a retried batch
// repeats: the broker answers success with these offsets and writes
// nothing. Timestamp is the original batch's max timestamp, which Kafka
// returns as the response's LogAppendTime for a duplicate.
type Duplicate struct {
	FirstOffset int64
	LastOffset  int64
	Timestamp   int64
}

// BatchMetadata is what is remembered of an appended batch (Kafka's
// BatchMetadata). OffsetDelta is lastOffset - firstOffset.
type BatchMetadata struct {
	LastSeq     int32
	LastOffset  int64
	OffsetDelta int32
	Timestamp   int64
}

// FirstSeq is the batch's first sequence, wrapping below zero to
// math.MaxInt32 as Kafka's DefaultRecordBatch.decrementSequence.
func (m BatchMetadata) FirstSeq() int32 { return decrementSequence(m.LastSeq, m.OffsetDelta) }

// FirstOffset is the offset of the batch's first record.
func (m BatchMetadata) FirstOffset() int64 { return m.LastOffset - int64(m.OffsetDelta) }

// ProducerInfo is one producer's state as DescribeProducers reports it.
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1 without an ongoing transaction
}

// entry is one producer's state (Kafka's ProducerStateEntry).
type entry struct {
	epoch            int16
	coordinatorEpoch int32
	lastTimestamp    int64
	txnFirstOffset   int64 // -1 without an ongoing transaction
	// batches is a ring of the last appended batches, oldest at head.
	batches [NumBatchesToRetain]BatchMetadata
	head    int
	n       int
}

func newEntry() *entry {
	return &entry{epoch: NoProducerEpoch, coordinatorEpoch: -1, lastTimestamp: -1, txnFirstOffset: -1}
}

func (e *entry) last() (BatchMetadata, bool) {
	if e.n == 0 {
		return BatchMetadata{}, false
	}
	return e.batches[(e.head+e.n-1)%NumBatchesToRetain], true
}

func (e *entry) lastSeq() int32 {
	if b, ok := e.last(); ok {
		return b.LastSeq
	}
	return NoSequence
}

// setEpoch moves to a new epoch, forgetting the batches of the old one:
// sequences restart with each epoch.
func (e *entry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.n, e.head = 0, 0
		e.epoch = epoch
	}
}

func (e *entry) addBatch(m BatchMetadata) {
	if e.n == NumBatchesToRetain {
		e.batches[e.head] = m
		e.head = (e.head + 1) % NumBatchesToRetain
		return
	}
	e.batches[(e.head+e.n)%NumBatchesToRetain] = m
	e.n++
}

func (e *entry) findDuplicate(epoch int16, firstSeq, lastSeq int32) (BatchMetadata, bool) {
	if epoch != e.epoch {
		return BatchMetadata{}, false
	}
	for i := 0; i < e.n; i++ {
		m := e.batches[(e.head+i)%NumBatchesToRetain]
		if m.LastSeq == lastSeq && m.FirstSeq() == firstSeq {
			return m, true
		}
	}
	return BatchMetadata{}, false
}

func (e *entry) info(id int64) ProducerInfo {
	return ProducerInfo{
		ProducerID:            id,
		Epoch:                 e.epoch,
		LastSequence:          e.lastSeq(),
		LastTimestamp:         e.lastTimestamp,
		CoordinatorEpoch:      e.coordinatorEpoch,
		CurrentTxnStartOffset: e.txnFirstOffset,
	}
}

// State is one partition's producer state.
type State struct {
	producers map[int64]*entry
	// inTxn holds the producers with an ongoing transaction, so the first
	// unstable offset is found without scanning every producer.
	inTxn map[int64]struct{}
	// verifying holds the producers whose KIP-890 verification is pending
	// (verification.go); a transactional batch or marker ends it.
	verifying     map[int64]*verification
	verifySweepAt int
	// last is the producer's state before the latest Update, which a
	// snapshot taken while that batch is being appended leaves out.
	last lastUpdate
}

// lastUpdate is what Update changed last: the batch's producer and first
// offset, and a copy of the producer's entry before it (nil if new).
type lastUpdate struct {
	set         bool
	producerID  int64
	firstOffset int64
	before      *entry
}

// New returns an empty State.
func New() *State {
	return &State{producers: make(map[int64]*entry), inTxn: make(map[int64]struct{})}
}

// Len is the number of producers with state.
func (s *State) Len() int { return len(s.producers) }

// LastSequence returns the sequence of a batch's last record, base +
// lastOffsetDelta, wrapping past math.MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.lastSequence; NoSequence stays NoSequence.
func LastSequence(base, lastOffsetDelta int32) int32 {
	if base == NoSequence {
		return NoSequence
	}
	return incrementSequence(base, lastOffsetDelta)
}

// incrementSequence and decrementSequence wrap as Kafka's (int32
// arithmetic wraps in Go as in Java, so odd inputs agree too).
func incrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return math.MaxInt32 - (dec - seq) + 1
	}
	return seq - dec
}

// inSequence reports whether next follows last, wrapping after MaxInt32.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// Check validates a client's batch against the producer state before it is
// appended, with Kafka's rules (UnifiedLog.analyzeAndValidateProducerState
// and ProducerAppendInfo for AppendOrigin.CLIENT):
//
//   - a batch repeating the epoch and exact sequence range of one of the
//     producer's last five batches is a duplicate: dup is set, err is nil;
//   - an epoch older than the producer's is INVALID_PRODUCER_EPOCH;
//   - a newer epoch must start at sequence 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER, unless the producer has no epoch yet;
//   - the same epoch must continue at the last sequence + 1 (0 after
//     MaxInt32), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - an unknown producer (never seen, expired, or its batches removed by
//     retention) is accepted at any sequence: since KIP-360 (Kafka 2.5)
//     the broker no longer answers UNKNOWN_PRODUCER_ID here;
//   - a non-transactional batch while the producer has a transaction open
//     is INVALID_TXN_STATE.
//
// Batches without a producer id have no state: Check returns nil, nil.
// Transaction verification (KIP-890) is the caller's.
func (s *State) Check(b BatchInfo) (*Duplicate, error) {
	if b.ProducerID < 0 {
		return nil, nil
	}
	// Kafka rejects a batch whose count and offset range disagree before
	// producer state is consulted; a LastSequence that disagrees with the
	// record count would make the cached ranges meaningless.
	if b.NumRecords <= 0 || LastSequence(b.BaseSequence, b.NumRecords-1) != b.LastSequence {
		return nil, fmt.Errorf("producer %d: batch of %d records with sequences %d..%d: %w",
			b.ProducerID, b.NumRecords, b.BaseSequence, b.LastSequence, kerr.InvalidRecord)
	}
	e := s.producers[b.ProducerID]
	if e == nil {
		return nil, nil
	}
	if m, ok := e.findDuplicate(b.ProducerEpoch, b.BaseSequence, b.LastSequence); ok {
		return &Duplicate{FirstOffset: m.FirstOffset(), LastOffset: m.LastOffset, Timestamp: m.Timestamp}, nil
	}
	if b.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("producer %d: epoch %d is older than the last seen epoch %d: %w",
			b.ProducerID, b.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if b.ProducerEpoch != e.epoch {
		if b.BaseSequence != 0 && e.epoch != NoProducerEpoch {
			return nil, fmt.Errorf("producer %d: new epoch %d (was %d) must start at sequence 0, got %d: %w",
				b.ProducerID, b.ProducerEpoch, e.epoch, b.BaseSequence, kerr.OutOfOrderSequenceNumber)
		}
	} else if e.epoch != NoProducerEpoch && !inSequence(e.lastSeq(), b.BaseSequence) {
		return nil, fmt.Errorf("producer %d epoch %d: sequence %d does not follow the last appended sequence %d: %w",
			b.ProducerID, b.ProducerEpoch, b.BaseSequence, e.lastSeq(), kerr.OutOfOrderSequenceNumber)
	}
	if e.txnFirstOffset >= 0 && !b.IsTransactional {
		return nil, fmt.Errorf("producer %d: non-transactional batch while the transaction from offset %d is open: %w",
			b.ProducerID, e.txnFirstOffset, kerr.InvalidTxnState)
	}
	return nil, nil
}

// Update records a batch that Check accepted and the log appended at
// firstOffset..lastOffset; timestamp is the batch's max timestamp (the
// append time under LogAppendTime). Only the last five batches of a
// producer are kept, and a new epoch forgets the old epoch's batches.
func (s *State) Update(b BatchInfo, firstOffset, lastOffset, timestamp int64) {
	if b.ProducerID >= 0 {
		s.last = lastUpdate{set: true, producerID: b.ProducerID, firstOffset: firstOffset}
		if e := s.producers[b.ProducerID]; e != nil {
			before := *e
			s.last.before = &before
		}
	}
	s.apply(b, firstOffset, lastOffset, timestamp)
}

// Replay re-applies a batch read back from the log after the snapshot's
// offset, without checks, as Kafka's loadProducersFromRecords does (with
// AppendOrigin.REPLICATION): the log is the truth, even an epoch going
// backwards. Control batches go through ApplyMarker.
func (s *State) Replay(b BatchInfo, firstOffset, lastOffset, timestamp int64) {
	s.apply(b, firstOffset, lastOffset, timestamp)
}

func (s *State) apply(b BatchInfo, firstOffset, lastOffset, timestamp int64) {
	if b.ProducerID < 0 {
		return
	}
	e := s.producers[b.ProducerID]
	if e == nil {
		e = newEntry()
		s.producers[b.ProducerID] = e
	}
	e.setEpoch(b.ProducerEpoch)
	e.addBatch(BatchMetadata{
		LastSeq:     b.LastSequence,
		LastOffset:  lastOffset,
		OffsetDelta: int32(lastOffset - firstOffset),
		Timestamp:   timestamp,
	})
	e.lastTimestamp = timestamp
	if b.IsTransactional && e.txnFirstOffset < 0 {
		e.txnFirstOffset = firstOffset
		s.inTxn[b.ProducerID] = struct{}{}
	}
	if b.IsTransactional {
		// The transaction has a first offset now: later batches need no
		// verification.
		delete(s.verifying, b.ProducerID)
	}
}

// ExpireProducers forgets producers idle for expirationMs or longer
// (producer.id.expiration.ms) judged by their last batch's timestamp, as
// Kafka's removeExpiredProducers; producers with a transaction open are
// kept. It returns how many were removed.
func (s *State) ExpireProducers(nowMs, expirationMs int64) int {
	removed := 0
	for id, e := range s.producers {
		if e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(s.producers, id)
			removed++
		}
	}
	return removed
}

// LastStableOffsetFirst returns the first offset of the earliest ongoing
// transaction (Kafka's firstUndecidedOffset), which bounds the last stable
// offset; ok is false when no transaction is open.
func (s *State) LastStableOffsetFirst() (offset int64, ok bool) {
	for id := range s.inTxn {
		o := s.producers[id].txnFirstOffset
		if !ok || o < offset {
			offset, ok = o, true
		}
	}
	return offset, ok
}

// Producers lists every producer's state, by producer id, for
// DescribeProducers.
func (s *State) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for id, e := range s.producers {
		out = append(out, e.info(id))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// Producer returns one producer's state.
func (s *State) Producer(id int64) (ProducerInfo, bool) {
	e := s.producers[id]
	if e == nil {
		return ProducerInfo{}, false
	}
	return e.info(id), true
}

// Batches returns the batches remembered for a producer, oldest first.
func (s *State) Batches(id int64) []BatchMetadata {
	e := s.producers[id]
	if e == nil {
		return nil
	}
	out := make([]BatchMetadata, e.n)
	for i := range out {
		out[i] = e.batches[(e.head+i)%NumBatchesToRetain]
	}
	return out
}
