package txn

import (
	"log/slog"
	"slices"
	"time"
)

// timerKind names what a timer does when it fires.
type timerKind uint8

const (
	timerAbortTimedOut   timerKind = iota // the shard's transaction timeout check
	timerExpireIDs                        // the shard's transactional id expiration
	timerMarkerRetry                      // markers that failed wait to be sent again
	timerCompletionRetry                  // a completion record that failed waits to be appended again
)

// timerKey identifies a timer; scheduling a key again replaces its timer.
type timerKey struct {
	kind timerKind
	id   string
}

// effects is everything the state machine asks of the goroutine that owns
// it. None of it blocks: timers call fn later on the owner's goroutine;
// append hands records to the Store, allocateProducerID asks for a producer
// id and writeMarkers hands markers to the MarkerWriter, each calling done
// on the owner's goroutine once finished. Appends to one partition complete
// in the order they were issued.
//
// The shard runtime (coord.Shard) provides the timers and appends.
type effects interface {
	Schedule(k timerKey, d time.Duration, fn func())
	Cancel(k timerKey)
	Scheduled(k timerKey) bool
	Append(partition int32, recs []Record, done func(error))
	allocateProducerID(done func(int64, error))
	writeMarkers(markers []Marker, done func([][]error))
}

// partitionState holds the transactional ids of one loaded
// __transaction_state partition.
type partitionState struct {
	id        int32
	loading   bool
	loadToken uint64
	// coordinatorEpoch is the partition's leader epoch when it was loaded;
	// markers carry it so partitions can fence a stale coordinator.
	coordinatorEpoch int32
	txns             map[string]*txnMeta
}

// machine is the state of one shard: the transactional ids of the
// partitions it owns and the markers it is sending. Only the shard's
// goroutine touches it.
type machine struct {
	cfg               Config
	log               *slog.Logger
	clock             Clock
	fx                effects
	partitionForGroup func(string) int32
	partitionExists   func(topic string, partition int32) bool

	partitions map[int32]*partitionState
	loadTokens uint64
	markers    markerState
	// completed counts the transactions ended here, shared by the shards.
	completed *Completed
}

func newMachine(cfg Config, log *slog.Logger, deps Deps, fx effects, completed *Completed) *machine {
	return &machine{
		completed:         completed,
		cfg:               cfg,
		log:               log,
		clock:             deps.Clock,
		fx:                fx,
		partitionForGroup: deps.PartitionForGroup,
		partitionExists:   deps.PartitionExists,
		partitions:        make(map[int32]*partitionState),
		markers:           newMarkerState(),
	}
}

func (m *machine) nowMs() int64 { return m.clock.Now().UnixMilli() }

// start schedules the periodic jobs; each reschedules itself.
func (m *machine) start() {
	m.scheduleAbortTimedOut()
	m.scheduleExpireIDs()
}

func (m *machine) scheduleAbortTimedOut() {
	m.fx.Schedule(timerKey{kind: timerAbortTimedOut}, ms(m.cfg.AbortTimedOutTransactionCleanupIntervalMs), func() {
		m.abortTimedOut()
		m.scheduleAbortTimedOut()
	})
}

func (m *machine) scheduleExpireIDs() {
	m.fx.Schedule(timerKey{kind: timerExpireIDs}, ms(m.cfg.RemoveExpiredTransactionalIDCleanupIntervalMs), func() {
		m.expireIDs()
		m.scheduleExpireIDs()
	})
}

// lookup finds the loaded partition of a transactional id and its state
// (nil when unknown), or the error Kafka answers when this coordinator does
// not serve it.
func (m *machine) lookup(id string) (*partitionState, *txnMeta, int16) {
	p := m.partitions[PartitionFor(id, m.cfg.TransactionStateTopicPartitions)]
	switch {
	case p == nil:
		return nil, nil, errNotCoordinator
	case p.loading:
		return nil, nil, errCoordinatorLoadInProgress
	}
	return p, p.txns[id], 0
}

