package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/gregorbroker/gregor/protocol"
)

// cleaning is the state of one cleaning of one log.
type cleaning struct {
	c        *Cleaner
	l        *Log
	cfg      *LogConfig
	nowMs    int64
	readBuf  []byte
	recs     []protocol.Record
	kept     []protocol.Record
	res      CleanResult
	lastRecs map[int64]LastRecord
	aborted  []abortedTxn
	// The transaction index entries of the segments being cleaned, by
	// marker offset, and those the cleaned segment keeps.
	srcTxns  map[int64]AbortedTxn
	destTxns []AbortedTxn
}

// cleanLog is Kafka's Cleaner.doClean. It maps the latest offset of every
// key in the dirty section [firstDirty, firstUncleanable), as far as the
// dedupe buffer allows, then rewrites every segment below the offset the
// map reached, in groups that each become one segment, keeping:
//
//   - a record if a later record with its key is not in the map (it is
//     past the mapped offsets or its key is not dirty);
//   - a tombstone (null value) until delete.retention.ms after the
//     cleaning that first kept it as the latest for its key: that cleaning
//     writes the batch's delete horizon, a later one drops it (KIP-534);
//   - nothing of an aborted transaction, and its ABORT marker only while
//     a batch of the transaction remains; a COMMIT marker only while a
//     batch of its transaction remains, and either marker, once it is
//     alone, until its delete horizon passes;
//   - records without a key never (Kafka counts them invalid);
//   - a batch emptied by all this if it holds a producer's last record
//     (its sequence and epoch) or is the last batch before
//     firstUncleanable, as a bare header.
//
// Batches keep their offsets, producer fields and codec: a batch whose
// records all stay is copied as it is; one that loses some is rebuilt
// with the same base and last offset, and recompressed with its codec.
// Each group becomes a segment named by its first base offset, written as
// .cleaned, renamed .swap, then swapped for the old segments (renamed
// .deleted), so that a crash at any point leaves a log that loads.
func (c *Cleaner) cleanLog(l *Log, firstDirty, firstUncleanable, nowMs int64, producers *producerSnapshot) (*CleanResult, error) {
	if len(c.readBuf) != c.cfg.IOBufferSize {
		c.readBuf = make([]byte, c.cfg.IOBufferSize)
	}
	cl := &cleaning{c: c, l: l, cfg: l.cfg.Load(), nowMs: nowMs, readBuf: c.readBuf}
	cl.res = CleanResult{Partition: l.tp, FirstDirtyOffset: firstDirty}
	scan, err := cl.scanTransactions(producers == nil)
	if err != nil {
		return nil, err
	}
	cl.aborted = scan.aborted
	upper := firstUncleanable
	segs := l.segments()
	// stopBefore keeps the cleaning below offset, at a segment boundary.
	stopBefore := func(offset int64) {
		if offset < upper {
			upper = max(segs[floorSegment(segs, offset)].base, firstDirty)
		}
	}
	if producers == nil {
		cl.lastRecs = scan.lastRecords
	} else {
		cl.lastRecs = producers.last
		stopBefore(producers.leo)
	}
	if scan.firstUnstable >= 0 {
		// An open transaction the broker did not report.
		stopBefore(scan.firstUnstable)
	}
	if upper <= firstDirty {
		return nil, nil
	}

	full, err := cl.buildOffsetMap(segs, firstDirty, upper)
	if err != nil {
		return nil, err
	}
	cl.res.MapFull = full
	end := c.omap.latest + 1
	if end <= firstDirty {
		return nil, nil
	}
	cl.res.EndOffset = end

	var toClean []*segment
	for _, s := range segs[:len(segs)-1] { // never the active segment
		if s.base < end {
			toClean = append(toClean, s)
		}
	}
	if len(toClean) == 0 {
		return nil, nil
	}
	for _, s := range toClean {
		if err := s.ensureLoaded(cl.cfg, l.logger); err != nil {
			return nil, err
		}
	}
	tracker := newTxnTracker(cl.aborted, toClean[0].base)
	for _, g := range groupSegments(toClean, cl.cfg.SegmentBytes, int64(cl.cfg.SegmentIndexBytes), upper) {
		if err := cl.cleanSegments(g, tracker, upper); err != nil {
			return nil, err
		}
		cl.res.SegmentsBefore += len(g)
		cl.res.SegmentsAfter++
	}
	return &cl.res, nil
}

