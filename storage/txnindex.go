package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// The transaction index (<base offset>.txnindex), Kafka's TransactionIndex:
// for one segment, the aborted transactions whose ABORT marker lies in the
// segment, in the order of their markers. Each entry is Kafka's AbortedTxn,
// 34 bytes, big-endian:
//
//	version            int16 (0)
//	producer_id        int64
//	first_offset       int64 the transaction's first offset in the partition
//	last_offset        int64 the offset of its ABORT marker
//	last_stable_offset int64 the last stable offset once it ended: the
//	                         first offset of the earliest transaction of
//	                         another producer still open, else last_offset+1
//
// The file exists only once a segment has an entry, as in Kafka. A
// read_committed fetch gets the aborted transactions overlapping what it
// returns from these files (CollectAbortedTxns) instead of from a scan of
// the log.
//
// The log keeps them itself, on every path that adds batches: each Append
// and AppendAsFollower follows the producers' ongoing transactions (the
// first offset of each, Kafka's ProducerStateManager.ongoingTxns) and adds
// an entry when an ABORT marker ends one; recovery rebuilds the index of
// every segment it re-reads; truncation cuts it; deletion and cleaning
// carry it with the segment. The ongoing transactions at some offset come
// from the newest producer-state snapshot (<offset>.snapshot, written by
// the broker) at or below it plus a scan of the batches after it, or from
// a scan of the whole log without one.
const (
	txnIndexSuffix    = ".txnindex"
	abortedTxnSize    = 34
	abortedTxnVersion = 0

	// producerSnapshotSuffix names the broker's producer-state snapshots,
	// which storage reads (through ManagerConfig.ProducerSnapshotTxns) and
	// deletes with their segments, but never writes.
	producerSnapshotSuffix = ".snapshot"
)

// AbortedTxn is one entry of a transaction index: an aborted transaction
// of a producer, from its first offset to its ABORT marker, and the last
// stable offset once it ended.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// errBadTxnIndex says a .txnindex file does not hold valid entries.
var errBadTxnIndex = errors.New("corrupt transaction index")

// appendAbortedTxns encodes entries in the .txnindex format.
func appendAbortedTxns(dst []byte, txns []AbortedTxn) []byte {
	for _, t := range txns {
		dst = binary.BigEndian.AppendUint16(dst, abortedTxnVersion)
		dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
	}
	return dst
}

// decodeTxnIndex parses a .txnindex file of the segment at base. A partial
// entry at the end (a write torn by a crash) is ignored, as Kafka's reader
// ignores it; a newer version, an entry whose marker lies below the
// segment (Kafka's sanityCheck) or markers out of order are errors.
func decodeTxnIndex(b []byte, base int64) ([]AbortedTxn, error) {
	n := len(b) / abortedTxnSize
	out := make([]AbortedTxn, 0, n)
	for i := 0; i < n; i++ {
		e := b[i*abortedTxnSize:]
		if v := int16(binary.BigEndian.Uint16(e)); v != abortedTxnVersion {
			return nil, fmt.Errorf("%w: entry %d has version %d", errBadTxnIndex, i, v)
		}
		t := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if t.LastOffset < base || t.FirstOffset > t.LastOffset {
			return nil, fmt.Errorf("%w: entry %d (offsets %d to %d) in the segment at %d", errBadTxnIndex, i, t.FirstOffset, t.LastOffset, base)
		}
		if len(out) > 0 && t.LastOffset <= out[len(out)-1].LastOffset {
			return nil, fmt.Errorf("%w: entry %d ends at %d, not after %d", errBadTxnIndex, i, t.LastOffset, out[len(out)-1].LastOffset)
		}
		out = append(out, t)
	}
	return out, nil
}

// ensureTxnLoaded reads the segment's .txnindex into memory on first use;
// a missing file is an empty index.
func (s *segment) ensureTxnLoaded() error {
	s.mu.RLock()
	loaded := s.txnLoaded
	s.mu.RUnlock()
	if loaded {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadTxnLocked()
}

func (s *segment) loadTxnLocked() error {
	if s.txnLoaded {
		return nil
	}
	b, err := vfs.ReadFile(s.fsys, s.path(txnIndexSuffix))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", s.path(txnIndexSuffix), err)
	}
	entries, err := decodeTxnIndex(b, s.base)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path(txnIndexSuffix), err)
	}
	s.txnIdx, s.txnPersisted, s.txnLoaded = entries, len(entries), true
	return nil
}

