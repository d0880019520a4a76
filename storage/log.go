package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// Errors a Log returns. The broker maps them to Kafka error codes.
var (
	// ErrOffsetOutOfRange is OFFSET_OUT_OF_RANGE: an offset below the log
	// start offset or above the log end offset.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrBatchTooLarge is RECORD_BATCH_TOO_LARGE: a batch larger than
	// segment.bytes can never be stored.
	ErrBatchTooLarge = errors.New("record batch larger than segment.bytes")
	// ErrClosed is returned by a log used after Close or DeleteLog.
	ErrClosed = errors.New("log closed")
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats tp as Kafka names its directory, <topic>-<partition>.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// AppendResult describes an append: the offsets assigned and the largest
// timestamp among the appended batches with the last offset of the batch
// holding it (Kafka's shallow offset of max timestamp); -1 when no batch
// has a timestamp.
type AppendResult struct {
	FirstOffset          int64
	LastOffset           int64
	MaxTimestamp         int64
	OffsetOfMaxTimestamp int64
}

// ReadResult is what Read returns: whole batches, and the log's bounds at
// the time of the read.
type ReadResult struct {
	Data []byte
	// Slice, from ReadSlice only, holds the batches in the segment file
	// instead of Data; the caller must Release it.
	Slice          *FileSlice
	LogStartOffset int64
	LogEndOffset   int64
}

// Log is one partition's log: a directory <topic>-<partition> of segments.
//
// One writer at a time appends (the caller holds the partition's lock);
// readers run concurrently with it and with each other, seeing a prefix of
// the log published by atomics. Lock order: maintMu, then flushMu, then
// mu, then a segment's fileMu, then the segment's mu.
type Log struct {
	fsys       vfs.FS
	dir        string
	parent     string // the log dir holding dir
	tp         TopicPartition
	logger     *slog.Logger
	nowMs      func() int64
	decompress func(protocol.Codec, []byte) ([]byte, error)
	compress   func(protocol.Codec, []byte, []byte) ([]byte, error)
	deleter    *fileDeleter

	segs        atomic.Pointer[[]*segment] // copy on write; sorted by base offset
	leo         atomic.Int64
	lso         atomic.Int64
	rp          atomic.Int64
	hw          atomic.Int64 // -1 until SetHighWatermark
	ckptHW      atomic.Int64 // the high watermark of the last checkpoint read at start, -1 if none
	unstable    atomic.Int64 // first unstable offset; -1 for none
	cfg         atomic.Pointer[LogConfig]
	closed      atomic.Bool
	lastFlushMs atomic.Int64

	// truncations counts completed TruncateTo and TruncateFullyAndStartAt
	// calls. A read that saw it change started again: it may have mixed
	// the segments of the log before with the offsets of the log after.
	truncations atomic.Int64
	// abortCleaning is how many truncations wait for maintMu; a cleaning
	// of this log stops when it sees one (Kafka's abortAndPauseCleaning).
	abortCleaning atomic.Int32
	// truncateCleanerCkpt lowers the log's cleaner checkpoint after a
	// truncation (the Manager's maybeTruncateCheckpoint); nil if none.
	truncateCleanerCkpt func(l *Log, offset int64) error

	// maintMu serializes the maintenance that removes segments: retention
	// and cleaning, as Kafka's LogCleanerManager keeps the two apart.
	maintMu sync.Mutex

	// flushMu serializes Flush and Close, so that files are not closed
	// while a flush outside mu syncs them.
	flushMu sync.Mutex

	mu       sync.Mutex // the writer's lock
	err      error      // sticky: a failed write or fsync
	dirDirty bool       // directory entries changed since the last SyncDir
	// entryUnsynced says the log was created and nothing of it was synced
	// yet: its directory's entry in the log dir, its files' entries and
	// partition.metadata (CreateLogs). The first flush or roll syncs them
	// before the recovery point moves (syncEntry).
	entryUnsynced bool
	entryFiles    []string // LogSpec.Files, synced with partition.metadata; set at creation only
	topicID       [16]byte
	infos         []batchInfo // scratch for Append

	// txnOpen is the first offset of each producer's ongoing transaction
	// as of the log end, which the transaction index is built from; nil
	// until an append needs it (txnindex.go). Guarded by mu.
	txnOpen map[int64]int64
	// snapshotTxns decodes a producer-state snapshot's ongoing
	// transactions (ManagerConfig.ProducerSnapshotTxns); nil if none.
	snapshotTxns func([]byte) (map[int64]int64, error)
	rollHook     func(RollEvent) // see OnRoll; guarded by mu
	syncWatch    *syncWatch      // the Manager's fsync watchdog (syncwatch.go)
	files        *fdCache        // the Manager's open segment files (logfile.go)
}

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 { return l.lso.Load() }

// LogEndOffset is the offset the next appended record will get. It reads
// an atomic, so it never waits for the writer.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// RecoveryPoint is the offset below which everything is known to be on
// stable storage; recovery after a crash starts from the segment holding it.
func (l *Log) RecoveryPoint() int64 { return l.rp.Load() }

// Dir is the partition's directory.
func (l *Log) Dir() string { return l.dir }

// TopicID is the topic id recorded in partition.metadata, zero if none.
func (l *Log) TopicID() [16]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topicID
}