// producerSnapshot is the broker's producer state as of a log end offset.
type producerSnapshot struct {
	leo  int64
	last map[int64]LastRecord
}

// txnScan is what the cleaner learns by walking batch headers: the
// aborted transactions (Kafka reads them from .txnindex files), the first
// offset of a transaction still open, and, without the broker's producer
// state, each producer's last record.
type txnScan struct {
	aborted       []abortedTxn
	firstUnstable int64 // -1: none open
	lastRecords   map[int64]LastRecord
}

// producerScan follows one producer through the log as Kafka's
// ProducerStateManager would.
type producerScan struct {
	epoch          int16
	lastDataOffset int64
	lastTimestamp  int64
	inTxn          bool
}

// scanTransactions walks the headers of every segment that may hold
// transactional batches or markers (all of them when allBatches is set,
// to follow producers), reading only control batches whole.
func (cl *cleaning) scanTransactions(allBatches bool) (txnScan, error) {
	res := txnScan{firstUnstable: -1}
	open := map[int64]int64{} // producer -> first offset of its open transaction
	producers := map[int64]*producerScan{}
	var recs []protocol.Record
	var buf []byte
	for _, s := range cl.l.segments() {
		state := s.txn.Load()
		if state == txnNone && !allBatches {
			continue
		}
		if err := cl.c.checkDone(cl.l); err != nil {
			return res, err
		}
		sc := newHeaderScanner(s.log, 0, s.size.Load())
		saw := false
		for {
			b, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				sc.release()
				return res, fmt.Errorf("scan segment %d: %w", s.base, err)
			}
			if b.attributes&(protocol.AttrTransactional|protocol.AttrControl) == 0 && !allBatches {
				continue
			}
			saw = saw || b.attributes&(protocol.AttrTransactional|protocol.AttrControl) != 0
			h := headerFromPrefix(sc.lastHeader())
			typ := int16(-1)
			if h.IsControl() {
				// A control batch is read whole for its type.
				if int64(cap(buf)) < b.size {
					buf = make([]byte, b.size)
				}
				batch := buf[:b.size]
				err := s.readFull(batch, b.pos)
				if err == nil {
					err = protocol.VerifyCRC(batch)
				}
				if err == nil {
					recs, err = decodeRecords(&h, batch, cl.l.decompress, recs)
				}
				if err != nil {
					sc.release()
					return res, fmt.Errorf("scan segment %d at %d: %w", s.base, b.pos, err)
				}
				typ = controlType(recs)
			}
			cl.trackBatch(&h, typ, open, producers, &res)
		}
		sc.release()
		if state == txnUnknown {
			next := txnNone
			if saw {
				next = txnSome
			}
			s.txn.CompareAndSwap(txnUnknown, next)
		}
	}
	for _, first := range open {
		if res.firstUnstable < 0 || first < res.firstUnstable {
			res.firstUnstable = first
		}
	}
	sort.Slice(res.aborted, func(i, j int) bool { return res.aborted[i].firstOffset < res.aborted[j].firstOffset })
	if allBatches {
		res.lastRecords = map[int64]LastRecord{}
		for id, p := range producers {
			if !p.inTxn && cl.nowMs-p.lastTimestamp >= cl.c.cfg.ProducerIDExpirationMs {
				continue // Kafka would have expired it
			}
			res.lastRecords[id] = LastRecord{LastDataOffset: p.lastDataOffset, ProducerEpoch: p.epoch}
		}
	}
	return res, nil
}

