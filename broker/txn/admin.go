package txn

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// expireBatch bounds the tombstones of one expiration append.
const expireBatch = 500

// describe is Kafka's handleDescribeTransactions for one id.
func (m *machine) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID = id
	if id == "" {
		s.ErrorCode = errInvalidRequest
		return s
	}
	_, t, code := m.lookup(id)
	switch {
	case code != 0:
		s.ErrorCode = code
		return s
	case t == nil || t.state == stateDead:
		s.ErrorCode = errTransactionalIDNotFound
		return s
	}
	s.State = t.state.String()
	s.TimeoutMillis = t.timeoutMs
	s.StartTimestamp = t.startMs
	s.ProducerID = t.producerID
	s.ProducerEpoch = t.producerEpoch
	topics, parts := groupTopics(t.partitions.sorted())
	for i, topic := range topics {
		dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		dt.Topic = topic
		dt.Partitions = parts[i]
		s.Topics = append(s.Topics, dt)
	}
	return s
}

// listFilter is a ListTransactions request's filters, parsed once.
type listFilter struct {
	producerIDs map[int64]bool
	stateNames  int // number of state filters asked, known or not
	states      map[txnState]bool
	durationMs  int64 // -1: none
	pattern     *regexp.Regexp
}

func (f *listFilter) include(t *txnMeta, nowMs int64) bool {
	switch {
	case t.state == stateDead:
		// Dead is transient: the id is being removed.
		return false
	case len(f.producerIDs) > 0 && !f.producerIDs[t.producerID]:
		return false
	case f.stateNames > 0 && !f.states[t.state]:
		return false
	case f.durationMs >= 0 && nowMs-t.startMs <= f.durationMs:
		return false
	case f.pattern != nil && !f.pattern.MatchString(t.id):
		return false
	}
	return true
}

// list is this shard's part of ListTransactions; loading reports a
// partition still loading, which makes the whole answer
// COORDINATOR_LOAD_IN_PROGRESS.
func (m *machine) list(f *listFilter) (states []kmsg.ListTransactionsResponseTransactionState, loading bool) {
	now := m.nowMs()
	for _, p := range m.partitions {
		if p.loading {
			return nil, true
		}
		for _, t := range p.txns {
			if !f.include(t, now) {
				continue
			}
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID = t.id
			s.ProducerID = t.producerID
			s.TransactionState = t.state.String()
			states = append(states, s)
		}
	}
	return states, false
}

// sortedIDs lists the transactional ids of the loaded partitions in order,
// so periodic jobs act deterministically.
func (m *machine) sortedIDs(keep func(*txnMeta) bool) []*txnMeta {
	var out []*txnMeta
	for _, p := range m.partitions {
		if p.loading {
			continue
		}
		for _, t := range p.txns {
			if keep(t) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b *txnMeta) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

// abortTimedOut aborts every transaction open longer than its timeout,
// fencing its producer, as Kafka's abortTimedOutTransactions.
func (m *machine) abortTimedOut() {
	now := m.nowMs()
	expired := m.sortedIDs(func(t *txnMeta) bool {
		return t.pending == stateNone && t.state == stateOngoing && t.startMs+int64(t.timeoutMs) < now
	})
	for _, t := range expired {
		id, pid, epoch := t.id, t.producerID, t.producerEpoch
		m.log.Info("aborting timed out transaction", "transactional_id", id, "producer_id", pid, "epoch", epoch)
		m.fenceAndAbort(t, func(code int16) {
			switch code {
			case 0:
				m.log.Info("aborted timed out transaction", "transactional_id", id)
			case errInvalidProducerIDMapping, errProducerFenced, errConcurrentTransactions:
				m.log.Debug("abort of timed out transaction canceled", "transactional_id", id, "code", code)
			default:
				m.log.Warn("abort of timed out transaction failed", "transactional_id", id, "code", code)
			}
		})
	}
}

// expireIDs removes transactional ids with no transaction in progress that
// were not updated for transactional.id.expiration.ms, writing their
// tombstones first, as Kafka's removeExpiredTransactionalIds.
func (m *machine) expireIDs() {
	cutoff := m.nowMs() - m.cfg.TransactionalIDExpirationMs
	expired := m.sortedIDs(func(t *txnMeta) bool {
		return t.pending == stateNone && t.state.expirationAllowed() && t.lastUpdateMs <= cutoff
	})
	byPartition := make(map[int32][]*txnMeta)
	var order []int32
	for _, t := range expired {
		if _, ok := byPartition[t.partition]; !ok {
			order = append(order, t.partition)
		}
		byPartition[t.partition] = append(byPartition[t.partition], t)
	}
	for _, partition := range order {
		txns := byPartition[partition]
		for len(txns) > 0 {
			n := min(len(txns), expireBatch)
			m.writeTombstones(m.partitions[partition], txns[:n])
			txns = txns[n:]
		}
	}
}

func (m *machine) writeTombstones(p *partitionState, txns []*txnMeta) {
	type dead struct {
		t     *txnMeta
		epoch int16
	}
	var batch []dead
	var recs []Record
	for _, t := range txns {
		tr, err := t.prepareDead()
		if err != nil {
			m.log.Error("expire transactional id", "err", err)
			continue
		}
		batch = append(batch, dead{t, tr.producerEpoch})
		recs = append(recs, txnTombstone(t.id))
	}
	if len(recs) == 0 {
		return
	}
	coordEpoch := p.coordinatorEpoch
	m.fx.Append(p.id, recs, func(err error) {
		for _, d := range batch {
			t := d.t
			if m.currentCode(t, coordEpoch) != 0 {
				continue
			}
			if err == nil && t.pending == stateDead && t.producerEpoch == d.epoch {
				delete(m.partitions[t.partition].txns, t.id)
				m.log.Debug("expired transactional id", "transactional_id", t.id)
				continue
			}
			m.log.Warn("failed to expire transactional id", "transactional_id", t.id, "err", err)
			t.pending = stateNone
		}
	})
}