// SetConfig applies a changed topic config to later appends.
func (l *Log) SetConfig(cfg LogConfig) {
	c := cfg.normalized()
	l.cfg.Store(&c)
}

// segments returns the current segments; never empty for an open log.
func (l *Log) segments() []*segment { return *l.segs.Load() }

func (l *Log) active() *segment {
	segs := l.segments()
	return segs[len(segs)-1]
}

// storeMax raises v to x if x is larger.
func storeMax(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// Append writes one or more consecutive magic-2 batches, already validated
// by the caller (CRC checked), at the log end. It assigns offsets by
// rewriting each batch's base offset and partition leader epoch in place
// (both lie outside the CRC), rolls the segment first when segment.bytes,
// segment.ms, a full index or the 32-bit relative offset demand it, and
// fsyncs when flush.messages or flush.ms says so. now is the broker's clock
// in milliseconds.
//
// A failed write or fsync makes the error sticky: every later Append and
// Flush returns it. If the bytes were written but the policy fsync failed,
// the result is returned along with the error.
func (l *Log) Append(batches []byte, leaderEpoch int32, now int64) (AppendResult, error) {
	res, flush, err := l.AppendDeferFlush(batches, leaderEpoch, now)
	if err != nil {
		return AppendResult{}, err
	}
	if flush {
		if err := l.FlushTo(res.LastOffset + 1); err != nil {
			return res, err
		}
		// flush.ms counts on the caller's clock.
		l.lastFlushMs.Store(now)
	}
	return res, nil
}

// AppendDeferFlush is Append without the policy fsync: it reports whether
// flush.messages or flush.ms asks for one, and the caller calls FlushTo
// (outside its own locks) before it acknowledges the batch. Concurrent
// appenders then share fsyncs: group commit.
func (l *Log) AppendDeferFlush(batches []byte, leaderEpoch int32, now int64) (AppendResult, bool, error) {
	return l.append(batches, leaderEpoch, now)
}

// FlushTo makes everything below offset durable. When a flush that
// started after offset was written has already covered it, it returns at
// once: callers waiting on the same fsync share it.
func (l *Log) FlushTo(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.rp.Load() >= offset {
		return l.Err()
	}
	return l.flushLocked(false)
}

func (l *Log) append(batches []byte, leaderEpoch int32, now int64) (res AppendResult, flush bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return res, false, fmt.Errorf("append %s: %w", l.tp, ErrClosed)
	}
	if l.err != nil {
		return res, false, l.err
	}
	cfg := l.cfg.Load()
	infos, err := l.parseBatchesLocked(batches, cfg)
	if err != nil {
		return res, false, fmt.Errorf("append %s: %w", l.tp, err)
	}
	first := l.leo.Load()
	var count int64
	res.MaxTimestamp, res.OffsetOfMaxTimestamp = noTimestamp, -1
	for i := range infos {
		b := &infos[i]
		delta := b.lastOffset - b.baseOffset
		b.baseOffset = first + count
		b.lastOffset = b.baseOffset + delta
		count += delta + 1
		if b.maxTimestamp > res.MaxTimestamp {
			res.MaxTimestamp, res.OffsetOfMaxTimestamp = b.maxTimestamp, b.lastOffset
		}
		protocol.SetBaseOffset(batches[b.pos:], b.baseOffset)
		protocol.SetPartitionLeaderEpoch(batches[b.pos:], leaderEpoch)
	}
	res.FirstOffset, res.LastOffset = first, first+count-1
	flush, err = l.writeLocked(batches, infos, res, first, now, cfg)
	if err != nil {
		return AppendResult{}, false, err
	}
	return res, flush, nil
}