// trackBatch follows transactions and producers through one batch.
func (cl *cleaning) trackBatch(h *protocol.BatchHeader, typ int16, open map[int64]int64, producers map[int64]*producerScan, res *txnScan) {
	if h.IsControl() {
		if typ == controlAbort || typ == controlCommit {
			first, ok := open[h.ProducerID]
			if !ok {
				first = h.BaseOffset
			}
			if typ == controlAbort {
				res.aborted = append(res.aborted, abortedTxn{producerID: h.ProducerID, firstOffset: first, lastOffset: h.LastOffset()})
			}
			delete(open, h.ProducerID)
		}
	} else if h.IsTransactional() {
		if _, ok := open[h.ProducerID]; !ok {
			open[h.ProducerID] = h.BaseOffset
		}
	}
	if h.ProducerID < 0 {
		return
	}
	p := producers[h.ProducerID]
	if p == nil {
		p = &producerScan{epoch: h.ProducerEpoch, lastDataOffset: -1}
		producers[h.ProducerID] = p
	}
	if h.IsControl() {
		if h.ProducerEpoch > p.epoch {
			p.lastDataOffset = -1
		}
		p.inTxn = false
	} else {
		p.lastDataOffset = h.LastOffset()
		p.inTxn = h.IsTransactional()
	}
	p.epoch = h.ProducerEpoch
	p.lastTimestamp = h.MaxTimestamp
}

// buildOffsetMap is Kafka's buildOffsetMap: the latest offset of each key
// in the dirty segments, skipping aborted transactions, until the map is
// as full as the load factor allows. It returns whether it filled up.
func (cl *cleaning) buildOffsetMap(segs []*segment, start, end int64) (bool, error) {
	c := cl.c
	c.omap.reset(int64(float64(end-start)/c.cfg.DedupeBufferLoadFactor)+1, c.cfg.DedupeBufferSize)
	capacity := c.omap.capacity(c.cfg.DedupeBufferLoadFactor)
	if capacity < 1 {
		return false, fmt.Errorf("dedupe buffer of %d bytes holds no key", c.cfg.DedupeBufferSize)
	}
	dirty := segmentsIn(segs, start, end)
	tracker := newTxnTracker(cl.aborted, start)
	for i, s := range dirty {
		next := end
		if i+1 < len(dirty) {
			next = dirty[i+1].base
		}
		if err := s.ensureLoaded(cl.cfg, cl.l.logger); err != nil {
			return false, err
		}
		s.mu.RLock()
		pos := offsetLookup(s.offIdx, s.base, start)
		s.mu.RUnlock()
		r := newBatchReader(s.log, pos, s.size.Load(), cl.readBuf, c.throttle.maybeThrottle)
		for {
			if err := c.checkDone(cl.l); err != nil {
				return false, err
			}
			h, batch, _, err := r.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return false, cl.readErr(s, err)
			}
			if h.IsControl() {
				if cl.recs, err = decodeRecords(&h, batch, cl.l.decompress, cl.recs); err != nil {
					return false, err
				}
				tracker.onControlBatch(&h, controlType(cl.recs))
			} else if !tracker.onBatch(&h) {
				if cl.recs, err = decodeRecords(&h, batch, cl.l.decompress, cl.recs); err != nil {
					return false, err
				}
				for j := range cl.recs {
					off := h.BaseOffset + int64(cl.recs[j].OffsetDelta)
					if cl.recs[j].Key == nil || off < start {
						continue
					}
					if c.omap.entries >= capacity {
						return true, nil
					}
					c.omap.put(cl.recs[j].Key, off)
				}
			}
			if h.LastOffset() >= start {
				c.omap.updateLatest(h.LastOffset())
			}
		}
		cl.readBuf = r.buf
		// Offsets with no batch up to the next segment count as mapped.
		c.omap.updateLatest(next - 1)
	}
	return false, nil
}

