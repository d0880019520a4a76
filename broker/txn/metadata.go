package txn

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// txnState is a transaction's state, numbered as Kafka's TransactionState
// ids in TxnMetadataValue.
type txnState int8

const (
	stateEmpty txnState = iota
	stateOngoing
	statePrepareCommit
	statePrepareAbort
	stateCompleteCommit
	stateCompleteAbort
	stateDead
	statePrepareEpochFence

	// stateNone marks the absence of a pending transition.
	stateNone txnState = -1
)

var stateNames = [...]string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

// String returns the name DescribeTransactions and ListTransactions show.
func (s txnState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("Unknown(%d)", int8(s))
}

// stateByName finds a state by its exact name, as Kafka's
// TransactionState.fromName.
func stateByName(name string) (txnState, bool) {
	for i, n := range stateNames {
		if n == name {
			return txnState(i), true
		}
	}
	return stateNone, false
}

// validPrevious reports whether a transaction may move to s from prev.
// Transaction version 2 lets Empty and completed transactions go straight
// to PrepareAbort: a client unsure of the server's state may abort.
func (s txnState) validPrevious(prev txnState) bool {
	switch s {
	case stateEmpty:
		return prev == stateEmpty || prev == stateCompleteCommit || prev == stateCompleteAbort
	case stateOngoing:
		return prev == stateOngoing || prev == stateEmpty || prev == stateCompleteCommit || prev == stateCompleteAbort
	case statePrepareCommit:
		return prev == stateOngoing
	case statePrepareAbort:
		return prev == stateOngoing || prev == statePrepareEpochFence || prev == stateEmpty ||
			prev == stateCompleteCommit || prev == stateCompleteAbort
	case stateCompleteCommit:
		return prev == statePrepareCommit
	case stateCompleteAbort:
		return prev == statePrepareAbort
	case stateDead:
		return prev == stateEmpty || prev == stateCompleteAbort || prev == stateCompleteCommit
	case statePrepareEpochFence:
		return prev == stateOngoing
	}
	return false
}

// expirationAllowed reports whether a transactional id in state s may
// expire: no transaction is in progress.
func (s txnState) expirationAllowed() bool {
	return s == stateEmpty || s == stateCompleteCommit || s == stateCompleteAbort
}

const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted reports whether no more epochs may be handed out for a
// producer id: the coordinator keeps MaxInt16 to itself so it can always
// fence an existing producer.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// TopicPartition names a partition that takes part in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	switch {
	case a.Partition < b.Partition:
		return -1
	case a.Partition > b.Partition:
		return 1
	}
	return 0
}

// tpSet is a set of partitions.
type tpSet map[TopicPartition]struct{}

