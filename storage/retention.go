package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"
)

// SetHighWatermark tells the log its high watermark. Retention never
// deletes a segment holding offsets at or above it, so the log start
// offset never passes it, and the cleaner never cleans past it (Kafka's
// UnifiedLog keeps both rules). Until it is called the log end offset
// stands in for it, which is right for a log whose every append is
// committed at once (a single replica).
func (l *Log) SetHighWatermark(hw int64) { l.hw.Store(max(hw, 0)) }

// CheckpointedHighWatermark is the high watermark the
// replication-offset-checkpoint held for this log when it was loaded (at
// most its log end), and whether there was one: where a replica's high
// watermark starts after a restart, as in Kafka.
func (l *Log) CheckpointedHighWatermark() (int64, bool) {
	hw := l.ckptHW.Load()
	return hw, hw >= 0
}

// SetFirstUnstableOffset tells the log the first offset of its earliest
// open transaction, or -1 when none is open (the broker's producer state,
// Kafka's firstUnstableOffset). The cleaner never cleans at or past it.
// Without it the cleaner finds open transactions by scanning the log.
func (l *Log) SetFirstUnstableOffset(offset int64) { l.unstable.Store(max(offset, -1)) }

// highWatermark is the high watermark, or the log end offset if the
// broker never set one.
func (l *Log) highWatermark() int64 {
	leo := l.leo.Load()
	if hw := l.hw.Load(); hw >= 0 {
		return min(hw, leo)
	}
	return leo
}

// lastStableOffset is Kafka's lastStableOffset: the first unstable offset
// if a transaction is open, else the high watermark.
func (l *Log) lastStableOffset() int64 {
	hw := l.highWatermark()
	if u := l.unstable.Load(); u >= 0 {
		return min(u, hw)
	}
	return hw
}

// Size is the log's size in bytes: the sum of its segments' sizes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// DeleteOldSegments applies the log's retention as Kafka's
// UnifiedLog.deleteOldSegments: segments wholly below the log start
// offset always go (after DeleteRecords); with cleanup.policy delete,
// also the oldest segments while the log is larger than retention.bytes by
// at least their size, and those whose largest timestamp (the file's
// modification time if it has none) is more than retention.ms before now.
// Deletion goes from the oldest segment and stops at the first that may
// stay, and never touches offsets at or past the high watermark. If every
// segment is deletable the active one is rolled first, so that a log
// always keeps a segment.
//
// The log start offset moves to the first remaining segment's base offset
// (or stays where it was if higher). Deleted segments' files are renamed
// .deleted and removed by Manager.RunFileDeletions once
// file.delete.delay.ms has passed, so that reads in flight finish. It
// returns how many segments it deleted.
func (l *Log) DeleteOldSegments(now time.Time) (int, error) {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	return l.deleteOldSegmentsMaint(now.UnixMilli())
}

// deleteOldSegmentsMaint is DeleteOldSegments with maintMu held.
func (l *Log) deleteOldSegmentsMaint(nowMs int64) (int, error) {
	if l.closed.Load() {
		return 0, fmt.Errorf("delete old segments %s: %w", l.tp, ErrClosed)
	}
	n, err := l.deleteWhile(nowMs, "log start offset breach", func(cfg *LogConfig) func(s, next *segment) bool {
		lso := l.lso.Load()
		return func(s, next *segment) bool { return next != nil && next.base <= lso }
	})
	if err != nil || !l.cfg.Load().Delete {
		return n, err
	}
	n2, err := l.deleteWhile(nowMs, "retention size breach", func(cfg *LogConfig) func(s, next *segment) bool {
		size := l.Size()
		if cfg.RetentionBytes < 0 || size < cfg.RetentionBytes {
			return nil
		}
		diff := size - cfg.RetentionBytes
		return func(s, next *segment) bool {
			if diff-s.size.Load() < 0 {
				return false
			}
			diff -= s.size.Load()
			return true
		}
	})
	n += n2
	if err != nil {
		return n, err
	}
	n3, err := l.deleteWhile(nowMs, "retention time breach", func(cfg *LogConfig) func(s, next *segment) bool {
		if cfg.RetentionMs < 0 {
			return nil
		}
		return func(s, next *segment) bool { return nowMs-l.largestTimestamp(s, cfg) > cfg.RetentionMs }
	})
	return n + n3, err
}