// readErr explains a read failure, which is an abort if the log closed.
func (cl *cleaning) readErr(s *segment, err error) error {
	if cl.l.closed.Load() {
		return errCleaningAborted
	}
	return fmt.Errorf("segment %d: %w", s.base, err)
}

// cleanSegments is Kafka's cleanSegments: it cleans a group of segments
// into one new segment and swaps it in.
func (cl *cleaning) cleanSegments(group []*segment, tracker *txnTracker, roundEnd int64) error {
	l := cl.l
	dest, err := createSegmentFiles(l.fsys, l.files, l.dir, group[0].base, cl.nowMs, cleanedFileSuffix)
	if err != nil {
		return err
	}
	// The index files are written whole at the end, if they have
	// entries.
	ok := false
	defer func() {
		if !ok {
			dest.close()
			if err := dest.remove(); err != nil {
				l.logger.Warn("remove unfinished cleaned segment", "segment", dest.base, "err", err)
			}
		}
	}()
	w := &segmentWriter{seg: dest, cfg: cl.cfg, throttle: cl.c.throttle.maybeThrottle, buf: make([]byte, 0, cl.c.cfg.IOBufferSize)}
	if err := cl.loadGroupTxns(group); err != nil {
		return err
	}
	for _, s := range group {
		if err := cl.cleanInto(s, w, tracker, roundEnd); err != nil {
			return err
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	if err := dest.log.Sync(); err != nil {
		return fmt.Errorf("fsync cleaned segment %d: %w", dest.base, err)
	}
	dest.mu.Lock()
	dest.addFinalTimeEntryLocked()
	_, err = dest.rewriteIndexFilesLocked()
	if err == nil {
		err = dest.replaceTxnIndexLocked(cl.destTxns)
	}
	dest.mu.Unlock()
	if err != nil {
		return err
	}
	// Keep the age of the data, as Kafka's setLastModified: retention
	// falls back on it for a segment without timestamps, such as one
	// the cleaning emptied.
	if st, err := group[len(group)-1].log.Stat(); err == nil {
		if err := l.fsys.Chtimes(dest.path(logSuffix), st.ModTime(), st.ModTime()); err != nil {
			return fmt.Errorf("set modification time of cleaned segment %d: %w", dest.base, err)
		}
	}
	committed, err := cl.replaceSegments(dest, group)
	// Once the swap has begun, the .swap files are what a restart
	// completes it from: they must stay even if it failed.
	ok = committed
	return err
}

// replaceSegments swaps the cleaned segment in for the group, as Kafka's
// LocalLog.replaceSegments: .cleaned -> .swap (durable), then, under the
// writer's lock, the old segments -> .deleted and .swap -> final name, and
// the new list published. A crash before the .swap rename is durable
// leaves the old segments; after it, the next start completes the swap.
// committed reports that the old segments' renaming began, after which
// the .swap files must stay whatever happens.
func (cl *cleaning) replaceSegments(dest *segment, group []*segment) (committed bool, err error) {
	l := cl.l
	if err := dest.changeSuffix(swapFileSuffix); err != nil {
		return false, err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return false, fmt.Errorf("sync %s: %w", l.dir, err)
	}
	l.mu.Lock()
	segs := l.segments()
	i := slices.Index(segs, group[0])
	switch {
	case l.closed.Load() || l.err != nil:
		l.mu.Unlock()
		return false, errCleaningAborted
	case i < 0 || i+len(group) > len(segs) || !slices.Equal(segs[i:i+len(group)], group):
		l.mu.Unlock()
		return false, fmt.Errorf("segments changed under the cleaner at %d", group[0].base)
	}
	for _, s := range group {
		if err := s.changeSuffix(deletedFileSuffix); err != nil {
			l.err = fmt.Errorf("swap cleaned segment %s/%d: %w", l.tp, dest.base, err)
			l.mu.Unlock()
			return true, l.err
		}
	}
	if err := dest.changeSuffix(""); err != nil {
		l.err = fmt.Errorf("swap cleaned segment %s/%d: %w", l.tp, dest.base, err)
		l.mu.Unlock()
		return true, l.err
	}
	next := make([]*segment, 0, len(segs)-len(group)+1)
	next = append(next, segs[:i]...)
	next = append(next, dest)
	next = append(next, segs[i+len(group):]...)
	l.segs.Store(&next)
	l.mu.Unlock()
	l.deleter.schedule(l, group, cl.nowMs+cl.cfg.FileDeleteDelayMs)
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return true, l.setErr(fmt.Errorf("swap cleaned segment %s/%d: sync dir: %w", l.tp, dest.base, err))
	}
	return true, nil
}

// batch retention decisions, Kafka's BatchRetention.
const (
	retainEmpty = iota // keep the batch even if no record stays
	deleteBatch        // drop the batch and its records
	deleteEmpty        // drop the batch if no record stays
)

// cleanInto is Kafka's cleanInto: it filters one segment's batches into
// the destination.
func (cl *cleaning) cleanInto(src *segment, w *segmentWriter, tracker *txnTracker, roundEnd int64) error {
	c := cl.c
	omap := c.omap
	r := newBatchReader(src.log, 0, src.size.Load(), cl.readBuf, c.throttle.maybeThrottle)
	defer func() { cl.readBuf = r.buf }()
	for {
		if err := c.checkDone(cl.l); err != nil {
			return err
		}
		h, batch, _, err := r.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return cl.readErr(src, err)
		}
		cl.res.BytesRead += int64(len(batch))
		if cl.recs, err = decodeRecords(&h, batch, cl.l.decompress, cl.recs); err != nil {
			return err
		}
		cl.res.RecordsRead += int64(len(cl.recs))

		// Kafka's checkBatchRetention.
		var canDiscard, discardRecords bool
		if h.IsControl() {
			typ := controlType(cl.recs)
			canDiscard = tracker.onControlBatch(&h, typ)
			discardRecords = canDiscard && hasDeleteHorizon(&h) && h.FirstTimestamp <= cl.nowMs
			if typ == controlAbort && !canDiscard {
				// The marker stays because batches of its transaction
				// were seen, and so does its index entry (Kafka's
				// CleanedTransactionMetadata.onControlBatchRead).
				if t, ok := cl.srcTxns[h.LastOffset()]; ok && t.ProducerID == h.ProducerID {
					cl.destTxns = append(cl.destTxns, t)
				}
			}
		} else {
			canDiscard = tracker.onBatch(&h)
			discardRecords = canDiscard
		}
		retention := deleteEmpty
		switch {
		case h.ProducerID >= 0 && cl.isLastOfProducer(&h):
			retention = retainEmpty
		case h.LastOffset()+1 == roundEnd:
			// Keep the round's last offset even if the batch empties.
			retention = retainEmpty
		case discardRecords:
			retention = deleteBatch
		}
		markerForEmptyTxn := canDiscard && h.IsControl()
		if retention == deleteBatch {
			continue
		}

		// Kafka's filterBatch and shouldRetainRecord.
		cl.kept = cl.kept[:0]
		tombstones := false
		for i := range cl.recs {
			rec := &cl.recs[i]
			keep := false
			switch {
			case discardRecords:
			case h.IsControl():
				keep = true
			default:
				keep = cl.retainRecord(omap, &h, rec)
			}
			if keep {
				cl.kept = append(cl.kept, *rec)
				if rec.Value == nil {
					tombstones = true
				}
			}
		}

		switch {
		case len(cl.kept) > 0:
			setHorizon := (tombstones || markerForEmptyTxn) && !hasDeleteHorizon(&h)
			out := batch
			if len(cl.kept) != len(cl.recs) || setHorizon {
				horizon := int64(-1)
				if setHorizon {
					horizon = satAdd(cl.nowMs, cl.cfg.DeleteRetentionMs)
				} else if hasDeleteHorizon(&h) {
					horizon = h.FirstTimestamp
				}
				if out, err = rebuildBatch(&h, cl.kept, horizon, cl.l.compress); err != nil {
					return err
				}
			}
			if err := w.append(out, &h); err != nil {
				return err
			}
			cl.res.RecordsWritten += int64(len(cl.kept))
			cl.res.BytesWritten += int64(len(out))
		case retention == retainEmpty:
			out := emptyBatch(&h)
			if err := w.append(out, &h); err != nil {
				return err
			}
			cl.res.BytesWritten += int64(len(out))
		}
	}
}