// txnEntries returns the segment's aborted transactions. The slice is
// never written again in place: truncation replaces it.
func (s *segment) txnEntries() ([]AbortedTxn, error) {
	if err := s.ensureTxnLoaded(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.txnIdx, nil
}

// appendTxnLocked adds an entry in memory; persistTxnIndexLocked writes it
// at the next flush or roll, as the other indexes. The caller holds
// Log.mu.
func (s *segment) appendTxnLocked(t AbortedTxn) error {
	if err := s.ensureTxnLoaded(); err != nil {
		return err
	}
	s.mu.Lock()
	s.txnIdx = append(s.txnIdx, t)
	s.mu.Unlock()
	return nil
}

// persistTxnIndexLocked writes the entries added since the last call to
// the .txnindex, creating it with the first entry. The caller holds
// Log.mu.
func (s *segment) persistTxnIndexLocked() error {
	s.mu.RLock()
	var fresh []AbortedTxn
	if s.txnLoaded {
		fresh = s.txnIdx[s.txnPersisted:]
	}
	s.mu.RUnlock()
	if len(fresh) == 0 {
		return nil
	}
	if err := s.openTxnFile(); err != nil {
		return err
	}
	s.txnDirty = true
	if _, err := s.txnFile.WriteAt(appendAbortedTxns(nil, fresh), int64(s.txnPersisted)*abortedTxnSize); err != nil {
		return fmt.Errorf("write %s: %w", s.txnFile.Name(), err)
	}
	s.txnPersisted += len(fresh)
	return nil
}

// openTxnFile opens the .txnindex for writing if it is not open, trimmed
// to the entries persisted (dropping a torn entry).
func (s *segment) openTxnFile() error {
	if s.txnFile != nil {
		return nil
	}
	s.txnDirty = true
	name := s.path(txnIndexSuffix)
	f, err := s.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	if err := f.Truncate(int64(s.txnPersisted) * abortedTxnSize); err != nil {
		f.Close()
		return fmt.Errorf("trim %s: %w", name, err)
	}
	s.txnFile = f
	return nil
}

// replaceTxnIndexLocked makes entries the segment's whole index and
// rewrites the file durably (removing it when there are none), as
// recovery and the cleaner do. The caller holds mu, and Log.mu or owns a
// segment no log has yet. The caller syncs the directory.
func (s *segment) replaceTxnIndexLocked(entries []AbortedTxn) error {
	if s.txnFile != nil {
		if err := s.txnFile.Close(); err != nil {
			return fmt.Errorf("close %s: %w", s.txnFile.Name(), err)
		}
		s.txnFile = nil
	}
	s.txnIdx, s.txnPersisted, s.txnLoaded = entries, len(entries), true
	if s.fileSuffix == deletedFileSuffix {
		return nil // its files are about to go
	}
	name := s.path(txnIndexSuffix)
	if len(entries) == 0 {
		if err := s.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		return nil
	}
	f, err := s.fsys.Create(name)
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	_, err = f.Write(appendAbortedTxns(nil, entries))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	return nil
}

// truncateTxnIndexLocked drops the entries whose marker is at or above
// offset (Kafka's TransactionIndex.truncateTo) and trims the file durably.
// The caller holds Log.mu.
func (s *segment) truncateTxnIndexLocked(offset int64) error {
	if err := s.ensureTxnLoaded(); err != nil {
		return err
	}
	s.mu.Lock()
	keep := sort.Search(len(s.txnIdx), func(i int) bool { return s.txnIdx[i].LastOffset >= offset })
	if keep == len(s.txnIdx) {
		s.mu.Unlock()
		return nil
	}
	s.txnIdx = slices.Clone(s.txnIdx[:keep])
	trim := keep < s.txnPersisted
	s.txnPersisted = min(s.txnPersisted, keep)
	s.mu.Unlock()
	if !trim {
		return nil
	}
	if s.txnFile != nil {
		if err := s.txnFile.Close(); err != nil {
			return fmt.Errorf("close %s: %w", s.txnFile.Name(), err)
		}
		s.txnFile = nil
	}
	if err := s.openTxnFile(); err != nil {
		return err
	}
	if err := s.txnFile.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.txnFile.Name(), err)
	}
	return nil
}