// writeLocked puts batches, which carry their final offsets (infos gives
// their positions within batches), at the end of the log: it rolls first
// if the active segment cannot take them, starting the new segment at
// rollBase; then it writes, indexes and publishes the new log end offset.
// It reports whether flush.messages or flush.ms asks for an fsync. A
// failure is sticky.
func (l *Log) writeLocked(batches []byte, infos []batchInfo, res AppendResult, rollBase, now int64, cfg *LogConfig) (flush bool, err error) {
	seg := l.active()
	txns := hasTxnBatches(infos)
	if txns {
		if err := l.ensureTxnTrackerLocked(); err != nil {
			return false, err
		}
	}
	// An empty segment is rolled too if the offsets do not fit it, which
	// a follower's batches after a gap left by compaction may not.
	if l.shouldRollLocked(seg, int64(len(batches)), res.MaxTimestamp, res.LastOffset, now, cfg) ||
		res.LastOffset-seg.base > math.MaxInt32 {
		if seg, err = l.rollAtLocked(rollBase, now, true); err != nil {
			err = fmt.Errorf("roll %s: %w", l.tp, err)
			if transientWriteErr(err) {
				return false, err // see nospace.go
			}
			l.err = err
			return false, l.err
		}
	}

	pos := seg.size.Load()
	for i := range infos {
		infos[i].pos += pos
	}
	if pos == 0 {
		seg.rollTs, seg.rollTsKnown = res.MaxTimestamp, true
	}
	seg.unsynced = true
	if _, err := seg.log.WriteAt(batches, pos); err != nil {
		return false, l.failedWriteLocked(seg, pos, err)
	}
	seg.size.Store(pos + int64(len(batches)))
	seg.mu.Lock()
	for _, b := range infos {
		seg.indexBatchLocked(b, cfg, &seg.bytesSinceIndex)
		if b.attributes&(protocol.AttrTransactional|protocol.AttrControl) != 0 {
			seg.txn.Store(txnSome)
		}
	}
	seg.mu.Unlock()
	if txns {
		// Before the batches are published, so that a reader who sees
		// an ABORT marker finds its index entry.
		if err := l.trackAppendedTxnsLocked(seg, batches, infos, pos); err != nil {
			l.err = fmt.Errorf("append %s: transaction index: %w", l.tp, err)
			return false, l.err
		}
	}
	seg.nextOffset = res.LastOffset + 1
	l.leo.Store(res.LastOffset + 1)

	flush = l.leo.Load()-l.rp.Load() >= cfg.FlushMessages ||
		now-l.lastFlushMs.Load() >= cfg.FlushMs
	return flush, nil
}

// parseBatchesLocked splits batches into headers, checking only what the
// log itself relies on: whole magic-2 batches, sane offsets, sizes that fit
// a segment. The caller has checked CRCs and record counts.
func (l *Log) parseBatchesLocked(batches []byte, cfg *LogConfig) ([]batchInfo, error) {
	if len(batches) == 0 {
		return nil, fmt.Errorf("%w: no batches", protocol.ErrCorrupt)
	}
	if len(batches) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBatchTooLarge, len(batches))
	}
	infos := l.infos[:0]
	for pos := 0; pos < len(batches); {
		h, err := protocol.ParseBatchHeader(batches[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if h.LastOffsetDelta < 0 {
			return nil, fmt.Errorf("%w: last offset delta %d", protocol.ErrCorrupt, h.LastOffsetDelta)
		}
		if int64(h.Size()) > cfg.SegmentBytes {
			return nil, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrBatchTooLarge, h.Size(), cfg.SegmentBytes)
		}
		b := infoOf(&h, int64(pos))
		b.baseOffset, b.lastOffset = 0, int64(h.LastOffsetDelta)
		infos = append(infos, b)
		pos += h.Size()
	}
	l.infos = infos
	return infos, nil
}

