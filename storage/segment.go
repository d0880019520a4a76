package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/vfs"
)

// File name suffixes of a segment, as Kafka's LogFileUtils.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// Suffixes a segment's file names take on during deletion and cleaning,
// after the .log, .index or .timeindex (Kafka's LogFileUtils): a deleted
// segment waits as .deleted for file.delete.delay.ms; the cleaner writes
// .cleaned files and renames them .swap before it swaps them in.
const (
	deletedFileSuffix = ".deleted"
	cleanedFileSuffix = ".cleaned"
	swapFileSuffix    = ".swap"
)

// segmentExts are a segment's files, in the order Kafka renames them.
var segmentExts = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

// Whether a segment holds transactional or control batches, which the
// cleaner must scan for; unknown until a scan or an append tells.
const (
	txnUnknown int32 = iota
	txnNone
	txnSome
)

// segmentName is the 20-digit zero-padded base offset Kafka names segment
// files by.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentName(base)+suffix)
}

// segment is one .log file and its two indexes, whose files exist once
// they have an entry (createSegmentFiles).
//
// Readers find batches through the in-memory copies of the indexes and read
// the .log with ReadAt, never past size. The log's single writer appends
// under Log.mu; it publishes a batch by storing size after the bytes are
// written, and adds index entries under mu.
type segment struct {
	fsys vfs.FS
	dir  string
	base int64
	log  *logFile     // opened on use, closed when idle (logfile.go)
	size atomic.Int64 // bytes of whole batches; readers never look past it

	// fileSuffix follows the file names: "" for a live segment, or
	// .cleaned, .swap, .deleted. It changes with both Log.mu and mu held,
	// so either lock is enough to read it.
	fileSuffix string

	// gone is set, under fileMu, when the files are closed for good (the
	// segment was deleted or the log closed). Readers hold fileMu for
	// reading while they use the .log, so a delayed deletion never closes
	// a file under a read in flight.
	fileMu sync.RWMutex
	gone   bool

	// sends counts the FileSlices of this segment not yet released: their
	// bytes are read after the read that found them returned. A segment
	// closed for good while some are out keeps its .log open for them,
	// and the last Release closes it; logClosed makes the close happen
	// once.
	sends     atomic.Int32
	logClosed atomic.Bool
	// hint is the batch the next fetch most likely starts at
	// (readRange), nil until a read finds one.
	hint atomic.Pointer[batchHint]

	txn          atomic.Int32 // txnUnknown, txnNone or txnSome
	rollJitterMs int64        // subtracted from segment.ms for this segment

	mu          sync.RWMutex
	loaded      bool // the indexes below are in memory
	offIdx      []offsetEntry
	timeIdx     []timeEntry
	maxTs       int64 // largest batch max timestamp in the segment
	maxTsOffset int64 // last offset of the batch that has it

	// Writer state, touched only under Log.mu.
	idxFile, timeFile vfs.File // open from the first write of entries until the segment is rolled and flushed
	offPersisted      int      // .index entries already written to the file
	timePersisted     int      // .timeindex entries already written to the file
	nextOffset        int64    // offset the next batch in this segment gets
	bytesSinceIndex   int64    // bytes appended since the last .index entry
	rollTs            int64    // max timestamp of the first append, for segment.ms
	rollTsKnown       bool
	created           int64 // ms; for segment.ms when batches carry no timestamp
	unsynced          bool  // written since the last fsync
	// Index files written or trimmed since a flush last fsynced them
	// (flushFilesLocked): an fsync of a file with nothing new still costs
	// the disk a cache flush, and with flush.messages=1 most flushes add
	// no index entry.
	idxDirty, timeDirty, txnDirty bool
	// The index files were made since the directory was last synced
	// (openIndexFiles): the flush that syncs their first entries syncs
	// the directory too, so that a power loss keeps them.
	newIndexFiles bool

	// The transaction index (txnindex.go): txnIdx and txnLoaded are
	// guarded by mu, loaded on first use; txnFile and txnPersisted are
	// writer state, as idxFile and offPersisted.
	txnIdx       []AbortedTxn
	txnLoaded    bool
	txnFile      vfs.File
	txnPersisted int
}

