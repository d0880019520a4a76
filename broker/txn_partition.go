package broker

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
)

// A partition's transactional state: the last stable offset (LSO), below
// which every transaction is decided, from the ongoing transactions of its
// producer state (producers.go); and the aborted transactions that
// read_committed fetches must tell consumers to skip, which the log's
// transaction indexes (.txnindex, storage) answer for the range fetched.

// abortedTxn is an aborted transaction's range of offsets in a partition.
type abortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnStateLocked returns the partition's producer state, loading it (and
// with it the ongoing transactions that bound the LSO) on first use. The
// caller holds p.mu.
func (p *partition) txnStateLocked() (*producerstate.State, error) {
	return p.producerStateLocked()
}

// decodeMarker reads a control batch's marker: commit or abort, and the
// coordinator epoch.
func decodeMarker(batch []byte) (commit bool, coordEpoch int32, err error) {
	found := false
	err = protocol.DecodeBatch(batch, 1<<20, func(_ *protocol.BatchHeader, r protocol.Record) error {
		if found {
			return nil
		}
		if len(r.Key) < 4 {
			return fmt.Errorf("control record key of %d bytes", len(r.Key))
		}
		typ := int16(binary.BigEndian.Uint16(r.Key[2:]))
		commit = typ == 1
		if len(r.Value) >= 6 {
			coordEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		}
		found = true
		return nil
	})
	return commit, coordEpoch, err
}

// updateLastStableOffsetLocked sets the LSO: the high watermark, or the
// first offset of the oldest undecided transaction if that is lower. The
// caller holds p.mu.
func (p *partition) updateLastStableOffsetLocked() {
	lso := p.hw.Load()
	first := int64(-1)
	if p.producers != nil {
		if off, ok := p.producers.LastStableOffsetFirst(); ok {
			first = off
			lso = min(lso, off)
		}
	}
	p.lso.Store(lso)
	p.log.SetFirstUnstableOffset(first)
}

// lastStableOffset is the offset read_committed consumers read up to.
func (p *partition) lastStableOffset() (int64, error) {
	if p.txnReady.Load() {
		return p.lso.Load(), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.txnStateLocked(); err != nil {
		return 0, err
	}
	p.txnReady.Store(true)
	return p.lso.Load(), nil
}

// abortedIn lists the aborted transactions that overlap [from, to), which
// a read_committed fetch returns with the records, from the log's
// transaction indexes.
func (p *partition) abortedIn(from, to int64) ([]abortedTxn, error) {
	txns, err := p.log.CollectAbortedTxns(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]abortedTxn, len(txns))
	for i, t := range txns {
		out[i] = abortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset}
	}
	return out, nil
}

// appendTransactional appends a transactional batch (a producer's, or the
// group coordinator's transactional offset commit), with the producer's
// transaction tracked so the LSO stays below it until its marker.
func (p *partition) appendTransactional(batch []byte, nowMs int64) (int64, error) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.txnStateLocked()
	if err != nil {
		return 0, err
	}
	if h.ProducerID < 0 {
		return 0, fmt.Errorf("%w: transactional batch without a producer id", kerr.InvalidProducerIDMapping)
	}
	if cur, ok := st.Producer(h.ProducerID); ok && h.ProducerEpoch < cur.Epoch {
		return 0, fmt.Errorf("%w: epoch %d is older than %d", kerr.InvalidProducerEpoch, h.ProducerEpoch, cur.Epoch)
	}
	// Known before it is published, as in appendIdempotent.
	first := p.log.LogEndOffset()
	st.Update(batchProducerInfo(&h), first, first+int64(h.LastOffsetDelta), h.MaxTimestamp)
	last, err := p.appendLocked(batch, nowMs)
	if err != nil {
		return 0, err
	}
	p.mu.Unlock()
	err = p.durable(last)
	p.mu.Lock() // for the deferred unlock
	return last, err
}
