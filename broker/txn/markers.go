package txn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Marker is one transaction marker to write: a control record ending a
// producer's transaction on each of Partitions, as one entry of a
// WriteTxnMarkers request (key 27).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
	// TransactionVersion is the client's transaction version: with 2 the
	// producer epoch was bumped when the transaction ended, so the marker's
	// epoch is one above the epoch of the transaction's data.
	TransactionVersion int16
}

// MarkerWriter writes transaction markers to the leaders of their
// partitions, over the path WriteTxnMarkers takes, so the leaders may later
// be other brokers. WriteMarkers returns one slice per marker with one
// error per partition, in the order of Marker.Partitions: nil once the
// marker is durable there. Errors that wrap a *kerr.Error are handled as
// Kafka's TransactionMarkerRequestCompletionHandler: NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT and
// other failures are retried; INVALID_PRODUCER_EPOCH and
// TRANSACTION_COORDINATOR_FENCED stop the transaction's markers (a newer
// producer or coordinator took over); UNSUPPORTED_FOR_MESSAGE_FORMAT and
// UNSUPPORTED_VERSION, and ErrPartitionDeleted for a partition no longer in
// the cluster, drop the partition. A missing result counts as a retriable
// failure.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, markers []Marker) [][]error
}

// maxMarkersPerWrite bounds one WriteMarkers call; the rest wait for the
// next.
const maxMarkersPerWrite = 1000

var errNoMarkerResult = errors.New("marker writer returned no result")

// pendingComplete is a transaction whose PrepareCommit or PrepareAbort is
// durable and whose markers are being written; once every partition has
// its marker the completion record is appended.
type pendingComplete struct {
	txn              *txnMeta
	coordinatorEpoch int32
	commit           bool
	complete         transit
}

type markerJob struct {
	pc     *pendingComplete
	marker Marker
}

// markerState is the shard's marker sender, as Kafka's
// TransactionMarkerChannelManager: one WriteMarkers call in flight, the
// markers queued meanwhile go out together in the next one.
type markerState struct {
	pending  map[string]*pendingComplete // by transactional id
	queue    []markerJob
	retry    []markerJob
	inflight bool
}

func newMarkerState() markerState {
	return markerState{pending: make(map[string]*pendingComplete)}
}

// forgetPartition drops the markers of a partition being unloaded.
func (s *markerState) forgetPartition(partition int32) {
	for id, pc := range s.pending {
		if pc.txn.partition == partition {
			delete(s.pending, id)
		}
	}
	keep := func(j markerJob) bool { return j.pc.txn.partition != partition }
	s.queue = filterJobs(s.queue, keep)
	s.retry = filterJobs(s.retry, keep)
}

func filterJobs(jobs []markerJob, keep func(markerJob) bool) []markerJob {
	out := jobs[:0]
	for _, j := range jobs {
		if keep(j) {
			out = append(out, j)
		}
	}
	clear(jobs[len(out):])
	return out
}

// startMarkers sends the markers of a transaction whose PrepareCommit or
// PrepareAbort is durable, and completes it at once if it has no
// partitions.
func (m *machine) startMarkers(t *txnMeta, coordinatorEpoch int32, commit bool, complete transit) {
	pc := &pendingComplete{txn: t, coordinatorEpoch: coordinatorEpoch, commit: commit, complete: complete}
	if prev := m.markers.pending[t.id]; prev != nil {
		m.log.Info("replacing pending transaction completion", "transactional_id", t.id)
	}
	m.markers.pending[t.id] = pc
	m.enqueueMarkers(pc, t.partitions.sorted())
	m.maybeComplete(t.id)
}

// enqueueMarkers queues one marker for parts, with the producer id and
// epoch the transaction holds now.
func (m *machine) enqueueMarkers(pc *pendingComplete, parts []TopicPartition) {
	if len(parts) == 0 {
		return
	}
	t := pc.txn
	m.markers.queue = append(m.markers.queue, markerJob{pc: pc, marker: Marker{
		ProducerID:         t.producerID,
		ProducerEpoch:      t.producerEpoch,
		CoordinatorEpoch:   pc.coordinatorEpoch,
		Commit:             pc.commit,
		Partitions:         parts,
		TransactionVersion: t.tv,
	}})
	m.flushMarkers()
}

// pcLive reports whether a pending completion is still the one of its
// transaction under the same coordinator epoch.
func (m *machine) pcLive(pc *pendingComplete) bool {
	return m.currentCode(pc.txn, pc.coordinatorEpoch) == 0 && m.markers.pending[pc.txn.id] == pc
}

// flushMarkers starts a WriteMarkers call with the queued markers unless
// one is in flight.
func (m *machine) flushMarkers() {
	s := &m.markers
	if s.inflight {
		return
	}
	s.queue = filterJobs(s.queue, func(j markerJob) bool { return m.pcLive(j.pc) })
	if len(s.queue) == 0 {
		return
	}
	n := min(len(s.queue), maxMarkersPerWrite)
	jobs := make([]markerJob, n)
	copy(jobs, s.queue)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	markers := make([]Marker, n)
	for i, j := range jobs {
		markers[i] = j.marker
	}
	s.inflight = true
	m.fx.writeMarkers(markers, func(res [][]error) {
		s.inflight = false
		for i, j := range jobs {
			var errs []error
			if i < len(res) {
				errs = res[i]
			}
			m.markerWritten(j, errs)
		}
		m.flushMarkers()
	})
}