// createSegment creates the .log of a new segment. The caller syncs the
// directory.
func createSegment(fsys vfs.FS, files *fdCache, dir string, base, now int64) (*segment, error) {
	return createSegmentFiles(fsys, files, dir, base, now, "")
}

// createSegmentFiles creates a segment whose file names end in suffix
// (the cleaner's .cleaned files).
//
// Only the .log is made. The .index and .timeindex come with their first
// entry (openIndexFiles), as Kafka's LazyIndex makes them on first use:
// most segments of a broker with many partitions never get one, and
// creating an inode cost a new partition more than anything else it did.
// A segment without them has no entries, which loading rebuilds from the
// .log if it finds the files missing (ensureLoaded). The .log is created
// but not held open: an idle partition costs no file descriptor; it opens
// on its first read or write (logFile).
func createSegmentFiles(fsys vfs.FS, files *fdCache, dir string, base, now int64, suffix string) (*segment, error) {
	s := &segment{fsys: fsys, dir: dir, base: base, loaded: true, txnLoaded: true, nextOffset: base, fileSuffix: suffix,
		maxTs: noTimestamp, maxTsOffset: base, created: now, rollTs: noTimestamp, rollTsKnown: true}
	s.txn.Store(txnNone)
	f, err := fsys.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		// Out of space, the roll is tried again later; leave no
		// half-made segment for a restart to load meanwhile.
		fsys.Remove(s.path(logSuffix))
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	s.log = newLogFile(fsys, files, s.path(logSuffix))
	return s, nil
}

// path names one of the segment's files as it is called now.
func (s *segment) path(ext string) string { return segmentPath(s.dir, s.base, ext) + s.fileSuffix }

// changeSuffix renames the segment's files from their current suffix to
// suffix, .log first as Kafka's changeFileSuffixes. Index files that do
// not exist (never written) are skipped. The caller holds Log.mu (or owns
// a segment no log has yet) and syncs the directory. mu is held
// throughout so that a concurrent index load or rebuild never sees half
// the files renamed and writes an index under a name another segment is
// about to take.
func (s *segment) changeSuffix(suffix string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ext := range segmentExts {
		from := s.path(ext)
		to := segmentPath(s.dir, s.base, ext) + suffix
		rename := s.fsys.Rename
		if ext == logSuffix {
			// The .log may be closed and reopened by name meanwhile.
			rename = func(_, to string) error { return s.log.rename(to) }
		}
		if err := rename(from, to); err != nil {
			if ext != logSuffix && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fmt.Errorf("rename %s: %w", from, err)
		}
	}
	s.fileSuffix = suffix
	return nil
}

// acquire pins the segment's .log for a read; false if it is closed for
// good. A true return must be paired with release.
func (s *segment) acquire() bool {
	s.fileMu.RLock()
	if s.gone {
		s.fileMu.RUnlock()
		return false
	}
	return true
}

func (s *segment) release() { s.fileMu.RUnlock() }

// closeForGood waits for reads in flight and closes the files; later reads
// see the segment gone.
func (s *segment) closeForGood() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if s.gone {
		return nil
	}
	s.gone = true
	if s.sends.Load() > 0 {
		return s.closeIndexFiles()
	}
	return s.close()
}

// pinSendLocked keeps the .log open for a FileSlice until unpinSend. The
// caller holds the segment acquired.
func (s *segment) pinSendLocked() { s.sends.Add(1) }

// unpinSend releases a FileSlice's pin; the last one out of a segment
// closed for good closes its .log. (A failed close of a file only read
// from loses nothing, so its error is dropped.)
func (s *segment) unpinSend() {
	if s.sends.Add(-1) > 0 {
		return
	}
	s.fileMu.RLock()
	gone := s.gone
	s.fileMu.RUnlock()
	if gone {
		s.closeLog()
	}
}