// currentCode reports whether t is still the live state of its id under
// coordinator epoch epoch, or the error Kafka answers when it is not:
// appends, marker writes and timers outlive unloads and reloads.
func (m *machine) currentCode(t *txnMeta, epoch int32) int16 {
	p := m.partitions[t.partition]
	switch {
	case p == nil:
		return errNotCoordinator
	case p.loading:
		return errCoordinatorLoadInProgress
	case p.coordinatorEpoch != epoch || p.txns[t.id] != t:
		return errNotCoordinator
	}
	return 0
}

// appendTransit writes a prepared transition to the log and applies it
// once durable, as Kafka's appendTransactionToLog. A failed append clears
// the pending transition unless keep says the caller retries it.
func (m *machine) appendTransit(t *txnMeta, epoch int32, tr transit, keep func(code int16) bool, done func(code int16)) {
	if code := m.currentCode(t, epoch); code != 0 {
		done(code)
		return
	}
	rec := txnRecord(t.id, tr, m.cfg.TransactionVersion)
	m.fx.Append(t.partition, []Record{rec}, func(err error) {
		code := appendErrorCode(err)
		cur := m.currentCode(t, epoch)
		if code == 0 {
			if cur != 0 {
				done(cur)
				return
			}
			if err := t.completeTransition(tr); err != nil {
				m.log.Error("complete transaction transition", "err", err)
				t.pending = stateNone
				done(errUnknownServerError)
				return
			}
			m.completed.count(tr.state)
			done(0)
			return
		}
		if cur == 0 && (keep == nil || !keep(code)) {
			t.pending = stateNone
		}
		done(code)
	})
}

// beginLoad marks a partition as loading and returns the token its
// finishLoad must present. A partition loaded again is unloaded first.
func (m *machine) beginLoad(partition int32) uint64 {
	if _, ok := m.partitions[partition]; ok {
		m.unload(partition)
	}
	m.loadTokens++
	m.partitions[partition] = &partitionState{id: partition, loading: true, loadToken: m.loadTokens, txns: map[string]*txnMeta{}}
	return m.loadTokens
}

// finishLoad installs replayed transactional ids, unless the partition was
// unloaded or loaded again meanwhile, and finishes the transactions found
// in PrepareCommit or PrepareAbort by sending their markers again, as
// Kafka's loadTransactionsForTxnTopicPartition.
func (m *machine) finishLoad(partition int32, token uint64, coordinatorEpoch int32, txns map[string]*txnMeta) bool {
	p := m.partitions[partition]
	if p == nil || !p.loading || p.loadToken != token {
		return false
	}
	p.loading = false
	p.coordinatorEpoch = coordinatorEpoch
	p.txns = txns
	ids := make([]string, 0, len(txns))
	for id, t := range txns {
		if t.state == statePrepareCommit || t.state == statePrepareAbort {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := txns[id]
		complete, err := t.prepareComplete(m.nowMs())
		if err != nil {
			m.log.Error("resume transaction after load", "transactional_id", id, "err", err)
			continue
		}
		m.log.Info("resuming transaction markers after load", "transactional_id", id, "state", t.state.String(), "partition", partition)
		m.startMarkers(t, coordinatorEpoch, t.state == statePrepareCommit, complete)
	}
	return true
}

// abortLoad forgets a partition whose load failed.
func (m *machine) abortLoad(partition int32, token uint64) {
	if p := m.partitions[partition]; p != nil && p.loadToken == token {
		delete(m.partitions, partition)
	}
}

// unload drops a partition's state and stops sending the markers of its
// transactions; whatever is still in flight finds it gone and answers
// NOT_COORDINATOR.
func (m *machine) unload(partition int32) {
	p := m.partitions[partition]
	if p == nil {
		return
	}
	delete(m.partitions, partition)
	for id := range p.txns {
		m.fx.Cancel(timerKey{kind: timerCompletionRetry, id: id})
	}
	m.markers.forgetPartition(partition)
}