// shouldRollLocked is Kafka's LogSegment.shouldRoll: segment.bytes,
// segment.ms (max.compaction.lag.ms too for a compacted log) less the
// segment's jitter, a full index, or an offset too far from the base. An
// empty segment is never rolled: a new one would be no emptier.
func (l *Log) shouldRollLocked(seg *segment, appendBytes, maxTs, lastOffset, now int64, cfg *LogConfig) bool {
	size := seg.size.Load()
	if size == 0 {
		return false
	}
	var waited int64
	if first := seg.firstBatchMaxTimestamp(); first >= 0 {
		waited = maxTs - first
	} else {
		waited = now - seg.created
	}
	seg.mu.RLock()
	idxFull := len(seg.offIdx) >= cfg.maxOffsetEntries() || len(seg.timeIdx) >= cfg.maxTimeEntries()-1
	seg.mu.RUnlock()
	return size > cfg.SegmentBytes-appendBytes ||
		waited > cfg.maxSegmentMs()-seg.rollJitterMs ||
		idxFull ||
		lastOffset-seg.base > math.MaxInt32
}

// rollLocked closes the active segment to writes and starts a new one at
// the log end offset. The old segment is fsynced here, so the recovery
// point moves to the new base: recovery after a crash then never scans
// more than the active segment. (Kafka flushes it from a scheduler thread;
// doing it inline keeps the recovery point exact at the cost of one fsync
// per roll on the producer's path.)
func (l *Log) rollLocked(now int64) (*segment, error) {
	return l.rollAtLocked(l.leo.Load(), now, false)
}

// rollAtLocked rolls to a new segment whose base offset is base: the log
// end offset, or a follower's next batch past a gap (Kafka rolls at the
// appended batches' first offset). inAppend says an append rolls, for the
// roll hook.
func (l *Log) rollAtLocked(base, now int64, inAppend bool) (*segment, error) {
	old := l.active()
	old.mu.Lock()
	old.addFinalTimeEntryLocked()
	old.mu.Unlock()
	if err := old.persistIndexesLocked(); err != nil {
		return nil, err
	}
	if err := l.syncWatched(old.openFilesLocked()); err != nil {
		return nil, err
	}
	old.unsynced = false
	old.newIndexFiles = false // the directory is synced below
	seg, err := createSegment(l.fsys, l.files, l.dir, base, now)
	if err != nil {
		return nil, err
	}
	seg.rollJitterMs = l.cfg.Load().randomSegmentJitter()
	if l.entryUnsynced {
		// The recovery point moves past the old segment below.
		if err := l.syncEntry(l.topicID); err != nil {
			seg.close()
			return nil, err
		}
		l.entryUnsynced = false
	} else if err := l.fsys.SyncDir(l.dir); err != nil {
		seg.close()
		return nil, fmt.Errorf("sync %s: %w", l.dir, syncErr(err))
	}
	segs := append(append([]*segment(nil), l.segments()...), seg)
	l.segs.Store(&segs)
	storeMax(&l.rp, base)
	l.logger.Debug("rolled segment", "partition", l.tp.String(), "base_offset", base)
	if l.rollHook != nil {
		l.rollHook(RollEvent{BaseOffset: base, InAppend: inAppend})
	}
	return seg, nil
}

// Read returns whole batches starting with the batch containing offset,
// none whose base offset is >= maxOffset (the high watermark), and at most
// maxBytes of them, except that with minOneBatch a first batch larger than
// maxBytes is returned alone (Kafka's "at least one batch" rule). Like
// Kafka, a read returns batches of one segment only. offset ==
// LogEndOffset gives no data; an offset outside [LogStartOffset,
// LogEndOffset] gives ErrOffsetOutOfRange.
//
// A read that meets a segment deleted or replaced since it looked (after
// file.delete.delay.ms, or by a cleaning), or that overlapped a
// truncation, starts again on the current segments.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	return l.readRetrying(offset, maxBytes, maxOffset, minOneBatch, false)
}