// openSegment loads an existing segment without opening its .log, which
// opens on first use; its indexes load on first use too.
func openSegment(fsys vfs.FS, files *fdCache, dir string, base, now int64) (*segment, error) {
	name := segmentPath(dir, base, logSuffix)
	st, err := fsys.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	s := &segment{fsys: fsys, dir: dir, base: base, log: newLogFile(fsys, files, name), maxTs: noTimestamp, maxTsOffset: base, created: now}
	s.size.Store(st.Size())
	return s, nil
}

// ensureLoaded reads the segment's indexes into memory, rebuilding them
// from the .log if they are missing or do not agree with it.
func (s *segment) ensureLoaded(cfg *LogConfig, logger *slog.Logger) error {
	s.mu.RLock()
	loaded := s.loaded
	s.mu.RUnlock()
	if loaded {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return nil
	}
	err := s.loadIndexesLocked()
	if err == nil {
		s.loaded = true
		return nil
	}
	created, rerr := s.rebuildIndexesLocked(cfg)
	switch {
	case !errors.Is(err, errNoIndexFiles):
		logger.Warn("rebuilt segment indexes", "segment", s.path(logSuffix), "reason", err)
	case created:
		// Both files were missing, yet the .log has entries for them:
		// they were lost, not never made.
		logger.Warn("rebuilt missing segment index files", "segment", s.path(logSuffix))
	}
	if rerr != nil {
		return rerr
	}
	s.loaded = true
	return nil
}

// errNoIndexFiles says a segment has neither index file, as a segment
// whose indexes never got an entry (createSegmentFiles).
var errNoIndexFiles = errors.New("no index files")

// loadIndexesLocked reads both index files and checks them. A segment has
// both or neither; with neither it returns errNoIndexFiles, and the caller
// rebuilds the entries from the .log, which is short if they were never
// made: an .index entry comes after index.interval.bytes of batches.
func (s *segment) loadIndexesLocked() error {
	size := s.size.Load()
	b, err := vfs.ReadFile(s.fsys, s.path(indexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		if _, terr := s.fsys.Stat(s.path(timeIndexSuffix)); errors.Is(terr, fs.ErrNotExist) {
			return errNoIndexFiles
		}
	}
	if err != nil {
		return err
	}
	offIdx, err := decodeOffsetIndex(b, size)
	if err != nil {
		return err
	}
	b, err = vfs.ReadFile(s.fsys, s.path(timeIndexSuffix))
	if err != nil {
		return err
	}
	timeIdx, err := decodeTimeIndex(b)
	if err != nil {
		return err
	}
	if len(timeIdx) > 0 && size == 0 {
		return fmt.Errorf("%w: time index entries for an empty log", errBadIndex)
	}
	s.offIdx, s.timeIdx = offIdx, timeIdx
	s.offPersisted, s.timePersisted = len(offIdx), len(timeIdx)
	s.maxTs, s.maxTsOffset = lastTimeEntry(timeIdx, s.base)
	return nil
}

// rebuildIndexesLocked walks the batch headers of the whole segment and
// rewrites the index files, reporting whether it created one. It stops at
// the first batch it cannot parse; a segment below the recovery point is
// not truncated for that, but reads past it will fail.
func (s *segment) rebuildIndexesLocked(cfg *LogConfig) (bool, error) {
	s.offIdx, s.timeIdx = nil, nil
	s.maxTs, s.maxTsOffset = noTimestamp, s.base
	var bytesSince int64
	sc := newHeaderScanner(s.log, 0, s.size.Load())
	defer sc.release()
	for {
		b, err := sc.next() // io.EOF or damage: index what came before
		if err != nil {
			break
		}
		s.indexBatchLocked(b, cfg, &bytesSince)
	}
	s.addFinalTimeEntryLocked()
	created, err := s.rewriteIndexFilesLocked()
	if err != nil {
		if IsExhausted(err) {
			s.deferIndexFilesLocked()
			return false, nil
		}
		return false, err
	}
	if !created {
		return false, nil
	}
	return true, s.fsys.SyncDir(s.dir)
}

// indexBatchLocked updates the in-memory indexes for a batch just appended
// or recovered, exactly as Kafka's LogSegment.append: the entry for a batch
// is written when more than index.interval.bytes went by before it, maps
// the batch's last offset to its start, and is paired with a time index
// entry for the largest timestamp so far.
func (s *segment) indexBatchLocked(b batchInfo, cfg *LogConfig, bytesSince *int64) {
	if b.maxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = b.maxTimestamp, b.lastOffset
	}
	if *bytesSince > int64(cfg.IndexIntervalBytes) {
		if len(s.offIdx) < cfg.maxOffsetEntries() {
			s.offIdx = append(s.offIdx, offsetEntry{rel: int32(b.lastOffset - s.base), pos: int32(b.pos)})
		}
		if len(s.timeIdx) < cfg.maxTimeEntries()-1 {
			s.maybeAppendTimeLocked(s.maxTs, s.maxTsOffset)
		}
		*bytesSince = 0
	}
	*bytesSince += b.size
}