// retainRecord is Kafka's Cleaner.shouldRetainRecord.
func (cl *cleaning) retainRecord(omap *offsetMap, h *protocol.BatchHeader, rec *protocol.Record) bool {
	off := h.BaseOffset + int64(rec.OffsetDelta)
	if off > omap.latest {
		return true
	}
	if rec.Key == nil {
		return false // invalid in a compacted log; Kafka drops it too
	}
	latestForKey := off >= omap.get(rec.Key)
	retainDeletes := !hasDeleteHorizon(h) || cl.nowMs < h.FirstTimestamp
	return latestForKey && (rec.Value != nil || retainDeletes)
}

// isLastOfProducer is Kafka's isBatchLastRecordOfProducer.
func (cl *cleaning) isLastOfProducer(h *protocol.BatchHeader) bool {
	last, ok := cl.lastRecs[h.ProducerID]
	if !ok {
		return false
	}
	if last.LastDataOffset >= 0 {
		return h.LastOffset() == last.LastDataOffset
	}
	return h.IsControl() && h.ProducerEpoch == last.ProducerEpoch
}

// satAdd adds without overflowing past math.MaxInt64.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// segmentWriter appends batches to a cleaned segment through a buffer and
// indexes them as LogSegment.append does.
type segmentWriter struct {
	seg      *segment
	cfg      *LogConfig
	throttle func(int)
	buf      []byte
	written  int64 // bytes in the file
}