// ReadSlice is Read for a caller that sends the batches to a socket.
// Where the segment's .log is an operating-system file, it returns the
// batches as a FileSlice of that file (sendfile can then send them without
// a copy through user space) and Data is nil; on any other filesystem it
// reads Data as Read does. A returned Slice must be released.
func (l *Log) ReadSlice(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	return l.readRetrying(offset, maxBytes, maxOffset, minOneBatch, true)
}

func (l *Log) readRetrying(offset int64, maxBytes int32, maxOffset int64, minOneBatch, slice bool) (ReadResult, error) {
	for attempt := 0; ; attempt++ {
		gen := l.truncations.Load()
		res, retry, err := l.read(offset, maxBytes, maxOffset, minOneBatch, slice, gen)
		// A truncation during the read may have shown it the log end
		// offset of one log and the segments of another.
		if !retry && l.truncations.Load() == gen {
			return res, err
		}
		if res.Slice != nil {
			res.Slice.Release()
			res.Slice = nil
		}
		if attempt == maxReadAttempts-1 {
			return res, fmt.Errorf("read %s at %d: segments keep changing under the read", l.tp, offset)
		}
	}
}

// maxReadAttempts bounds the retries of a read whose segments go away
// under it; each retry sees the segments of a later deletion or cleaning.
const maxReadAttempts = 8

func (l *Log) read(offset int64, maxBytes int32, maxOffset int64, minOneBatch, slice bool, gen int64) (res ReadResult, retry bool, err error) {
	leo := l.leo.Load()
	// Segments first, then the start offset: deletion raises the start
	// offset before it drops segments, so the check below sees at least
	// the start offset that goes with these segments.
	segs := l.segments()
	res = ReadResult{LogStartOffset: l.lso.Load(), LogEndOffset: leo}
	if l.closed.Load() {
		return res, false, fmt.Errorf("read %s: %w", l.tp, ErrClosed)
	}
	if offset < res.LogStartOffset || offset > leo {
		return res, false, fmt.Errorf("read %s at %d (log %d to %d): %w", l.tp, offset, res.LogStartOffset, leo, ErrOffsetOutOfRange)
	}
	limit := min(maxOffset, leo)
	if offset >= limit {
		return res, false, nil
	}
	cfg := l.cfg.Load()
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1, 0)
	for ; i < len(segs) && segs[i].base < limit; i++ {
		s := segs[i]
		if !s.acquire() {
			if l.closed.Load() {
				return res, false, fmt.Errorf("read %s: %w", l.tp, ErrClosed)
			}
			return res, true, nil
		}
		if slice && s.log.isOS() {
			pos, size, last, found, err := s.readRange(offset, maxBytes, limit, minOneBatch, gen, cfg, l.logger)
			if err == nil && size > 0 {
				// The slice pins the .log open until its Release.
				var f *os.File
				if f, err = s.log.pinOS(); err == nil {
					s.pinSendLocked()
					res.Slice = &FileSlice{l: l, seg: s, file: f, pos: pos, size: size, lastOffset: last, gen: gen}
				}
			}
			s.release()
			if err != nil {
				return res, false, fmt.Errorf("read %s at %d: %w", l.tp, offset, err)
			}
			if found {
				return res, false, nil
			}
			continue
		}
		data, found, err := s.read(offset, maxBytes, limit, minOneBatch, cfg, l.logger)
		s.release()
		if err != nil {
			return res, false, fmt.Errorf("read %s at %d: %w", l.tp, offset, err)
		}
		if found {
			res.Data = data
			return res, false, nil
		}
	}
	return res, false, nil
}

// MaxTimestamp returns the largest batch max timestamp in the log and the
// last offset of the batch holding it, as Kafka's segments track it; -1, -1
// for a log without timestamps. ListOffsets MAX_TIMESTAMP (-3) wants the
// record holding it: OffsetOfMaxTimestamp.
func (l *Log) MaxTimestamp() (timestamp int64, offset int64) {
	timestamp, offset = noTimestamp, -1
	cfg := l.cfg.Load()
	for _, s := range l.segments() {
		if err := s.ensureLoaded(cfg, l.logger); err != nil {
			l.logger.Warn("max timestamp: segment unreadable", "partition", l.tp.String(), "segment", s.base, "err", err)
			continue
		}
		s.mu.RLock()
		ts, off := s.maxTs, s.maxTsOffset
		s.mu.RUnlock()
		if ts > timestamp {
			timestamp, offset = ts, off
		}
	}
	return timestamp, offset
}