// maybeAppendTimeLocked adds a time index entry if ts is larger than the
// last one, as TimeIndex.maybeAppend.
func (s *segment) maybeAppendTimeLocked(ts, offset int64) {
	lastTs, lastOff := lastTimeEntry(s.timeIdx, s.base)
	if ts > lastTs && offset >= lastOff {
		s.timeIdx = append(s.timeIdx, timeEntry{ts: ts, rel: int32(offset - s.base)})
	}
}

// addFinalTimeEntryLocked records the segment's largest timestamp, as Kafka
// does when a segment is rolled, closed or recovered, so that the last time
// index entry of an inactive segment is its maximum.
func (s *segment) addFinalTimeEntryLocked() {
	if s.maxTs != noTimestamp {
		s.maybeAppendTimeLocked(s.maxTs, s.maxTsOffset)
	}
}

// rewriteIndexFilesLocked replaces both index files with the in-memory
// entries and syncs them, reporting whether it created a file. A segment
// without entries gets no files (createSegmentFiles); files it has are
// emptied. A segment waiting for deletion keeps its entries in memory
// only: its files are about to go.
func (s *segment) rewriteIndexFilesLocked() (created bool, err error) {
	if s.fileSuffix == deletedFileSuffix {
		s.offPersisted, s.timePersisted = len(s.offIdx), len(s.timeIdx)
		return false, nil
	}
	flags := os.O_WRONLY | os.O_TRUNC
	if len(s.offIdx) > 0 || len(s.timeIdx) > 0 {
		flags |= os.O_CREATE
	}
	for _, x := range []struct {
		suffix string
		data   []byte
	}{
		{indexSuffix, appendOffsetEntries(nil, s.offIdx)},
		{timeIndexSuffix, appendTimeEntries(nil, s.timeIdx)},
	} {
		name := s.path(x.suffix)
		existed := true
		if flags&os.O_CREATE != 0 {
			_, serr := s.fsys.Stat(name)
			existed = serr == nil
		}
		f, err := s.fsys.OpenFile(name, flags, 0o644)
		if errors.Is(err, fs.ErrNotExist) && flags&os.O_CREATE == 0 {
			continue // no entries and no file: nothing to write
		}
		if err != nil {
			return created, fmt.Errorf("rewrite %s: %w", name, err)
		}
		created = created || !existed
		_, err = f.Write(x.data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return created, fmt.Errorf("rewrite %s: %w", name, err)
		}
	}
	s.offPersisted, s.timePersisted = len(s.offIdx), len(s.timeIdx)
	return created, nil
}

