package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/gregorbroker/gregor/vfs"
)

// TruncateTo removes every record at or above offset, as Kafka's
// UnifiedLog.truncateTo does for a follower whose log diverged from its
// leader's. It is a no-op when offset >= LogEndOffset. An offset below
// the first segment's base offset empties the log as
// TruncateFullyAndStartAt(offset).
//
// Segments whose base offset is above offset leave the log and wait as
// .deleted files for file.delete.delay.ms, so that reads in flight
// finish. The segment holding offset is cut at the start of the first
// batch whose last offset is >= offset, as Kafka's LogSegment.truncateTo,
// and its .index and .timeindex lose the entries at or above offset. If
// offset falls inside a batch, the whole batch goes and the log end
// offset becomes that batch's base offset. (Kafka sets it to offset
// itself, an offset its own restart would not compute; truncation points
// from OffsetForLeaderEpoch are batch boundaries, where the two agree.)
// Callers read LogEndOffset afterwards for where to fetch from.
//
// The log start offset, recovery point and high watermark are lowered to
// the new log end offset if above it, and the cleaner checkpoint to the
// new active segment's base offset, as Kafka's
// LogCleanerManager.maybeTruncateCheckpoint. Everything it changes is on
// stable storage when it returns: the .deleted renames first (the last
// segment first, so that a crash never leaves a hole), then the indexes,
// then the .log. A crash midway leaves a prefix of the old log at least as
// long as the truncated one.
//
// It stops a cleaning of the log in progress and excludes retention,
// flushes and appends while it works. Concurrent reads return the log
// before or after the truncation, never a mix. The producer state and the
// leader epoch cache, which the broker keeps, must be truncated by the
// caller (Kafka's rebuildProducerState and truncateFromEnd); the
// recovery-point checkpoint file is rewritten by Manager.Checkpoint, which
// the caller runs after a round of truncations as Kafka's
// LogManager.truncateTo does.
//
// If only the rewrite of the cleaner checkpoint fails, the log is
// truncated and the error is returned; the cleaner already uses the lowered
// checkpoint.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncate %s to %d: negative offset", l.tp, offset)
	}
	if l.closed.Load() {
		return fmt.Errorf("truncate %s: %w", l.tp, ErrClosed)
	}
	if offset >= l.leo.Load() {
		return nil // re-checked under the locks, where it counts
	}
	l.lockMaintAbortingCleaning()
	defer l.maintMu.Unlock()
	changed, err := l.truncateToMaint(offset)
	if err != nil || !changed {
		return err
	}
	return l.truncateCleanerCheckpoint()
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log
// whose base, start and end offsets are offset, as Kafka's
// UnifiedLog.truncateFullyAndStartAt: a follower does this when its fetch
// offset is below the leader's log start offset, or its log is empty and
// the leader's first batch starts below it (AppendOffsetError). The old
// segments wait as .deleted files for file.delete.delay.ms. The recovery
// point becomes offset, and so does the high watermark if the broker set
// one. It is durable when it returns; a crash midway leaves the old log
// or the new one. Locking, concurrent reads and the caller's duties are
// as for TruncateTo.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncate %s fully to start at %d: negative offset", l.tp, offset)
	}
	l.lockMaintAbortingCleaning()
	defer l.maintMu.Unlock()
	err := func() error {
		l.flushMu.Lock()
		defer l.flushMu.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := l.checkWritableLocked("truncate fully"); err != nil {
			return err
		}
		return l.truncateFullyLocked(offset, l.nowMs())
	}()
	if err != nil {
		return err
	}
	return l.truncateCleanerCheckpoint()
}

// lockMaintAbortingCleaning takes maintMu, first asking a cleaning of the
// log in progress to stop so that the wait is short.
func (l *Log) lockMaintAbortingCleaning() {
	l.abortCleaning.Add(1)
	l.maintMu.Lock()
	l.abortCleaning.Add(-1)
}

