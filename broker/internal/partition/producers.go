package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

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

// ProducerStateLocked returns p's producer state, loading it on first
// use, and from then on snapshots it at each roll of the log. The caller
// holds p.Mu.
func (p *Partition) ProducerStateLocked() (*producerstate.State, error) {
	if p.Producers != nil {
		return p.Producers, nil
	}
	st, from := producerstate.New(), int64(0)
	// A log that never held a record (a new partition's first
	// produce) has no producer to remember: a snapshot at offset 0
	// holds nothing, one above 0 is past the log end and skipped. So
	// its directory is not listed, once per partition but 10,000 times
	// when a producer first writes to 10,000 new partitions.
	if p.Log.LogEndOffset() > 0 {
		var err error
		if st, from, err = p.loadProducerSnapshot(); err != nil {
			return nil, err
		}
	}
	if err := replayProducers(p, st, from); err != nil {
		return nil, fmt.Errorf("rebuild producer state of %s-%d: %w", p.Topic, p.Index, err)
	}
	st.ExpireProducers(p.Env.Now().UnixMilli(), int64(p.Env.Cfg.ProducerIDExpirationMs))
	p.Producers = st
	p.Log.OnRoll(func(e storage.RollEvent) { p.producerSnapshotAtRoll(e) })
	p.UpdateLastStableOffsetLocked()
	return st, nil
}

// loadProducerSnapshot reads the newest valid snapshot at or below the log
// end and returns it with the offset replay starts from. Snapshots past the
// log end (left by a truncation) and corrupt ones are skipped.
func (p *Partition) loadProducerSnapshot() (*producerstate.State, int64, error) {
	offsets, err := p.snapshotOffsets()
	if err != nil {
		return nil, 0, err
	}
	leo := p.Log.LogEndOffset()
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > leo || off < p.Log.LogStartOffset() {
			continue
		}
		data, err := vfs.ReadFile(p.Env.FS, filepath.Join(p.Log.Dir(), producerstate.SnapshotFileName(off)))
		if err != nil {
			return nil, 0, fmt.Errorf("read producer snapshot of %s-%d: %w", p.Topic, p.Index, err)
		}
		st, err := producerstate.DecodeSnapshot(data)
		if err != nil {
			p.Env.Log.Warn("skipping corrupt producer snapshot", "topic", p.Topic, "partition", p.Index, "offset", off, "err", err)
			continue
		}
		return st, off, nil
	}
	return producerstate.New(), p.Log.LogStartOffset(), nil
}

// snapshotOffsets lists the partition's snapshot files by offset.
func (p *Partition) snapshotOffsets() ([]int64, error) {
	entries, err := p.Env.FS.ReadDir(p.Log.Dir())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p.Log.Dir(), err)
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
func replayProducers(p *Partition, st *producerstate.State, from int64) error {
	end := p.Log.LogEndOffset()
	for off := from; off < end; {
		rr, err := p.Log.Read(off, 1<<20, end, true)
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
			if err := replayBatch(st, batch, &h); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayBatch applies one batch of the log to the producer state: a
// producer's batch, or a marker, which ends a transaction.
func replayBatch(st *producerstate.State, batch []byte, h *protocol.BatchHeader) error {
	if h.ProducerID < 0 {
		return nil
	}
	if !h.IsControl() {
		st.Replay(BatchProducerInfo(h), h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
		return nil
	}
	commit, coordEpoch, err := DecodeMarker(batch)
	if err != nil {
		return fmt.Errorf("marker at offset %d: %w", h.BaseOffset, err)
	}
	st.ApplyMarker(producerstate.Marker{
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: coordEpoch, Commit: commit,
	}, h.BaseOffset, h.MaxTimestamp)
	return nil
}

// FollowerAppendedLocked brings the producer state up to date with
// batches a follower has just appended to its log, as Kafka's follower
// append updates its producer state manager. A follower that kept no
// state loads it now, once, from its newest snapshot and the log after
// it; from then on it snapshots at each roll, so that its promotion to
// leader, or its restart, replays at most the active segment rather than
// the whole log. The follower's log rolls only before a whole append, so
// at a roll inside the append the state holds exactly the records below
// the new segment. The caller holds p.Mu.
func (p *Partition) FollowerAppendedLocked(appended []byte) error {
	if p.Producers == nil {
		// The load replays the log to its end, appended batches
		// included.
		_, err := p.ProducerStateLocked()
		return err
	}
	end := p.Log.LogEndOffset()
	for data := appended; len(data) > 0; {
		batch, rest, h, err := protocol.NextBatch(data)
		if err != nil || h.LastOffset() >= end {
			return nil // a batch cut short by the leader's fetch size, not appended
		}
		data = rest
		if err := replayBatch(p.Producers, batch, &h); err != nil {
			p.Producers = nil // rebuilt from the log when next needed
			return fmt.Errorf("producer state of %s-%d: %w", p.Topic, p.Index, err)
		}
	}
	return nil
}

func BatchProducerInfo(h *protocol.BatchHeader) producerstate.BatchInfo {
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
// of the append holds p.Mu, so the state is ours to read: it holds the
// batch being appended already, which EncodeSnapshotBelow leaves out.
// Retention's roll comes from a goroutine that holds no broker lock and
// must not wait for p.Mu (an appender may hold it while it waits for the
// log): the snapshot is written once the lock is free, if nothing was
// appended meanwhile.
func (p *Partition) producerSnapshotAtRoll(e storage.RollEvent) {
	if e.InAppend {
		if p.Producers != nil {
			p.writeProducerSnapshot(e.BaseOffset, p.Producers.EncodeSnapshotBelow(e.BaseOffset))
		}
		return
	}
	p.Env.Go(func() {
		p.Mu.Lock()
		defer p.Mu.Unlock()
		if p.Producers != nil && p.Log.LogEndOffset() == e.BaseOffset && p.Env.Ctx.Err() == nil {
			p.writeProducerSnapshot(e.BaseOffset, p.Producers.EncodeSnapshot())
		}
	})
}

// writeProducerSnapshot writes a snapshot durably and prunes those below
// the log start offset. A failure only costs a longer replay after the
// next restart, so it is logged, not returned.
func (p *Partition) writeProducerSnapshot(offset int64, data []byte) {
	name := filepath.Join(p.Log.Dir(), producerstate.SnapshotFileName(offset))
	if err := vfs.WriteFileAtomic(p.Env.FS, name, data); err != nil {
		p.Env.Log.Warn("write producer snapshot", "file", name, "err", err)
		return
	}
	if err := p.PruneProducerSnapshots(); err != nil {
		p.Env.Log.Warn("prune producer snapshots", "topic", p.Topic, "partition", p.Index, "err", err)
	}
}

// PruneProducerSnapshots removes the snapshots below the log start
// offset, which no load uses (Kafka's deleteSnapshotsBefore).
func (p *Partition) PruneProducerSnapshots() error {
	offsets, err := p.snapshotOffsets()
	if err != nil {
		return err
	}
	lso := p.Log.LogStartOffset()
	var errs []error
	for _, off := range offsets {
		if off >= lso {
			break
		}
		name := filepath.Join(p.Log.Dir(), producerstate.SnapshotFileName(off))
		if err := p.Env.FS.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove old producer snapshot %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