// persistIndexesLocked writes index entries added since the last call to
// the index files. Entries live in memory first: a crash loses only what
// recovery rebuilds anyway, and the hot path makes no index syscalls.
func (s *segment) persistIndexesLocked() error {
	if err := s.persistTxnIndexLocked(); err != nil {
		return err
	}
	s.mu.RLock()
	offNew := s.offIdx[s.offPersisted:]
	timeNew := s.timeIdx[s.timePersisted:]
	s.mu.RUnlock()
	if len(offNew) == 0 && len(timeNew) == 0 {
		return nil
	}
	if err := s.openIndexFiles(true); err != nil {
		return err
	}
	if len(offNew) > 0 {
		s.idxDirty = true
		if _, err := s.idxFile.WriteAt(appendOffsetEntries(nil, offNew), int64(s.offPersisted)*offsetEntrySize); err != nil {
			return fmt.Errorf("write %s: %w", s.idxFile.Name(), err)
		}
		s.offPersisted += len(offNew)
	}
	if len(timeNew) > 0 {
		s.timeDirty = true
		if _, err := s.timeFile.WriteAt(appendTimeEntries(nil, timeNew), int64(s.timePersisted)*timeEntrySize); err != nil {
			return fmt.Errorf("write %s: %w", s.timeFile.Name(), err)
		}
		s.timePersisted += len(timeNew)
	}
	return nil
}

// openIndexFiles opens the index files for writing if they are not open,
// creating them if create is set: a segment has both or neither
// (loadIndexesLocked). Without create a missing file stays unopened, for a
// truncation that only trims what exists. They are trimmed to the
// persisted entries, dropping any padding a Kafka broker preallocated.
func (s *segment) openIndexFiles(create bool) error {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	open := func(suffix string, entries, size int) (vfs.File, error) {
		name := s.path(suffix)
		f, err := s.fsys.OpenFile(name, flags, 0o644)
		if !create && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		if err := f.Truncate(int64(entries * size)); err != nil {
			f.Close()
			return nil, fmt.Errorf("trim %s: %w", name, err)
		}
		return f, nil
	}
	if create && s.idxFile == nil && s.offPersisted == 0 && s.timePersisted == 0 {
		s.newIndexFiles = true // or empty ones that existed: syncing the directory again is harmless
	}
	var err error
	if s.idxFile == nil {
		if s.idxFile, err = open(indexSuffix, s.offPersisted, offsetEntrySize); err != nil {
			return err
		}
		s.idxDirty = s.idxFile != nil
	}
	if s.timeFile == nil {
		if s.timeFile, err = open(timeIndexSuffix, s.timePersisted, timeEntrySize); err != nil {
			return err
		}
		s.timeDirty = s.timeFile != nil
	}
	return nil
}