func (s tpSet) sorted() []TopicPartition {
	out := make([]TopicPartition, 0, len(s))
	for tp := range s {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func (s tpSet) clone() tpSet {
	out := make(tpSet, len(s))
	for tp := range s {
		out[tp] = struct{}{}
	}
	return out
}

// subsetOf reports whether every partition of s is in o.
func (s tpSet) subsetOf(o tpSet) bool {
	for tp := range s {
		if _, ok := o[tp]; !ok {
			return false
		}
	}
	return true
}

// txnMeta is the state of one transactional id, as Kafka's
// TransactionMetadata. Only its shard's goroutine touches it.
type txnMeta struct {
	id string
	// partition is the __transaction_state partition the id lives in.
	partition int32

	producerID int64
	// prevProducerID is the producer id of the last committed transaction,
	// kept so a retried EndTxn after an epoch overflow is recognized.
	prevProducerID int64
	// nextProducerID is the producer id handed out when an epoch bump of
	// transaction version 2 overflows; it takes over at completion.
	nextProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             txnState
	// pending is the state an in-flight transition leads to; while set,
	// the id answers CONCURRENT_TRANSACTIONS to most requests.
	pending      txnState
	partitions   tpSet
	startMs      int64
	lastUpdateMs int64
	// tv is the transaction version the client used for the last
	// transition.
	tv int16
	// failedFence records that an epoch fence could not be written: the
	// next fence must not bump the epoch again, so retries under a broken
	// log cannot exhaust the epochs.
	failedFence bool
}

func newTxnMeta(id string, partition int32, producerID int64, timeoutMs int32, nowMs int64) *txnMeta {
	return &txnMeta{
		id:                id,
		partition:         partition,
		producerID:        producerID,
		prevProducerID:    noProducerID,
		nextProducerID:    noProducerID,
		producerEpoch:     noProducerEpoch,
		lastProducerEpoch: noProducerEpoch,
		timeoutMs:         timeoutMs,
		state:             stateEmpty,
		pending:           stateNone,
		partitions:        tpSet{},
		startMs:           -1,
		lastUpdateMs:      nowMs,
		tv:                TV0,
	}
}

// transit is a transition prepared but not yet durable, as Kafka's
// TxnTransitMetadata: it is written to the log first and applied to the
// txnMeta once the append succeeds.
type transit struct {
	producerID        int64
	prevProducerID    int64
	nextProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             txnState
	partitions        tpSet
	startMs           int64
	lastUpdateMs      int64
	tv                int16
}

func (m *txnMeta) exhausted() bool { return epochExhausted(m.producerEpoch) }

// hasPendingTransaction reports whether a transaction is open or ending.
func (m *txnMeta) hasPendingTransaction() bool {
	return m.state == stateOngoing || m.state == statePrepareAbort || m.state == statePrepareCommit
}

// prepareFenceEpoch bumps the epoch to fence the current producer before
// its open transaction is aborted. The bumped epoch is never returned to a
// client.
func (m *txnMeta) prepareFenceEpoch() (transit, error) {
	if m.producerEpoch == math.MaxInt16 {
		return transit{}, fmt.Errorf("transactional id %q: cannot fence producer %d at epoch %d without overflow", m.id, m.producerID, m.producerEpoch)
	}
	epoch := m.producerEpoch + 1
	if m.failedFence {
		epoch = m.producerEpoch
	}
	return m.prepareTransition(statePrepareEpochFence, m.producerID, noProducerID, epoch, noProducerEpoch,
		m.timeoutMs, m.partitions.clone(), m.startMs, m.lastUpdateMs, m.tv)
}

// prepareIncrementEpoch is InitProducerId's epoch bump. With an expected
// epoch (KIP-360) it bumps only when the caller holds the current epoch,
// answers a retry of a bump with the current epoch, and fences anyone else.
// It returns a Kafka error code when the caller is fenced.
func (m *txnMeta) prepareIncrementEpoch(timeoutMs int32, expected *int16, nowMs int64) (transit, int16, error) {
	if m.exhausted() {
		return transit{}, 0, fmt.Errorf("transactional id %q: no more epochs for producer %d", m.id, m.producerID)
	}
	epoch, last := m.producerEpoch+1, noProducerEpoch
	if expected != nil {
		switch {
		case m.producerEpoch == noProducerEpoch || *expected == m.producerEpoch:
			epoch, last = m.producerEpoch+1, m.producerEpoch
		case *expected == m.lastProducerEpoch:
			epoch, last = m.producerEpoch, m.lastProducerEpoch
		default:
			return transit{}, errProducerFenced, nil
		}
	}
	t, err := m.prepareTransition(stateEmpty, m.producerID, noProducerID, epoch, last, timeoutMs, tpSet{}, -1, nowMs, m.tv)
	return t, 0, err
}

// prepareRotation moves the transactional id to a new producer id at epoch
// 0, when the old one has run out of epochs.
func (m *txnMeta) prepareRotation(newProducerID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (transit, error) {
	if m.hasPendingTransaction() {
		return transit{}, fmt.Errorf("transactional id %q: cannot rotate producer ids during a transaction", m.id)
	}
	last := noProducerEpoch
	if recordLastEpoch {
		last = m.producerEpoch
	}
	return m.prepareTransition(stateEmpty, newProducerID, noProducerID, 0, last, timeoutMs, tpSet{}, -1, nowMs, m.tv)
}

// prepareAddPartitions adds partitions to the transaction, starting it if
// none was open.
func (m *txnMeta) prepareAddPartitions(add []TopicPartition, nowMs int64, tv int16) (transit, error) {
	start := m.startMs
	if m.state == stateEmpty || m.state == stateCompleteAbort || m.state == stateCompleteCommit {
		start = nowMs
	}
	parts := m.partitions.clone()
	for _, tp := range add {
		parts[tp] = struct{}{}
	}
	return m.prepareTransition(stateOngoing, m.producerID, noProducerID, m.producerEpoch, m.lastProducerEpoch,
		m.timeoutMs, parts, start, nowMs, tv)
}

// prepareAbortOrCommit starts ending the transaction. Transaction version 2
// bumps the epoch, except when the abort fences a producer whose epoch the
// fence already bumped (Kafka's KAFKA-19367). noPartitionAdded marks a
// version 2 abort of a transaction that never started; its start time is
// now.
func (m *txnMeta) prepareAbortOrCommit(state txnState, tv int16, nextProducerID int64, nowMs int64, noPartitionAdded, fenced bool) (transit, error) {
	epoch, last := m.producerEpoch, m.lastProducerEpoch
	if tv >= TV2 {
		if fenced {
			last = m.producerEpoch
		} else {
			if m.producerEpoch == math.MaxInt16 {
				return transit{}, fmt.Errorf("transactional id %q: epoch %d of producer %d would overflow", m.id, m.producerEpoch, m.producerID)
			}
			epoch, last = m.producerEpoch+1, m.producerEpoch
		}
	}
	start := m.startMs
	if noPartitionAdded {
		start = nowMs
	}
	return m.prepareTransition(state, m.producerID, nextProducerID, epoch, last, m.timeoutMs, m.partitions.clone(), start, nowMs, tv)
}

// prepareComplete ends the transaction once its markers are written. After
// an epoch overflow the next producer id takes over at epoch 0.
func (m *txnMeta) prepareComplete(nowMs int64) (transit, error) {
	state := stateCompleteAbort
	if m.state == statePrepareCommit {
		state = stateCompleteCommit
	}
	m.failedFence = false
	pid, epoch := m.producerID, m.producerEpoch
	if m.tv >= TV2 && m.nextProducerID != noProducerID {
		pid, epoch = m.nextProducerID, 0
	}
	return m.prepareTransition(state, pid, noProducerID, epoch, m.lastProducerEpoch, m.timeoutMs, tpSet{}, m.startMs, nowMs, m.tv)
}

// prepareDead marks the transactional id for removal by expiration.
func (m *txnMeta) prepareDead() (transit, error) {
	return m.prepareTransition(stateDead, m.producerID, noProducerID, m.producerEpoch, m.lastProducerEpoch,
		m.timeoutMs, tpSet{}, m.startMs, m.lastUpdateMs, m.tv)
}

func (m *txnMeta) prepareTransition(state txnState, producerID, nextProducerID int64, epoch, lastEpoch int16,
	timeoutMs int32, parts tpSet, startMs, updateMs int64, tv int16) (transit, error) {
	switch {
	case m.pending != stateNone:
		return transit{}, fmt.Errorf("transactional id %q: transition to %s while %s is pending", m.id, state, m.pending)
	case producerID < 0:
		return transit{}, fmt.Errorf("transactional id %q: illegal producer id %d", m.id, producerID)
	case state != stateDead && epoch < 0:
		return transit{}, fmt.Errorf("transactional id %q: illegal producer epoch %d", m.id, epoch)
	case !state.validPrevious(m.state):
		return transit{}, fmt.Errorf("transactional id %q: illegal transition from %s to %s", m.id, m.state, state)
	}
	m.pending = state
	return transit{
		producerID:        producerID,
		prevProducerID:    m.producerID,
		nextProducerID:    nextProducerID,
		producerEpoch:     epoch,
		lastProducerEpoch: lastEpoch,
		timeoutMs:         timeoutMs,
		state:             state,
		partitions:        parts,
		startMs:           startMs,
		lastUpdateMs:      updateMs,
		tv:                tv,
	}, nil
}

// completeTransition applies a transition whose record is durable, after
// checking it is the one prepared, as Kafka's completeTransitionTo.
func (m *txnMeta) completeTransition(t transit) error {
	if m.pending == stateNone || m.pending != t.state {
		return fmt.Errorf("transactional id %q: completing %s while %s is pending", m.id, t.state, m.pending)
	}
	bad := func() error {
		return fmt.Errorf("transactional id %q: transition from %s (producer %d epoch %d) to %s (producer %d epoch %d) does not match",
			m.id, m.state, m.producerID, m.producerEpoch, t.state, t.producerID, t.producerEpoch)
	}
	switch t.state {
	case stateEmpty:
		if (m.producerEpoch != t.producerEpoch && !m.validEpochBump(t)) || len(t.partitions) > 0 || t.startMs != -1 {
			return bad()
		}
		m.timeoutMs = t.timeoutMs
		m.producerEpoch = t.producerEpoch
		m.lastProducerEpoch = t.lastProducerEpoch
		m.producerID = t.producerID
		m.prevProducerID = t.prevProducerID
	case stateOngoing:
		if !m.validProducerEpoch(t) || !m.partitions.subsetOf(t.partitions) || m.timeoutMs != t.timeoutMs {
			return bad()
		}
		m.startMs = t.startMs
		for tp := range t.partitions {
			m.partitions[tp] = struct{}{}
		}
	case statePrepareAbort, statePrepareCommit:
		emptyAbort := t.state == statePrepareAbort && t.tv >= TV2 && m.state.expirationAllowed()
		if !m.validProducerEpoch(t) || len(m.partitions) != len(t.partitions) || !m.partitions.subsetOf(t.partitions) ||
			m.timeoutMs != t.timeoutMs || (m.startMs != t.startMs && !emptyAbort) {
			return bad()
		}
		if t.tv >= TV2 {
			m.producerEpoch = t.producerEpoch
			m.lastProducerEpoch = t.lastProducerEpoch
			m.nextProducerID = t.nextProducerID
			m.startMs = t.startMs
		}
	case stateCompleteAbort, stateCompleteCommit:
		if !m.validProducerEpoch(t) || m.timeoutMs != t.timeoutMs || t.startMs == -1 {
			return bad()
		}
		m.startMs = t.startMs
		m.partitions = tpSet{}
		if t.tv >= TV2 {
			m.producerEpoch = t.producerEpoch
			m.lastProducerEpoch = t.lastProducerEpoch
			m.prevProducerID = t.prevProducerID
			m.producerID = t.producerID
			m.nextProducerID = t.nextProducerID
		}
	default:
		// PrepareEpochFence is never written and Dead ends in removal.
		return bad()
	}
	m.tv = t.tv
	m.lastUpdateMs = t.lastUpdateMs
	m.pending = stateNone
	m.state = t.state
	return nil
}

// validProducerEpoch checks a transition keeps the producer: a version 2
// prepare carries the bumped epoch with the current one as its last epoch,
// and a completion after an overflow carries the new producer id.
func (m *txnMeta) validProducerEpoch(t transit) bool {
	tv2 := t.tv >= TV2
	switch {
	case tv2 && (t.state == stateCompleteCommit || t.state == stateCompleteAbort) && t.producerEpoch == 0:
		return t.lastProducerEpoch == m.lastProducerEpoch && t.prevProducerID == m.producerID
	case tv2 && (t.state == statePrepareCommit || t.state == statePrepareAbort):
		return t.lastProducerEpoch == m.producerEpoch && t.producerID == m.producerID
	}
	return t.producerEpoch == m.producerEpoch && t.producerID == m.producerID
}

func (m *txnMeta) validEpochBump(t transit) bool {
	return int32(t.producerEpoch) == int32(m.producerEpoch)+1 || (t.producerEpoch == 0 && t.producerID != m.producerID)
}
