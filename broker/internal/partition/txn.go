package partition

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

// AbortedTxn is an aborted transaction's range of offsets in a partition.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// TxnStateLocked returns the partition's producer state, loading it (and
// with it the ongoing transactions that bound the LSO) on first use. The
// caller holds p.Mu.
func (p *Partition) TxnStateLocked() (*producerstate.State, error) {
	return p.ProducerStateLocked()
}

// DecodeMarker reads a control batch's marker: commit or abort, and the
// coordinator epoch.
func DecodeMarker(batch []byte) (commit bool, coordEpoch int32, err error) {
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

// UpdateLastStableOffsetLocked sets the LSO: the high watermark, or the
// first offset of the oldest undecided transaction if that is lower. The
// caller holds p.Mu.
func (p *Partition) UpdateLastStableOffsetLocked() {
	lso := p.HW.Load()
	first := int64(-1)
	if p.Producers != nil {
		if off, ok := p.Producers.LastStableOffsetFirst(); ok {
			first = off
			lso = min(lso, off)
		}
	}
	p.LSO.Store(lso)
	p.Log.SetFirstUnstableOffset(first)
}

// LastStableOffset is the offset read_committed consumers read up to.
func (p *Partition) LastStableOffset() (int64, error) {
	if p.TxnReady.Load() {
		return p.LSO.Load(), nil
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if _, err := p.TxnStateLocked(); err != nil {
		return 0, err
	}
	// A follower's state, kept up to date by its appends
	// (FollowerAppendedLocked), was loaded before this node led the
	// partition: the LSO is computed from it now.
	p.UpdateLastStableOffsetLocked()
	p.TxnReady.Store(true)
	return p.LSO.Load(), nil
}

// AbortedIn lists the aborted transactions that overlap [from, to), which
// a read_committed fetch returns with the records, from the log's
// transaction indexes.
func (p *Partition) AbortedIn(from, to int64) ([]AbortedTxn, error) {
	txns, err := p.Log.CollectAbortedTxns(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]AbortedTxn, len(txns))
	for i, t := range txns {
		out[i] = AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset}
	}
	return out, nil
}

// AppendTransactional appends a transactional batch (a producer's, or the
// group coordinator's transactional offset commit), with the producer's
// transaction tracked so the LSO stays below it until its marker.
func (p *Partition) AppendTransactional(batch []byte, nowMs int64) (int64, error) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return 0, err
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	st, err := p.TxnStateLocked()
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
	first := p.Log.LogEndOffset()
	st.Update(BatchProducerInfo(&h), first, first+int64(h.LastOffsetDelta), h.MaxTimestamp)
	last, err := p.AppendLocked(batch, nowMs)
	if err != nil {
		return 0, err
	}
	p.Mu.Unlock()
	err = p.Durable(last)
	p.Mu.Lock() // for the deferred unlock
	return last, err
}