// openFilesLocked lists the segment's open files, for a caller that syncs
// them after it lets go of Log.mu: a roll may open index files meanwhile.
// The caller holds Log.mu.
func (s *segment) openFilesLocked() []vfs.File {
	var out []vfs.File
	for _, f := range []vfs.File{s.log, s.idxFile, s.timeFile, s.txnFile} {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}

// flushFilesLocked lists the files a flush of the segment fsyncs: the
// .log, and each open index file written or trimmed since a flush last
// listed it, which it then counts as synced (a failed fsync makes the
// log's error sticky, so nothing is acknowledged over it). A roll syncs
// every open file (openFilesLocked), since it moves the recovery point
// without waiting for a flush in progress. The caller holds Log.mu and
// Log.flushMu.
//
// Without offsetIndexes the .index and .timeindex are left out and stay
// dirty, for the roll or the closing flush that syncs them: a flush of the
// active segment does so (Log.flushLocked), since after an unclean
// shutdown the segment holding the checkpointed recovery point, and every
// later one, is recovered and its indexes rebuilt from the .log (loadLog,
// as Kafka's LogLoader.recoverLog), so their fsync protects nothing
// before the segment is rolled.
func (s *segment) flushFilesLocked(offsetIndexes bool) []vfs.File {
	var out []vfs.File
	if s.log != nil {
		out = append(out, s.log)
	}
	for _, f := range []struct {
		file  vfs.File
		dirty *bool
		index bool
	}{{s.idxFile, &s.idxDirty, true}, {s.timeFile, &s.timeDirty, true}, {s.txnFile, &s.txnDirty, false}} {
		if f.index && !offsetIndexes {
			continue
		}
		if f.file != nil && *f.dirty {
			out = append(out, f.file)
			*f.dirty = false
		}
	}
	return out
}

// closeIndexFiles closes the index files once nothing will write them.
func (s *segment) closeIndexFiles() error {
	var errs []error
	for _, f := range []*vfs.File{&s.idxFile, &s.timeFile, &s.txnFile} {
		if *f != nil {
			if err := (*f).Close(); err != nil {
				errs = append(errs, err)
			}
			*f = nil
		}
	}
	return errors.Join(errs...)
}

// close closes all of the segment's files.
func (s *segment) close() error {
	return errors.Join(s.closeIndexFiles(), s.closeLog())
}

// closeLog closes the .log, once.
func (s *segment) closeLog() error {
	if s.log == nil || !s.logClosed.CompareAndSwap(false, true) {
		return nil
	}
	if err := s.log.Close(); err != nil && !errors.Is(err, fs.ErrClosed) {
		return err
	}
	return nil
}

// remove deletes the segment's files; the caller syncs the directory.
func (s *segment) remove() error {
	var errs []error
	for _, ext := range segmentExts {
		if err := s.fsys.Remove(s.path(ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readFull reads exactly len(p) bytes at off.
func (s *segment) readFull(p []byte, off int64) error {
	n, err := s.log.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %s at %d: %w", s.log.Name(), off, err)
}

// translate finds the first batch whose last offset is >= offset: the
// .index gives a position at or before it, then a short scan of headers.
func (s *segment) translate(offset int64, cfg *LogConfig, logger *slog.Logger) (batchInfo, bool, error) {
	if err := s.ensureLoaded(cfg, logger); err != nil {
		return batchInfo{}, false, err
	}
	s.mu.RLock()
	pos := offsetLookup(s.offIdx, s.base, offset)
	s.mu.RUnlock()
	sc := newHeaderScanner(s.log, pos, s.size.Load())
	defer sc.release()
	for {
		b, err := sc.next()
		if err == io.EOF {
			return batchInfo{}, false, nil
		}
		if err != nil {
			return batchInfo{}, false, fmt.Errorf("segment %d: %w", s.base, err)
		}
		if b.lastOffset >= offset {
			return b, true, nil
		}
	}
}

// read returns whole batches starting with the one that holds offset, none
// with a base offset >= limit, at most maxBytes of them unless minOne lets
// a larger first batch through alone. found is false when offset lies past
// this segment's batches.
func (s *segment) read(offset int64, maxBytes int32, limit int64, minOne bool, cfg *LogConfig, logger *slog.Logger) (data []byte, found bool, err error) {
	first, ok, err := s.translate(offset, cfg, logger)
	if err != nil || !ok {
		return nil, false, err
	}
	if first.baseOffset >= limit {
		return nil, true, nil
	}
	budget := int64(max(maxBytes, 0))
	if first.size > budget {
		if !minOne {
			return nil, true, nil
		}
		buf := make([]byte, first.size)
		if err := s.readFull(buf, first.pos); err != nil {
			return nil, true, err
		}
		return buf, true, nil
	}
	buf := make([]byte, min(budget, s.size.Load()-first.pos))
	if err := s.readFull(buf, first.pos); err != nil {
		return nil, true, err
	}
	n := int64(0)
	for n < int64(len(buf)) {
		b, err := decodeBatchPrefix(buf[n:], first.pos+n)
		if err != nil || b.baseOffset >= limit || n+b.size > int64(len(buf)) {
			break
		}
		n += b.size
	}
	return buf[:n], true, nil
}

// firstBatchMaxTimestamp returns the max timestamp of the segment's first
// batch, which segment.ms measures from (Kafka's rollingBasedTimestamp).
func (s *segment) firstBatchMaxTimestamp() int64 {
	if !s.rollTsKnown {
		s.rollTs, s.rollTsKnown = noTimestamp, true
		sc := newHeaderScanner(s.log, 0, s.size.Load())
		defer sc.release()
		if b, err := sc.next(); err == nil {
			s.rollTs = b.maxTimestamp
		}
	}
	return s.rollTs
}