// IncrementLogStartOffset raises the log start offset (DeleteRecords, or
// retention). Offsets below it can no longer be read. It never lowers it.
func (l *Log) IncrementLogStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return fmt.Errorf("log start offset %s: %w", l.tp, ErrClosed)
	}
	if offset > l.leo.Load() {
		return fmt.Errorf("log start offset %s to %d beyond log end %d: %w", l.tp, offset, l.leo.Load(), ErrOffsetOutOfRange)
	}
	storeMax(&l.lso, offset)
	return nil
}

// FlushIfStale flushes the log when its last flush is at least flush.ms
// old and something is unflushed, as Kafka's log flusher does every
// log.flush.scheduler.interval.ms, so that records appended before a quiet
// spell do not stay unflushed past flush.ms (appends check flush.ms only
// when they come). It reports whether it flushed.
func (l *Log) FlushIfStale() (bool, error) {
	cfg := l.cfg.Load()
	if l.nowMs()-l.lastFlushMs.Load() < cfg.FlushMs || l.leo.Load() <= l.rp.Load() {
		return false, nil
	}
	return true, l.Flush()
}

// Flush fsyncs everything written so far, except the active segment's
// offset and time indexes (see flushLocked), and advances the recovery
// point to the log end offset it saw. It does not block appends while it
// syncs.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushLocked(false)
}

// flushLocked flushes with flushMu held. The active segment's .index and
// .timeindex are synced only by the final flush of Close (final), which
// the clean-shutdown marker trusts, and by a roll: after an unclean
// shutdown the active segment, holding the checkpointed recovery point or
// past it, is recovered and its indexes rebuilt from the .log
// (segment.flushFilesLocked). With flush.messages=1 and index entries
// every index.interval.bytes, most produces wrote an index entry, and a
// flush waited for three fsyncs side by side instead of one.
func (l *Log) flushLocked(final bool) error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return fmt.Errorf("flush %s: %w", l.tp, ErrClosed)
	}
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	target := l.leo.Load()
	segs := l.segments()
	type syncing struct {
		seg   *segment
		files []vfs.File
	}
	var toSync []syncing
	for i, s := range segs {
		if s.unsynced {
			if err := s.persistIndexesLocked(); err != nil {
				err = fmt.Errorf("flush %s: %w", l.tp, err)
				if !transientWriteErr(err) {
					l.err = err
				}
				// Out of space: the entries stay in memory and the
				// next flush writes them (see nospace.go).
				l.mu.Unlock()
				return err
			}
			toSync = append(toSync, syncing{s, s.flushFilesLocked(final || i < len(segs)-1)})
			s.unsynced = false
			l.dirDirty = l.dirDirty || s.newIndexFiles
			s.newIndexFiles = false
		} else if i < len(segs)-1 {
			// Rolled and synced: nothing writes its indexes again.
			if err := s.closeIndexFiles(); err != nil {
				l.logger.Warn("close index files", "partition", l.tp.String(), "segment", s.base, "err", err)
			}
		}
	}
	dirDirty := l.dirDirty
	l.dirDirty = false
	// entryUnsynced is cleared only once synced: a roll meanwhile must
	// not move the recovery point (which FlushTo trusts) before that.
	newEntry, topicID := l.entryUnsynced, l.topicID
	l.mu.Unlock()

	for _, s := range toSync {
		// A segment deleted meanwhile (file.delete.delay.ms of 0) has
		// nothing left to make durable.
		if !s.seg.acquire() {
			continue
		}
		err := l.syncWatched(s.files)
		s.seg.release()
		if err != nil {
			return l.setErr(fmt.Errorf("flush %s: %w", l.tp, err))
		}
	}
	if newEntry {
		// Syncs the directory too.
		if err := l.syncEntry(topicID); err != nil {
			return l.setErr(fmt.Errorf("flush %s: %w", l.tp, err))
		}
		l.mu.Lock()
		l.entryUnsynced = false
		l.mu.Unlock()
	} else if dirDirty {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return l.setErr(fmt.Errorf("flush %s: sync dir: %w", l.tp, syncErr(err)))
		}
	}
	storeMax(&l.rp, target)
	l.lastFlushMs.Store(l.nowMs())
	return nil
}