// CollectAbortedTxns returns the aborted transactions that overlap the
// offsets [from, upper): those whose marker is at or after from and whose
// first offset is below upper, which a read_committed fetch of those
// offsets returns so that the consumer drops their records (Kafka's
// collectAbortedTransactions). It reads the transaction indexes from the
// segment holding from onwards and stops at the first entry whose last
// stable offset reaches upper: every transaction aborted after it began
// at or after that offset.
func (l *Log) CollectAbortedTxns(from, upper int64) ([]AbortedTxn, error) {
	if from >= upper {
		return nil, nil
	}
	segs := l.segments()
	var out []AbortedTxn
	for i := floorSegment(segs, from); i < len(segs); i++ {
		s := segs[i]
		if !s.acquire() {
			// Deleted since the fetch read it: the fetch starts over.
			return nil, fmt.Errorf("aborted transactions of %s from %d: segment %d deleted meanwhile: %w", l.tp, from, s.base, ErrOffsetOutOfRange)
		}
		entries, err := s.txnEntries()
		s.release()
		if errors.Is(err, errBadTxnIndex) {
			// Rebuilt under the writer's lock, which comes before the
			// segment's file lock.
			entries, err = l.rebuildTxnIndex(s, err)
		}
		if err != nil {
			return nil, fmt.Errorf("aborted transactions of %s from %d: %w", l.tp, from, err)
		}
		for _, t := range entries {
			if t.LastOffset >= from && t.FirstOffset < upper {
				out = append(out, t)
			}
			if t.LastStableOffset >= upper {
				return out, nil
			}
		}
	}
	return out, nil
}

// rebuildTxnIndex rebuilds a segment's corrupt transaction index from the
// log, as Kafka recovers a segment whose index fails its sanity check.
func (l *Log) rebuildTxnIndex(s *segment, reason error) ([]AbortedTxn, error) {
	// flushMu too: a flush syncs the segment's files outside mu.
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, fmt.Errorf("rebuild transaction index of %s: %w", l.tp, ErrClosed)
	}
	l.logger.Warn("rebuilding transaction index", "segment", s.base, "reason", reason)
	segs := l.segments()
	i := slices.Index(segs, s)
	if i < 0 {
		return nil, fmt.Errorf("segment %d left the log: %w", s.base, ErrOffsetOutOfRange)
	}
	open, err := l.openTxnsAt(segs, s.base)
	if err != nil {
		return nil, err
	}
	end := l.leo.Load()
	if i+1 < len(segs) {
		end = segs[i+1].base
	}
	var entries []AbortedTxn
	err = l.scanTxnBatches(segs[i:i+1], s.base, end, func(h *protocol.BatchHeader, typ int16) {
		if t, ok := trackTxnBatch(open, h, typ); ok {
			entries = append(entries, t)
		}
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	err = s.replaceTxnIndexLocked(entries)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	l.dirDirty = true
	return entries, nil
}

// trackTxnBatch follows the ongoing transactions (producer id -> first
// offset) through one batch, as Kafka's ProducerAppendInfo does on
// replication: a transactional data batch starts its producer's
// transaction if none is open; a COMMIT or ABORT marker (typ, -1 for a
// batch that is not a marker) ends it. For an ABORT that ended an open
// transaction it returns the index entry, whose last stable offset is the
// first offset of the earliest transaction of another producer still
// open, else the marker's offset + 1 (Kafka's
// ProducerStateManager.lastStableOffset(CompletedTxn)).
func trackTxnBatch(open map[int64]int64, h *protocol.BatchHeader, typ int16) (AbortedTxn, bool) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return AbortedTxn{}, false
	}
	if !h.IsControl() {
		if _, ok := open[h.ProducerID]; !ok {
			open[h.ProducerID] = h.BaseOffset
		}
		return AbortedTxn{}, false
	}
	if typ != controlAbort && typ != controlCommit {
		return AbortedTxn{}, false
	}
	first, ok := open[h.ProducerID]
	delete(open, h.ProducerID)
	if !ok || typ != controlAbort {
		return AbortedTxn{}, false
	}
	lso := h.LastOffset() + 1
	for _, o := range open {
		lso = min(lso, o)
	}
	return AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.LastOffset(), LastStableOffset: lso}, true
}

// markerType reads a control batch's marker type, or -1 when it is not a
// control batch or has no record.
func markerType(h *protocol.BatchHeader, batch []byte, decompress func(protocol.Codec, []byte) ([]byte, error)) (int16, error) {
	if !h.IsControl() {
		return -1, nil
	}
	recs, err := decodeRecords(h, batch, decompress, nil)
	if err != nil {
		return -1, err
	}
	return controlType(recs), nil
}