// checkWritableLocked returns ErrClosed or the sticky error, if any.
func (l *Log) checkWritableLocked(op string) error {
	if l.closed.Load() {
		return fmt.Errorf("%s %s: %w", op, l.tp, ErrClosed)
	}
	return l.err
}

// truncateToMaint is TruncateTo with maintMu held. It reports whether the
// log changed.
func (l *Log) truncateToMaint(offset int64) (bool, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked("truncate"); err != nil {
		return false, err
	}
	if offset >= l.leo.Load() {
		return false, nil
	}
	now := l.nowMs()
	segs := l.segments()
	if offset < segs[0].base {
		return true, l.truncateFullyLocked(offset, now)
	}
	i := floorSegment(segs, offset)
	target, doomed := segs[i], segs[i+1:]
	cfg := l.cfg.Load()
	// Find the cut before changing anything: a read error here leaves
	// the log as it was.
	plan, err := target.planTruncationLocked(offset, cfg, l.logger)
	if err != nil {
		return false, fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
	}
	// Producer snapshots past the new end describe records about to go
	// (Kafka's truncateAndReload); a stale one must never be read as the
	// state of the records that will take their place.
	removed, err := l.removeProducerSnapshots(func(off int64) bool { return off > plan.end })
	if err != nil {
		l.err = fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
		return false, l.err
	}
	if removed && len(doomed) == 0 {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			l.err = fmt.Errorf("truncate %s: sync dir: %w", l.tp, err)
			return false, l.err
		}
	}
	if err := l.renameDeletedLocked(doomed); err != nil {
		return false, err
	}

	// No read is inside the target segment from here until the new state
	// is published, so none sees its files shrink, and every read that
	// looked at the old state before finds the truncation count changed.
	target.fileMu.Lock()
	defer target.fileMu.Unlock()
	if err := target.applyTruncationLocked(plan, now); err != nil {
		l.err = fmt.Errorf("truncate %s to %d: %w", l.tp, offset, err)
		return false, l.err
	}
	kept := slices.Clone(segs[:i+1])
	l.segs.Store(&kept)
	storeMin(&l.lso, plan.end)
	l.leo.Store(plan.end)
	storeMin(&l.rp, plan.end)
	storeMin(&l.hw, plan.end) // -1, not set, stays
	l.txnOpen = nil           // followed again from a snapshot when needed
	l.truncations.Add(1)
	if len(doomed) > 0 {
		l.deleter.schedule(l, doomed, now+cfg.FileDeleteDelayMs)
	}
	l.logger.Info("truncated log", "partition", l.tp.String(), "offset", offset, "log_end_offset", plan.end,
		"segments_deleted", len(doomed), "bytes_cut", plan.cutBytes)
	return true, nil
}

// truncateFullyLocked replaces every segment by an empty one at offset.
// The old segments are renamed .deleted before the new one is created, so
// that a new segment whose base offset equals an old one's takes a free
// name, and one directory sync makes both durable together.
func (l *Log) truncateFullyLocked(offset, now int64) error {
	old := l.segments()
	cfg := l.cfg.Load()
	for i := len(old) - 1; i >= 0; i-- {
		if err := old[i].changeSuffix(deletedFileSuffix); err != nil {
			l.err = fmt.Errorf("truncate %s fully: delete segment %d: %w", l.tp, old[i].base, err)
			return l.err
		}
	}
	// No producer state survives, as Kafka's truncateFullyAndStartAt.
	if _, err := l.removeProducerSnapshots(func(int64) bool { return true }); err != nil {
		l.err = fmt.Errorf("truncate %s fully: %w", l.tp, err)
		return l.err
	}
	seg, err := createSegment(l.fsys, l.files, l.dir, offset, now)
	if err != nil {
		l.err = fmt.Errorf("truncate %s fully: %w", l.tp, err)
		return l.err
	}
	seg.rollJitterMs = cfg.randomSegmentJitter()
	if err := l.fsys.SyncDir(l.dir); err != nil {
		seg.close()
		l.err = fmt.Errorf("truncate %s fully: sync dir: %w", l.tp, err)
		return l.err
	}
	// A read that took the new segment list waits here until the offsets
	// that go with it are published and the truncation counted.
	seg.fileMu.Lock()
	segs := []*segment{seg}
	l.segs.Store(&segs)
	l.lso.Store(offset)
	l.leo.Store(offset)
	l.rp.Store(offset) // nothing below offset is left to recover
	if l.hw.Load() >= 0 {
		l.hw.Store(offset)
	}
	l.txnOpen = map[int64]int64{}
	l.truncations.Add(1)
	seg.fileMu.Unlock()
	l.deleter.schedule(l, old, now+cfg.FileDeleteDelayMs)
	l.logger.Info("truncated log fully", "partition", l.tp.String(), "offset", offset, "segments_deleted", len(old))
	return nil
}