// MadeWith reports whether CreateLogs made this log, in this process,
// with a file of this name among its LogSpec.Files.
func (l *Log) MadeWith(name string) bool { return slices.Contains(l.entryFiles, name) }

// syncEntry makes a new log's creation durable (entryUnsynced):
// partition.metadata if the log has a topic id and the files its LogSpec
// named, the log's directory (the entries of its files) and the log dir
// (the directory's entry), in that
// order, so that a log whose records are durable is found, with its topic
// id, after a power loss. It is paid once per log, at its first flush,
// not by CreateTopics.
func (l *Log) syncEntry(topicID [16]byte) error {
	names := l.entryFiles
	if topicID != ([16]byte{}) {
		names = append([]string{partitionMetadataFile}, names...)
	}
	for _, base := range names {
		name := filepath.Join(l.dir, base)
		f, err := l.fsys.Open(name)
		if errors.Is(err, fs.ErrNotExist) && base != partitionMetadataFile {
			continue // removed by its owner: nothing of it to keep
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", name, err)
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", name, syncErr(err))
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync %s: %w", l.dir, syncErr(err))
	}
	if err := l.fsys.SyncDir(l.parent); err != nil {
		return fmt.Errorf("sync %s: %w", l.parent, syncErr(err))
	}
	return nil
}

// setErr makes err sticky and returns it.
func (l *Log) setErr(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
	return l.err
}

// Err returns the log's sticky error, if a write or fsync has failed.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Closed reports whether the log was closed (by Close or DeleteLog): an
// error from its files after that says nothing about the disk.
func (l *Log) Closed() bool { return l.closed.Load() }

// Close flushes the log, records the active segment's largest timestamp
// in its time index as Kafka does, and closes the files. After a failed
// write it closes without flushing and returns the sticky error.
func (l *Log) Close() error {
	return l.close(true)
}

func (l *Log) close(flush bool) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var errs []error
	if flush {
		l.mu.Lock()
		// A log created and never written to holds nothing to keep:
		// its creation stays unsynced, and if a power loss takes it
		// the broker makes it again from the metadata. (Syncing it cost
		// a clean shutdown 3 fsyncs per new partition.)
		flush = !l.entryUnsynced || l.leo.Load() != 0
		if flush {
			seg := l.active()
			seg.mu.Lock()
			seg.addFinalTimeEntryLocked()
			seg.mu.Unlock()
			seg.unsynced = true // the final entry must reach the file
		}
		l.mu.Unlock()
	}
	if flush {
		if err := l.flushLocked(true); err != nil {
			errs = append(errs, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed.Store(true)
	for _, s := range l.segments() {
		if err := s.closeForGood(); err != nil {
			errs = append(errs, fmt.Errorf("close %s segment %d: %w", l.tp, s.base, err))
		}
	}
	return errors.Join(errs...)
}

// nowMsFunc adapts a clock to milliseconds.
func nowMsFunc(now func() time.Time) func() int64 {
	return func() int64 { return now().UnixMilli() }
}

// partitionLogger is logger with a partition attribute on every record.
// slog's With would preformat the attribute into a copy of the handler's
// state, about 300 bytes per partition held for the log's lifetime (3 MB
// for 10,000 idle partitions); this adds it when a record is logged,
// which for a log is rare.
func partitionLogger(logger *slog.Logger, tp TopicPartition) *slog.Logger {
	return slog.New(&partitionHandler{inner: logger.Handler(), tp: tp})
}

// partitionHandler adds the partition to each record it passes on.
type partitionHandler struct {
	inner slog.Handler
	tp    TopicPartition
}

func (h *partitionHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *partitionHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.String("partition", h.tp.String()))
	return h.inner.Handle(ctx, r)
}

// WithAttrs and WithGroup, rare for a log's logger, fix the partition
// attribute in the derived handler first, where With would have put it.
func (h *partitionHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.fixed().WithAttrs(attrs)
}

func (h *partitionHandler) WithGroup(name string) slog.Handler {
	return h.fixed().WithGroup(name)
}

func (h *partitionHandler) fixed() slog.Handler {
	return h.inner.WithAttrs([]slog.Attr{slog.String("partition", h.tp.String())})
}
