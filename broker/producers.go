package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// Idempotent and transactional producers: each partition keeps Kafka's
// producer state (the last five batches' sequences per producer id, and
// the first offset of each ongoing transaction), built on first use from
// the newest `.snapshot` file in the partition's directory plus every
// batch after it, markers included. As in Kafka, a snapshot is written
// each time the log rolls, named by the new segment's base offset, and at
// clean shutdown at the log end: a restart replays at most the active
// segment (after a crash) or nothing (after a clean stop). Snapshots below
// the log start offset are pruned; storage deletes those of deleted
// segments and those past a truncation. Producers idle for
// producer.id.expiration.ms are forgotten every
// producer.id.expiration.check.interval.ms, unless a transaction of theirs
// is open.

// startProducerIDs sets up the allocator that InitProducerId hands ids
// from: blocks of 1,000 ids recorded in the metadata log, so ids stay
// unique across restarts.
func (s *Server) startProducerIDs() {
	s.producerIDs = producerstate.NewIDAllocator(func(ctx context.Context) (int64, int64, error) {
		return s.ctrl.AllocateProducerIDs(ctx, s.cfg.NodeID)
	})
}

// producerStateLocked returns p's producer state, loading it on first
// use, and from then on snapshots it at each roll of the log. The caller
// holds p.mu.
func (p *partition) producerStateLocked() (*producerstate.State, error) {
	if p.producers != nil {
		return p.producers, nil
	}
	st, from, err := p.loadProducerSnapshot()
	if err != nil {
		return nil, err
	}
	if err := replayProducers(p, st, from); err != nil {
		return nil, fmt.Errorf("rebuild producer state of %s-%d: %w", p.topic, p.index, err)
	}
	st.ExpireProducers(p.env.now().UnixMilli(), int64(p.env.cfg.ProducerIDExpirationMs))
	p.producers = st
	p.log.OnRoll(func(e storage.RollEvent) { p.producerSnapshotAtRoll(e) })
	p.updateLastStableOffsetLocked()
	return st, nil
}

// loadProducerSnapshot reads the newest valid snapshot at or below the log
// end and returns it with the offset replay starts from. Snapshots past the
// log end (left by a truncation) and corrupt ones are skipped.
func (p *partition) loadProducerSnapshot() (*producerstate.State, int64, error) {
	offsets, err := p.snapshotOffsets()
	if err != nil {
		return nil, 0, err
	}
	leo := p.log.LogEndOffset()
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > leo || off < p.log.LogStartOffset() {
			continue
		}
		data, err := vfs.ReadFile(p.env.fs, filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(off)))
		if err != nil {
			return nil, 0, fmt.Errorf("read producer snapshot of %s-%d: %w", p.topic, p.index, err)
		}
		st, err := producerstate.DecodeSnapshot(data)
		if err != nil {
			p.env.log.Warn("skipping corrupt producer snapshot", "topic", p.topic, "partition", p.index, "offset", off, "err", err)
			continue
		}
		return st, off, nil
	}
	return producerstate.New(), p.log.LogStartOffset(), nil
}

// snapshotOffsets lists the partition's snapshot files by offset.
func (p *partition) snapshotOffsets() ([]int64, error) {
	entries, err := p.env.fs.ReadDir(p.log.Dir())
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

// replayProducers applies every batch from offset from to the log end to
// the producer state, as Kafka's loadProducersFromRecords: producers'
// batches, and markers, which end transactions.
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
			batch, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				return err
			}
			data = rest
			off = h.LastOffset() + 1
			if h.ProducerID < 0 || h.LastOffset() < from {
				continue
			}
			if !h.IsControl() {
				st.Replay(batchProducerInfo(&h), h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
				continue
			}
			commit, coordEpoch, err := decodeMarker(batch)
			if err != nil {
				return fmt.Errorf("marker at offset %d: %w", h.BaseOffset, err)
			}
			st.ApplyMarker(producerstate.Marker{
				ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: coordEpoch, Commit: commit,
			}, h.BaseOffset, h.MaxTimestamp)
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

// producerSnapshotAtRoll writes the producer state of the records below
// a roll's new base offset to <base>.snapshot, as Kafka's UnifiedLog.roll.
// The log calls it holding its writer lock. Inside an append the caller
// of the append holds p.mu, so the state is ours to read: it holds the
// batch being appended already, which EncodeSnapshotBelow leaves out.
// Retention's roll comes from a goroutine that holds no broker lock and
// must not wait for p.mu (an appender may hold it while it waits for the
// log): the snapshot is written once the lock is free, if nothing was
// appended meanwhile.
func (p *partition) producerSnapshotAtRoll(e storage.RollEvent) {
	if e.InAppend {
		if p.producers != nil {
			p.writeProducerSnapshot(e.BaseOffset, p.producers.EncodeSnapshotBelow(e.BaseOffset))
		}
		return
	}
	p.env.goTracked(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.producers != nil && p.log.LogEndOffset() == e.BaseOffset && p.env.ctx.Err() == nil {
			p.writeProducerSnapshot(e.BaseOffset, p.producers.EncodeSnapshot())
		}
	})
}

// writeProducerSnapshot writes a snapshot durably and prunes those below
// the log start offset. A failure only costs a longer replay after the
// next restart, so it is logged, not returned.
func (p *partition) writeProducerSnapshot(offset int64, data []byte) {
	name := filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(offset))
	if err := vfs.WriteFileAtomic(p.env.fs, name, data); err != nil {
		p.env.log.Warn("write producer snapshot", "file", name, "err", err)
		return
	}
	if err := p.pruneProducerSnapshots(); err != nil {
		p.env.log.Warn("prune producer snapshots", "topic", p.topic, "partition", p.index, "err", err)
	}
}

// pruneProducerSnapshots removes the snapshots below the log start
// offset, which no load uses (Kafka's deleteSnapshotsBefore).
func (p *partition) pruneProducerSnapshots() error {
	offsets, err := p.snapshotOffsets()
	if err != nil {
		return err
	}
	lso := p.log.LogStartOffset()
	var errs []error
	for _, off := range offsets {
		if off >= lso {
			break
		}
		name := filepath.Join(p.log.Dir(), producerstate.SnapshotFileName(off))
		if err := p.env.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove old producer snapshot %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// writeProducerSnapshots writes, for every partition whose producer state
// is loaded, a snapshot at its log end, so that the next start replays
// nothing. It runs at clean shutdown, after the last append.
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
			if err := p.pruneProducerSnapshots(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// expireProducers forgets the producers idle for producer.id.expiration.ms
// in every partition whose producer state is loaded, as Kafka's
// PeriodicProducerExpirationCheck (retentionLoop runs it every
// producer.id.expiration.check.interval.ms); a producer with a
// transaction open stays. It returns how many went.
func (s *Server) expireProducers(now time.Time) int {
	n := 0
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p == nil {
				continue
			}
			p.mu.Lock()
			if p.producers != nil {
				n += p.producers.ExpireProducers(now.UnixMilli(), int64(s.cfg.ProducerIDExpirationMs))
			}
			p.mu.Unlock()
		}
	}
	return n
}
