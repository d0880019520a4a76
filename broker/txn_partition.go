package broker

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
)

// A partition's transactional state: the last stable offset (LSO), below
// which every transaction is decided, and the aborted transactions that
// read_committed fetches must tell consumers to skip. Both come from the
// producer state, rebuilt from the whole log (control batches included)
// the first time a partition needs them, then kept up to date by appends
// and markers.

// abortedTxn is an aborted transaction's range of offsets in a partition.
type abortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnStateLocked makes sure the partition's producer state and aborted
// transactions reflect the whole log. The caller holds p.mu.
func (s *Server) txnStateLocked(p *partition) (*producerstate.State, error) {
	if p.txnLoaded {
		return p.producers, nil
	}
	st := producerstate.New()
	var aborted []abortedTxn
	err := scanBatches(p, p.log.LogStartOffset(), func(h *protocol.BatchHeader, batch []byte) error {
		if h.ProducerID < 0 {
			return nil
		}
		if !h.IsControl() {
			st.Replay(batchProducerInfo(h), h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
			return nil
		}
		commit, coordEpoch, err := decodeMarker(batch)
		if err != nil {
			return err
		}
		m := producerstate.Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: coordEpoch, Commit: commit}
		if done, ok := st.ApplyMarker(m, h.BaseOffset, h.MaxTimestamp); ok && done.Aborted {
			aborted = append(aborted, abortedTxn{done.ProducerID, done.FirstOffset, done.LastOffset})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild transactions of %s-%d: %w", p.topic, p.index, err)
	}
	st.ExpireProducers(s.now().UnixMilli(), int64(s.cfg.ProducerIDExpirationMs))
	p.producers = st
	p.aborted = aborted
	p.txnLoaded = true
	p.updateLastStableOffsetLocked()
	return st, nil
}

// scanBatches calls fn for every batch from offset from to the log end.
func scanBatches(p *partition, from int64, fn func(h *protocol.BatchHeader, batch []byte) error) error {
	end := p.log.LogEndOffset()
	for off := from; off < end; {
		rr, err := p.log.Read(off, 1<<20, end, true)
		if err != nil {
			return err
		}
		if len(rr.Data) == 0 {
			return nil
		}
		for data := rr.Data; len(data) > 0; {
			batch, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				return err
			}
			data = rest
			off = h.LastOffset() + 1
			if h.LastOffset() < from {
				continue
			}
			if err := fn(&h, batch); err != nil {
				return err
			}
		}
	}
	return nil
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
func (s *Server) lastStableOffset(p *partition) (int64, error) {
	if p.txnReady.Load() {
		return p.lso.Load(), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := s.txnStateLocked(p); err != nil {
		return 0, err
	}
	p.txnReady.Store(true)
	return p.lso.Load(), nil
}

// abortedIn lists the aborted transactions that overlap [from, to), which
// a read_committed fetch returns with the records.
func (s *Server) abortedIn(p *partition, from, to int64) []abortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].LastOffset >= from })
	var out []abortedTxn
	for ; i < len(p.aborted); i++ {
		if p.aborted[i].FirstOffset < to {
			out = append(out, p.aborted[i])
		}
	}
	return out
}

// appendTransactional appends a transactional batch (a producer's, or the
// group coordinator's transactional offset commit), with the producer's
// transaction tracked so the LSO stays below it until its marker.
func (s *Server) appendTransactional(p *partition, batch []byte, nowMs int64) (int64, error) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := s.txnStateLocked(p)
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
	st.Replay(batchProducerInfo(&h), first, first+int64(h.LastOffsetDelta), h.MaxTimestamp)
	last, err := s.appendLocked(p, batch, nowMs)
	if err != nil {
		return 0, err
	}
	p.mu.Unlock()
	err = s.durable(p, last)
	p.mu.Lock() // for the deferred unlock
	return last, err
}