// trackAppendedTxnsLocked follows the transactions through batches just
// written to seg (infos give their positions in the segment; the first
// starts at segPos, where batches[0] is) and adds the index entries of
// the transactions they abort. The caller holds mu, and the batches are
// not yet published.
func (l *Log) trackAppendedTxnsLocked(seg *segment, batches []byte, infos []batchInfo, segPos int64) error {
	for _, b := range infos {
		if b.attributes&(protocol.AttrTransactional|protocol.AttrControl) == 0 {
			continue
		}
		batch := batches[b.pos-segPos : b.pos-segPos+b.size]
		h, err := protocol.ParseBatchHeader(batch)
		if err != nil {
			return err
		}
		typ, err := markerType(&h, batch, l.decompress)
		if err != nil {
			// A marker whose record cannot be read ends nothing, as a
			// marker of an unknown type.
			l.logger.Warn("unreadable control batch", "partition", l.tp.String(), "offset", h.BaseOffset, "err", err)
			continue
		}
		if t, ok := trackTxnBatch(l.txnOpen, &h, typ); ok {
			if err := seg.appendTxnLocked(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureTxnTrackerLocked makes sure the ongoing transactions as of the
// log end are known, before an append that may start or end one. The
// caller holds mu.
func (l *Log) ensureTxnTrackerLocked() error {
	if l.txnOpen != nil {
		return nil
	}
	open, err := l.openTxnsAt(l.segments(), l.leo.Load())
	if err != nil {
		return fmt.Errorf("ongoing transactions of %s: %w", l.tp, err)
	}
	l.txnOpen = open
	return nil
}

// openTxnsAt returns the transactions ongoing at offset among segs: from
// the newest producer-state snapshot at or below offset (and at or above
// the first segment) that reads, then the batches from it to offset; from
// the first segment without one.
func (l *Log) openTxnsAt(segs []*segment, offset int64) (map[int64]int64, error) {
	open := map[int64]int64{}
	from := segs[0].base
	if snap, txns, ok := l.readProducerSnapshot(from, offset); ok {
		from, open = snap, txns
	}
	err := l.scanTxnBatches(segs, from, offset, func(h *protocol.BatchHeader, typ int16) {
		trackTxnBatch(open, h, typ)
	})
	if err != nil {
		return nil, err
	}
	return open, nil
}

// readProducerSnapshot reads the ongoing transactions from the newest
// snapshot in [lo, hi] that decodes, if the manager can decode them.
func (l *Log) readProducerSnapshot(lo, hi int64) (int64, map[int64]int64, bool) {
	if l.snapshotTxns == nil {
		return 0, nil, false
	}
	offsets, err := listProducerSnapshots(l.fsys, l.dir)
	if err != nil {
		l.logger.Warn("list producer snapshots", "partition", l.tp.String(), "err", err)
		return 0, nil, false
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > hi || off < lo {
			continue
		}
		name := segmentPath(l.dir, off, producerSnapshotSuffix)
		data, err := vfs.ReadFile(l.fsys, name)
		var txns map[int64]int64
		if err == nil {
			txns, err = l.snapshotTxns(data)
		}
		if err != nil {
			l.logger.Warn("skipping unreadable producer snapshot", "file", name, "err", err)
			continue
		}
		if txns == nil {
			txns = map[int64]int64{}
		}
		return off, txns, true
	}
	return 0, nil, false
}

// scanTxnBatches calls fn for every transactional batch with offsets in
// [from, to) of segs, with its marker type for a control batch (-1
// otherwise), walking headers and reading only control batches whole.
// Segments known to hold no transactional batch are skipped. Damaged
// data (a batch that does not parse or fails its CRC) ends the walk of
// its segment with a warning, as an index rebuild stops there; a failed
// read is an error.
func (l *Log) scanTxnBatches(segs []*segment, from, to int64, fn func(h *protocol.BatchHeader, typ int16)) error {
	var buf []byte
	for i, s := range segs {
		if s.base >= to {
			break
		}
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue
		}
		if s.txn.Load() == txnNone {
			continue
		}
		var err error
		buf, err = l.scanSegmentTxns(s, from, to, buf, fn)
		if isDamage(err) {
			l.logger.Warn("transaction scan stops at damaged data", "partition", l.tp.String(), "segment", s.base, "err", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scanSegmentTxns is scanTxnBatches for one segment; buf is scratch. A
// scan of the whole segment records whether it holds transactional
// batches, so that later scans skip it if not.
func (l *Log) scanSegmentTxns(s *segment, from, to int64, buf []byte, fn func(h *protocol.BatchHeader, typ int16)) ([]byte, error) {
	sc := newHeaderScanner(s.log, 0, s.size.Load())
	defer sc.release()
	saw := false
	for {
		b, err := sc.next()
		if err == io.EOF {
			if from <= s.base {
				state := txnNone
				if saw {
					state = txnSome
				}
				s.txn.CompareAndSwap(txnUnknown, state)
			}
			return buf, nil
		}
		if err != nil {
			return buf, fmt.Errorf("scan segment %d: %w", s.base, err)
		}
		if b.baseOffset >= to {
			return buf, nil
		}
		if b.attributes&protocol.AttrTransactional != 0 {
			saw = true
		}
		if b.baseOffset < from || b.attributes&protocol.AttrTransactional == 0 {
			continue
		}
		h := headerFromPrefix(sc.lastHeader())
		typ := int16(-1)
		if h.IsControl() {
			if int64(cap(buf)) < b.size {
				buf = make([]byte, b.size)
			}
			batch := buf[:b.size]
			if err := s.readFull(batch, b.pos); err != nil {
				return buf, fmt.Errorf("scan segment %d: %w", s.base, err)
			}
			err := protocol.VerifyCRC(batch)
			if err == nil {
				typ, err = markerType(&h, batch, l.decompress)
			}
			if err != nil {
				return buf, fmt.Errorf("scan segment %d at byte %d: %w: %w", s.base, b.pos, protocol.ErrCorrupt, err)
			}
		}
		fn(&h, typ)
	}
}

// isDamage tells damaged log data from a failed read.
func isDamage(err error) bool {
	return errors.Is(err, protocol.ErrCorrupt) || errors.Is(err, protocol.ErrTruncated) ||
		errors.Is(err, protocol.ErrMagic) || errors.Is(err, errTornBatch)
}

// txnRebuild follows transactions through the batches recovery re-reads,
// collecting each segment's index entries.
type txnRebuild struct {
	open       map[int64]int64
	entries    []AbortedTxn
	decompress func(protocol.Codec, []byte) ([]byte, error)
}

// track follows one recovered batch.
func (r *txnRebuild) track(h *protocol.BatchHeader, batch []byte) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	typ, err := markerType(h, batch, r.decompress)
	if err != nil {
		typ = -1 // ends nothing, as when appended
	}
	if t, ok := trackTxnBatch(r.open, h, typ); ok {
		r.entries = append(r.entries, t)
	}
}

// take returns the entries collected since the last call.
func (r *txnRebuild) take() []AbortedTxn {
	e := r.entries
	r.entries = nil
	return e
}

// newTxnRebuild prepares the rebuild of the transaction indexes of the
// segments from segs[from] on, during loading.
func (l *Log) newTxnRebuild(segs []*segment, from int) (*txnRebuild, error) {
	open, err := l.openTxnsAt(segs[:from+1], segs[from].base)
	if err != nil {
		return nil, fmt.Errorf("ongoing transactions of %s at %d: %w", l.tp, segs[from].base, err)
	}
	return &txnRebuild{open: open, decompress: l.decompress}, nil
}

// listProducerSnapshots lists the offsets of the producer-state snapshot
// files in dir, ascending.
func listProducerSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), producerSnapshotSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if off, ok := parseSegmentBase(stem); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// removeProducerSnapshots removes the snapshot files whose offset drop
// reports, as Kafka deletes the snapshots of deleted segments and those
// past a truncation. It reports whether it removed any; the caller syncs
// the directory.
func (l *Log) removeProducerSnapshots(drop func(offset int64) bool) (bool, error) {
	offsets, err := listProducerSnapshots(l.fsys, l.dir)
	if err != nil {
		return false, fmt.Errorf("list producer snapshots of %s: %w", l.tp, err)
	}
	removed := false
	for _, off := range offsets {
		if !drop(off) {
			continue
		}
		name := segmentPath(l.dir, off, producerSnapshotSuffix)
		if err := l.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove %s: %w", name, err)
		}
		removed = true
	}
	return removed, nil
}

// RollEvent describes a roll of the log to a new active segment.
type RollEvent struct {
	// BaseOffset is the new segment's base offset: everything below it
	// lies in the older segments, which are durable when the hook runs.
	BaseOffset int64
	// InAppend says the roll happened inside Append, AppendDeferFlush or
	// AppendAsFollower, on the goroutine of their caller (which holds the
	// partition's lock); otherwise retention rolled the log so that
	// every older segment could go, and the hook runs on a maintenance
	// goroutine that holds no lock of the broker.
	InAppend bool
}

// OnRoll sets fn to be called after every roll, with the log's writer
// lock held: fn may read the log's offsets but must not call a method
// that appends, flushes, truncates or deletes. The broker writes its
// producer-state snapshot named by the new base offset here, as Kafka does
// at each roll.
func (l *Log) OnRoll(fn func(RollEvent)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollHook = fn
}

// hasTxnBatches reports whether any of the batches is transactional or a
// control batch, which the transaction index must follow.
func hasTxnBatches(infos []batchInfo) bool {
	for _, b := range infos {
		if b.attributes&(protocol.AttrTransactional|protocol.AttrControl) != 0 {
			return true
		}
	}
	return false
}