func (w *segmentWriter) append(batch []byte, h *protocol.BatchHeader) error {
	pos := w.written + int64(len(w.buf))
	if pos+int64(len(batch)) > math.MaxInt32 {
		return errors.New("cleaned segment would exceed 2 GiB")
	}
	info, err := decodeBatchPrefix(batch, pos)
	if err != nil {
		return err
	}
	w.seg.mu.Lock()
	w.seg.indexBatchLocked(info, w.cfg, &w.seg.bytesSinceIndex)
	w.seg.mu.Unlock()
	if h.IsTransactional() || h.IsControl() {
		w.seg.txn.Store(txnSome)
	}
	w.seg.nextOffset = info.lastOffset + 1
	if len(w.buf)+len(batch) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(batch) > cap(w.buf) {
		return w.write(batch)
	}
	w.buf = append(w.buf, batch...)
	return nil
}

func (w *segmentWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *segmentWriter) write(b []byte) error {
	if _, err := w.seg.log.WriteAt(b, w.written); err != nil {
		return fmt.Errorf("write cleaned segment %d: %w", w.seg.base, err)
	}
	w.written += int64(len(b))
	w.seg.size.Store(w.written)
	w.throttle(len(b))
	return nil
}

// loadGroupTxns gathers the transaction index entries of the segments a
// cleaning rewrites into one, for the entries the cleaned segment keeps.
func (cl *cleaning) loadGroupTxns(group []*segment) error {
	cl.srcTxns, cl.destTxns = map[int64]AbortedTxn{}, nil
	for _, s := range group {
		entries, err := s.txnEntries()
		if err != nil {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
		for _, t := range entries {
			cl.srcTxns[t.LastOffset] = t
		}
	}
	return nil
}
