package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// Idempotent producers: each partition keeps Kafka's producer state (the
// last five batches' sequences per producer id), built on the first
// produce that carries a producer id from the newest `.snapshot` file in
// the partition's directory plus every batch after it. A clean shutdown
// writes a snapshot at the log end, so a restart replays nothing; after a
// crash the batches since the last snapshot are read again, headers only.

// startProducerIDs sets up the allocator that InitProducerId hands ids
// from: blocks of 1,000 ids recorded in the metadata log, so ids stay
// unique across restarts.
func (s *Server) startProducerIDs() {
	s.producerIDs = producerstate.NewIDAllocator(func(ctx context.Context) (int64, int64, error) {
		return s.ctrl.AllocateProducerIDs(ctx, s.cfg.NodeID)
	})
}

// producerStateLocked returns p's producer state, loading it on first
// use. The caller holds p.mu.
func (s *Server) producerStateLocked(p *partition) (*producerstate.State, error) {
	if p.producers != nil {
		return p.producers, nil
	}
	st, from, err := s.loadProducerSnapshot(p)
	if err != nil {
		return nil, err
	}
	if err := replayProducers(p, st, from); err != nil {
		return nil, fmt.Errorf("rebuild producer state of %s-%d: %w", p.topic, p.index, err)
	}
	st.ExpireProducers(s.now().UnixMilli(), int64(s.cfg.ProducerIDExpirationMs))
	p.producers = st
	return st, nil
}

// loadProducerSnapshot reads the newest valid snapshot at or below the log
// end and returns it with the offset replay starts from. Snapshots past the
// log end (left by a truncation) and corrupt ones are skipped.
func (s *Server) loadProducerSnapshot(p *partition) (*producerstate.State, int64, error) {
	offsets, err := s.snapshotOffsets(p)
	if err != nil {
		return nil, 0, err
	}
	leo := p.log.LogEndOffset()
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > leo || off < p.log.LogStartOffset() {
			continue
		}
		data, err := vfs.ReadFile(s.fs, filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(off)))
		if err != nil {
			return nil, 0, fmt.Errorf("read producer snapshot of %s-%d: %w", p.topic, p.index, err)
		}
		st, err := producerstate.DecodeSnapshot(data)
		if err != nil {
			s.log.Warn("skipping corrupt producer snapshot", "topic", p.topic, "partition", p.index, "offset", off, "err", err)
			continue
		}
		return st, off, nil
	}
	return producerstate.New(), p.log.LogStartOffset(), nil
}

// snapshotOffsets lists the partition's snapshot files by offset.
func (s *Server) snapshotOffsets(p *partition) ([]int64, error) {
	entries, err := s.fs.ReadDir(p.log.Dir())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p.log.Dir(), err)
	}
	var out []int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".snapshot") {
			continue
		}
		if off, err := producerstate.ParseSnapshotFileName(e.Name()); err == nil {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// replayProducers applies the producer fields of every batch from offset
// from to the log end.
func replayProducers(p *partition, st *producerstate.State, from int64) error {
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
			_, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				return err
			}
			data = rest
			off = h.LastOffset() + 1
			if h.ProducerID < 0 || h.IsControl() || h.LastOffset() < from {
				continue
			}
			st.Replay(batchProducerInfo(&h), h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
		}
	}
	return nil
}

func batchProducerInfo(h *protocol.BatchHeader) producerstate.BatchInfo {
	return producerstate.BatchInfo{
		ProducerID:      h.ProducerID,
		ProducerEpoch:   h.ProducerEpoch,
		BaseSequence:    h.BaseSequence,
		LastSequence:    producerstate.LastSequence(h.BaseSequence, h.LastOffsetDelta),
		IsTransactional: h.IsTransactional(),
		NumRecords:      h.NumRecords,
	}
}

// writeProducerSnapshots writes, for every partition whose producer state
// is loaded, a snapshot at its log end, and removes older snapshots but
// the newest one before it. It runs at clean shutdown, after the last
// append.
func (s *Server) writeProducerSnapshots() error {
	var errs []error
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p == nil {
				continue
			}
			p.mu.Lock()
			st := p.producers
			leo := p.log.LogEndOffset()
			var data []byte
			if st != nil {
				data = st.EncodeSnapshot()
			}
			p.mu.Unlock()
			if st == nil {
				continue
			}
			name := filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(leo))
			if err := vfs.WriteFileAtomic(s.fs, name, data); err != nil {
				errs = append(errs, fmt.Errorf("write producer snapshot %s: %w", name, err))
				continue
			}
			offsets, err := s.snapshotOffsets(p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for i := 0; i+2 < len(offsets); i++ {
				old := filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(offsets[i]))
				if err := s.fs.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("remove old producer snapshot %s: %w", old, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