// renameDeletedLocked renames the files of segments leaving the log
// .deleted, the highest base offset first, and syncs the directory. A
// crash in between then leaves the log without some of its last
// segments, never without one in the middle. A failure is sticky.
func (l *Log) renameDeletedLocked(doomed []*segment) error {
	if len(doomed) == 0 {
		return nil
	}
	for i := len(doomed) - 1; i >= 0; i-- {
		if err := doomed[i].changeSuffix(deletedFileSuffix); err != nil {
			l.err = fmt.Errorf("truncate %s: delete segment %d: %w", l.tp, doomed[i].base, err)
			return l.err
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		l.err = fmt.Errorf("truncate %s: sync dir: %w", l.tp, err)
		return l.err
	}
	return nil
}

// truncateCleanerCheckpoint lowers the cleaner checkpoint to the active
// segment's base offset, which the cleaner never passes, as Kafka's
// LogManager.maybeTruncateCleanerCheckpointToActiveSegmentBaseOffset.
// maintMu is held, so no cleaning can record a checkpoint in between.
func (l *Log) truncateCleanerCheckpoint() error {
	if l.truncateCleanerCkpt == nil {
		return nil
	}
	return l.truncateCleanerCkpt(l, l.active().base)
}

// truncateCleanerCheckpoint lowers l's cleaner checkpoint to offset if it
// is above, as Kafka's LogCleanerManager.maybeTruncateCheckpoint (which
// does so for a compacted log only; a checkpoint left above the data that
// replaced the truncated records would hide them from a later cleaning,
// whatever the policy is now). If the file cannot be rewritten, the
// cleaner still uses the lowered offset until the next start.
func (m *Manager) truncateCleanerCheckpoint(l *Log, offset int64) error {
	m.cleanerMu.Lock()
	defer m.cleanerMu.Unlock()
	ckpts := m.cleanerCkpt[l.parent]
	old, ok := ckpts[l.tp]
	if !ok || old <= offset {
		return nil
	}
	if err := m.writeCleanerCheckpointLocked(l.parent, func(c map[TopicPartition]int64) { c[l.tp] = offset }); err != nil {
		ckpts[l.tp] = offset
		return fmt.Errorf("truncate cleaner checkpoint %s to %d: %w", l.tp, offset, err)
	}
	l.logger.Info("lowered cleaner checkpoint after truncation", "partition", l.tp.String(), "from", old, "to", offset)
	return nil
}

// storeMin lowers v to x if x is smaller.
func storeMin(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x >= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// segmentTruncation is where a segment is cut and what it knows after.
type segmentTruncation struct {
	cut             int64 // bytes of the .log kept
	cutBytes        int64 // bytes removed
	end             int64 // the log end offset afterwards
	offEntries      int   // .index entries kept
	timeEntries     int   // .timeindex entries kept
	maxTs           int64 // largest batch max timestamp kept
	maxTsOffset     int64
	bytesSinceIndex int64
}

// planTruncationLocked finds where truncating at offset cuts the segment: at
// the first batch whose last offset is >= offset (Kafka's translateOffset),
// found from the .index. Index entries at or above offset go; the largest
// timestamp kept is the last time index entry kept or a larger one in the
// batches after it (Kafka's readLargestTimestamp). The caller holds
// Log.mu, so nothing appends meanwhile.
func (s *segment) planTruncationLocked(offset int64, cfg *LogConfig, logger *slog.Logger) (segmentTruncation, error) {
	if err := s.ensureLoaded(cfg, logger); err != nil {
		return segmentTruncation{}, err
	}
	size := s.size.Load()
	p := segmentTruncation{cut: size, end: offset}
	s.mu.RLock()
	p.offEntries = sort.Search(len(s.offIdx), func(i int) bool { return s.base+int64(s.offIdx[i].rel) >= offset })
	p.timeEntries = sort.Search(len(s.timeIdx), func(i int) bool { return s.base+int64(s.timeIdx[i].rel) >= offset })
	kept := s.offIdx[:p.offEntries]
	p.maxTs, p.maxTsOffset = lastTimeEntry(s.timeIdx[:p.timeEntries], s.base)
	// Batches before this position hold no larger timestamp than the
	// last time entry kept, and none after the last index entry kept.
	start := offsetLookup(kept, s.base, p.maxTsOffset)
	lastEntryPos := int64(-1)
	if len(kept) > 0 {
		lastEntryPos = int64(kept[len(kept)-1].pos)
	}
	s.mu.RUnlock()

	sc := newHeaderScanner(s.log, start, size)
	defer sc.release()
	for {
		b, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return p, fmt.Errorf("segment %d: %w", s.base, err)
		}
		if b.lastOffset >= offset {
			p.cut, p.end = b.pos, min(offset, b.baseOffset)
			break
		}
		if b.maxTimestamp > p.maxTs {
			p.maxTs, p.maxTsOffset = b.maxTimestamp, b.lastOffset
		}
		if b.pos >= lastEntryPos {
			p.bytesSinceIndex += b.size
		}
	}
	p.cutBytes = size - p.cut
	return p, nil
}

// applyTruncationLocked cuts the segment as planned and makes it the active
// one. The index files are trimmed and synced before the .log is cut and
// synced: an index entry must never point past the end of its .log. The
// caller holds Log.mu and fileMu.
func (s *segment) applyTruncationLocked(p segmentTruncation, now int64) error {
	if err := s.truncateTxnIndexLocked(p.end); err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	s.mu.Lock()
	s.offIdx = s.offIdx[:p.offEntries]
	s.timeIdx = s.timeIdx[:p.timeEntries]
	s.offPersisted = min(s.offPersisted, p.offEntries)
	s.timePersisted = min(s.timePersisted, p.timeEntries)
	s.maxTs, s.maxTsOffset = p.maxTs, p.maxTsOffset
	s.mu.Unlock()

	// Reopening trims the files to the entries persisted and kept; the
	// kept entries not yet persisted are written after, creating the
	// files if the segment had none.
	if err := s.closeIndexFiles(); err != nil {
		return fmt.Errorf("segment %d: close indexes: %w", s.base, err)
	}
	if err := s.openIndexFiles(false); err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	if err := s.persistIndexesLocked(); err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	for _, f := range []vfs.File{s.idxFile, s.timeFile, s.txnFile} {
		if f == nil {
			continue // no transaction index
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
	}
	if p.cut < s.size.Load() {
		if err := s.log.Truncate(p.cut); err != nil {
			return fmt.Errorf("truncate %s: %w", s.log.Name(), err)
		}
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.log.Name(), err)
	}
	s.size.Store(p.cut)
	s.unsynced = false
	s.nextOffset = p.end
	s.bytesSinceIndex = p.bytesSinceIndex
	if p.cut == 0 {
		// As Kafka, an emptied segment ages for segment.ms from now.
		s.created = now
		s.rollTs, s.rollTsKnown = noTimestamp, true
	}
	return nil
}