// largestTimestamp is Kafka's LogSegment.largestTimestamp: the largest
// batch timestamp, or the .log's modification time when no batch has one.
func (l *Log) largestTimestamp(s *segment, cfg *LogConfig) int64 {
	if err := s.ensureLoaded(cfg, l.logger); err == nil {
		s.mu.RLock()
		ts := s.maxTs
		s.mu.RUnlock()
		if ts >= 0 {
			return ts
		}
	}
	st, err := s.log.Stat()
	if err != nil {
		// Unknown age: keep the segment rather than guess.
		l.logger.Warn("stat segment for retention", "segment", s.base, "err", err)
		return l.nowMs()
	}
	return st.ModTime().UnixMilli()
}

// deleteWhile deletes segments from the oldest while pred, made under the
// writer's lock from the current config, says so (Kafka's
// deleteOldSegments(predicate) and deletableSegments). A nil predicate
// deletes nothing.
func (l *Log) deleteWhile(nowMs int64, reason string, makePred func(*LogConfig) func(s, next *segment) bool) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, fmt.Errorf("delete segments %s: %w", l.tp, ErrClosed)
	}
	if l.err != nil {
		return 0, l.err
	}
	cfg := l.cfg.Load()
	pred := makePred(cfg)
	if pred == nil {
		return 0, nil
	}
	segs := l.segments()
	hw := l.highWatermark()
	leo := l.leo.Load()
	n := 0
	for i, s := range segs {
		var next *segment
		upper := leo
		if i+1 < len(segs) {
			next = segs[i+1]
			upper = next.base
		}
		lastAndEmpty := next == nil && s.size.Load() == 0
		if hw < upper || !pred(s, next) || lastAndEmpty {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.deleteSegmentsLocked(n, nowMs, cfg); err != nil {
		return 0, err
	}
	l.logger.Info("deleted segments", "partition", l.tp.String(), "segments", n, "reason", reason,
		"log_start_offset", l.lso.Load())
	return n, nil
}

// deleteSegmentsLocked removes the n oldest segments from the log, as
// Kafka's UnifiedLog.deleteSegments: roll first if that is all of them,
// raise the log start offset to the next segment's base before the
// segments leave the list (readers check the start offset after they take
// the list), rename their files .deleted and queue them for removal. A
// failure to rename is a disk failure: the error is sticky, as Kafka takes
// the log dir offline.
func (l *Log) deleteSegmentsLocked(n int, nowMs int64, cfg *LogConfig) error {
	segs := l.segments()
	if n == len(segs) {
		if _, err := l.rollLocked(nowMs); err != nil {
			l.err = fmt.Errorf("roll %s before deleting every segment: %w", l.tp, err)
			return l.err
		}
		segs = l.segments()
	}
	doomed := segs[:n]
	storeMax(&l.lso, segs[n].base)
	rest := slices.Clone(segs[n:])
	l.segs.Store(&rest)
	for _, s := range doomed {
		if err := s.changeSuffix(deletedFileSuffix); err != nil {
			l.err = fmt.Errorf("delete segment %s/%d: %w", l.tp, s.base, err)
			return l.err
		}
	}
	// The producer snapshots of the deleted segments go with them, as
	// Kafka's deleteProducerSnapshots.
	first := rest[0].base
	if _, err := l.removeProducerSnapshots(func(off int64) bool { return off < first }); err != nil {
		l.err = fmt.Errorf("delete segments %s: %w", l.tp, err)
		return l.err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		l.err = fmt.Errorf("delete segments %s: sync dir: %w", l.tp, err)
		return l.err
	}
	l.deleter.schedule(l, doomed, nowMs+cfg.FileDeleteDelayMs)
	return nil
}

// fileDeleter holds segments renamed .deleted until their
// file.delete.delay.ms has passed (Kafka schedules a delayed task per
// segment).
type fileDeleter struct {
	mu      sync.Mutex
	pending []pendingDeletion // in the order scheduled
}

type pendingDeletion struct {
	due int64 // ms
	log *Log
	seg *segment
}

func (d *fileDeleter) schedule(l *Log, segs []*segment, due int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range segs {
		d.pending = append(d.pending, pendingDeletion{due: due, log: l, seg: s})
	}
}

// take removes and returns the deletions due at nowMs, or all of them
// for l if l is not nil (its log is being deleted).
func (d *fileDeleter) take(nowMs int64, l *Log) []pendingDeletion {
	d.mu.Lock()
	defer d.mu.Unlock()
	var due []pendingDeletion
	keep := d.pending[:0]
	for _, p := range d.pending {
		if (l == nil && p.due <= nowMs) || (l != nil && p.log == l) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(d.pending[len(keep):])
	d.pending = keep
	return due
}

// next returns the earliest due time, if any deletion is pending.
func (d *fileDeleter) next() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return 0, false
	}
	first := d.pending[0].due
	for _, p := range d.pending[1:] {
		first = min(first, p.due)
	}
	return first, true
}