type markerOutcome uint8

const (
	markerDone  markerOutcome = iota // written: the partition is finished
	markerDrop                       // cannot be written and need not be: finished too
	markerRetry                      // send again after a backoff
	markerStop                       // the transaction was taken over: send no more
)

// classifyMarkerError sorts a marker write result as Kafka's
// TransactionMarkerRequestCompletionHandler.
func classifyMarkerError(err error) markerOutcome {
	if err == nil {
		return markerDone
	}
	if errors.Is(err, ErrPartitionDeleted) {
		return markerDrop
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return markerRetry
	}
	switch ke.Code {
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		return markerStop
	case kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
		return markerDrop
	}
	return markerRetry
}

// markerWritten applies the result of one marker: finished partitions
// leave the transaction, failed ones are sent again after a backoff, and
// once none is left the completion record is appended.
func (m *machine) markerWritten(j markerJob, errs []error) {
	pc := j.pc
	if !m.pcLive(pc) {
		return
	}
	t := pc.txn
	var retry []TopicPartition
	for i, tp := range j.marker.Partitions {
		err := errNoMarkerResult
		if i < len(errs) {
			err = errs[i]
		}
		switch classifyMarkerError(err) {
		case markerDone:
			delete(t.partitions, tp)
		case markerDrop:
			m.log.Info("dropping transaction marker", "transactional_id", t.id, "partition", tp.String(), "err", err)
			delete(t.partitions, tp)
		case markerRetry:
			m.logMarkerRetry(t.id, tp, err)
			retry = append(retry, tp)
		case markerStop:
			m.log.Info("stop sending transaction markers", "transactional_id", t.id, "partition", tp.String(), "err", err)
			delete(m.markers.pending, t.id)
			return
		}
	}
	if len(retry) > 0 {
		j.marker.Partitions = retry
		m.markers.retry = append(m.markers.retry, j)
		m.scheduleMarkerRetry()
		return
	}
	m.maybeComplete(t.id)
}

func (m *machine) logMarkerRetry(id string, tp TopicPartition, err error) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke.Code {
		case kerr.CorruptMessage.Code, kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidRequiredAcks.Code:
			// Kafka treats these as fatal bugs; retrying keeps the
			// transaction pending rather than losing its outcome.
			m.log.Error("unexpected transaction marker error", "transactional_id", id, "partition", tp.String(), "err", err)
			return
		}
	}
	m.log.Debug("retrying transaction marker", "transactional_id", id, "partition", tp.String(), "err", err)
}

// scheduleMarkerRetry sends the failed markers again after the backoff,
// with whatever leaders the MarkerWriter then finds.
func (m *machine) scheduleMarkerRetry() {
	k := timerKey{kind: timerMarkerRetry}
	if m.fx.Scheduled(k) {
		return
	}
	m.fx.Schedule(k, ms(m.cfg.MarkerRetryBackoffMs), func() {
		retry := m.markers.retry
		m.markers.retry = nil
		for _, j := range retry {
			if m.pcLive(j.pc) {
				m.markers.queue = append(m.markers.queue, j)
			}
		}
		m.flushMarkers()
	})
}

// maybeComplete appends the completion record of a transaction whose
// markers are all written.
func (m *machine) maybeComplete(id string) {
	pc := m.markers.pending[id]
	if pc == nil || len(pc.txn.partitions) > 0 {
		return
	}
	delete(m.markers.pending, id)
	m.writeCompletion(pc)
}

// writeCompletion appends CompleteCommit or CompleteAbort. Kafka retries the
// append while the log is unavailable; Gregor also retries errors Kafka
// treats as fatal, so the transaction is not left half done.
func (m *machine) writeCompletion(pc *pendingComplete) {
	t := pc.txn
	if code := m.currentCode(t, pc.coordinatorEpoch); code != 0 {
		m.log.Info("skip transaction completion: no longer its coordinator", "transactional_id", t.id, "code", code)
		return
	}
	retriable := func(code int16) bool { return code == errCoordinatorNotAvailable || code == errUnknownServerError }
	m.appendTransit(t, pc.coordinatorEpoch, pc.complete, retriable, func(code int16) {
		switch {
		case code == 0:
		case retriable(code):
			m.log.Warn("append transaction completion failed; retrying", "transactional_id", t.id, "code", code)
			m.fx.Schedule(timerKey{kind: timerCompletionRetry, id: t.id}, ms(m.cfg.MarkerRetryBackoffMs), func() {
				m.writeCompletion(pc)
			})
		default:
			m.log.Info("transaction completion not written", "transactional_id", t.id, "code", code)
		}
	})
}