// RunFileDeletions removes the files of deleted segments whose
// file.delete.delay.ms has passed at now: it waits for reads still using
// a segment, closes it and removes its .deleted files. It returns how many
// segments it removed. The broker calls it periodically (every few
// seconds, or at NextFileDeletion); files it leaves behind in a crash are
// removed at the next start.
func (m *Manager) RunFileDeletions(now time.Time) (int, error) {
	due := m.deleter.take(now.UnixMilli(), nil)
	var errs []error
	dirs := map[string]bool{}
	for _, p := range due {
		if err := p.seg.closeForGood(); err != nil {
			m.logger.Warn("close deleted segment", "partition", p.log.tp.String(), "segment", p.seg.base, "err", err)
		}
		if err := p.seg.remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove deleted segment %s/%d: %w", p.log.tp, p.seg.base, err))
		}
		dirs[p.seg.dir] = true
	}
	for d := range dirs {
		if err := m.fsys.SyncDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove deleted segments: sync %s: %w", d, err))
		}
	}
	return len(due), errors.Join(errs...)
}

// NextFileDeletion returns when the next deleted segment's files are due
// for removal, if any are pending.
func (m *Manager) NextFileDeletion() (time.Time, bool) {
	ms, ok := m.deleter.next()
	return time.UnixMilli(ms), ok
}

// DeleteOldSegments applies retention (Log.DeleteOldSegments) to every
// log whose cleanup.policy does not include compact, as Kafka's
// LogManager.cleanupLogs; the Cleaner does it for compacted logs after
// each cleaning. A log being cleaned is skipped until the next call. The
// broker calls it every log.retention.check.interval.ms. It returns how
// many segments it deleted; an error on one log does not stop the others.
func (m *Manager) DeleteOldSegments(now time.Time) (int, error) {
	total := 0
	var errs []error
	for _, l := range m.Logs() {
		if l.cfg.Load().Compact {
			continue
		}
		n, err := l.tryDeleteOldSegments(now.UnixMilli())
		total += n
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// tryDeleteOldSegments applies retention unless maintenance is running.
func (l *Log) tryDeleteOldSegments(nowMs int64) (int, error) {
	if !l.maintMu.TryLock() {
		return 0, nil
	}
	defer l.maintMu.Unlock()
	return l.deleteOldSegmentsMaint(nowMs)
}
