package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gregorbroker/gregor/protocol"
)

// ErrNoDecompressor is returned by FindOffsetByTimestamp when it must look
// inside a compressed batch and ManagerConfig.Decompress is nil.
var ErrNoDecompressor = errors.New("compressed batch and no decompressor configured")

// FindOffsetByTimestamp answers ListOffsets for a timestamp: the offset and
// timestamp of the first record at or after the log start offset whose
// timestamp is >= ts, with Kafka's semantics (UnifiedLog.fetchOffsetByTimestamp
// and FileRecords.searchForTimestamp). found is false when no record is
// that late.
//
// The .timeindex narrows the search to a position; batches whose max
// timestamp is below ts are skipped by header; the first batch that
// reaches ts is decoded record by record. Compressed batches are inflated
// with ManagerConfig.Decompress (storage holds no codecs).
func (l *Log) FindOffsetByTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	for range maxReadAttempts {
		gen := l.truncations.Load()
		offset, timestamp, found, retry, err := l.findOffsetByTimestamp(ts)
		if !retry && l.truncations.Load() == gen {
			return offset, timestamp, found, err
		}
	}
	return -1, -1, false, fmt.Errorf("find offset %s by timestamp: segments keep changing under the search", l.tp)
}

// findOffsetByTimestamp is one attempt; retry is set when a segment was
// deleted under it.
func (l *Log) findOffsetByTimestamp(ts int64) (offset int64, timestamp int64, found, retry bool, err error) {
	if l.closed.Load() {
		return -1, -1, false, false, fmt.Errorf("find offset %s: %w", l.tp, ErrClosed)
	}
	cfg := l.cfg.Load()
	segs := l.segments()
	lso := l.lso.Load()
	for _, s := range segs {
		if !s.acquire() {
			return -1, -1, false, !l.closed.Load(), fmt.Errorf("find offset %s: %w", l.tp, ErrClosed)
		}
		offset, timestamp, found, err := l.searchSegment(s, ts, lso, cfg)
		s.release()
		if err != nil || found {
			return offset, timestamp, found, false, err
		}
	}
	return -1, -1, false, false, nil
}

// searchSegment looks for ts in one segment the caller has acquired.
func (l *Log) searchSegment(s *segment, ts, lso int64, cfg *LogConfig) (int64, int64, bool, error) {
	if err := s.ensureLoaded(cfg, l.logger); err != nil {
		return -1, -1, false, fmt.Errorf("find offset %s by timestamp: %w", l.tp, err)
	}
	s.mu.RLock()
	maxTs := s.maxTs
	_, indexed := timeLookup(s.timeIdx, s.base, ts)
	pos := offsetLookup(s.offIdx, s.base, max(indexed, lso))
	s.mu.RUnlock()
	if maxTs < ts {
		return -1, -1, false, nil
	}
	off, rts, ok, err := s.searchForTimestamp(ts, lso, pos, l.decompress)
	if err != nil {
		return -1, -1, false, fmt.Errorf("find offset %s by timestamp: %w", l.tp, err)
	}
	return off, rts, ok, nil
}

// searchForTimestamp scans batches from pos for the first record with
// timestamp >= ts and offset >= minOffset.
func (s *segment) searchForTimestamp(ts, minOffset, pos int64, decompress func(protocol.Codec, []byte) ([]byte, error)) (int64, int64, bool, error) {
	sc := newHeaderScanner(s.log, pos, s.size.Load())
	defer sc.release()
	var buf []byte
	for {
		b, err := sc.next()
		if err == io.EOF {
			return -1, -1, false, nil
		}
		if err != nil {
			return -1, -1, false, err
		}
		if b.lastOffset < minOffset || b.maxTimestamp < ts {
			continue
		}
		if int64(cap(buf)) < b.size {
			buf = make([]byte, b.size)
		}
		batch := buf[:b.size]
		if err := s.readFull(batch, b.pos); err != nil {
			return -1, -1, false, err
		}
		off, rts, ok, err := firstRecordAtOrAfter(batch, ts, minOffset, decompress)
		if err != nil {
			return -1, -1, false, fmt.Errorf("batch at %d: %w", b.pos, err)
		}
		if ok {
			return off, rts, true, nil
		}
	}
}

// firstRecordAtOrAfter walks a batch's records and returns the offset and
// timestamp of the first one with timestamp >= ts and offset >= minOffset.
func firstRecordAtOrAfter(batch []byte, ts, minOffset int64, decompress func(protocol.Codec, []byte) ([]byte, error)) (int64, int64, bool, error) {
	return firstRecord(batch, decompress, func(off, rts int64) bool { return rts >= ts && off >= minOffset })
}

// firstRecord walks a batch's records and returns the offset and timestamp
// of the first one match accepts. Under LogAppendTime every record carries
// the batch's max timestamp, as Kafka's record iterators report it.
func firstRecord(batch []byte, decompress func(protocol.Codec, []byte) ([]byte, error), match func(offset, timestamp int64) bool) (int64, int64, bool, error) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return -1, -1, false, err
	}
	records := batch[protocol.BatchHeaderSize:h.Size()]
	if h.Codec() != protocol.CodecNone {
		if decompress == nil {
			return -1, -1, false, fmt.Errorf("%w (%s)", ErrNoDecompressor, h.Codec())
		}
		if records, err = decompress(h.Codec(), records); err != nil {
			return -1, -1, false, fmt.Errorf("decompress %s: %w", h.Codec(), err)
		}
	}
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(records)
		if n <= 0 || length < 0 || length > int64(len(records)-n) {
			return -1, -1, false, fmt.Errorf("%w: record %d length", protocol.ErrCorrupt, i)
		}
		body := records[n : n+int(length)]
		records = records[n+int(length):]
		if len(body) < 1 {
			return -1, -1, false, fmt.Errorf("%w: record %d empty", protocol.ErrCorrupt, i)
		}
		tsDelta, n1 := binary.Varint(body[1:]) // after the attributes byte
		if n1 <= 0 {
			return -1, -1, false, fmt.Errorf("%w: record %d timestamp", protocol.ErrCorrupt, i)
		}
		offDelta, n2 := binary.Varint(body[1+n1:])
		if n2 <= 0 {
			return -1, -1, false, fmt.Errorf("%w: record %d offset", protocol.ErrCorrupt, i)
		}
		recTs := h.FirstTimestamp + tsDelta
		if h.HasLogAppendTime() {
			recTs = h.MaxTimestamp
		}
		recOff := h.BaseOffset + offDelta
		if match(recOff, recTs) {
			return recOff, recTs, true, nil
		}
	}
	return -1, -1, false, nil
}

// OffsetOfMaxTimestamp answers ListOffsets MAX_TIMESTAMP (-3) as Kafka
// 3.8+ does (UnifiedLog.fetchOffsetByTimestamp): the first segment holding
// the log's largest batch max timestamp, found from what each segment
// tracks (the last offset of its first batch reaching its maximum, rebuilt
// from the .timeindex or by recovery after a restart); from that offset's
// .index position, the first batch whose max timestamp equals it; and in
// that batch the first record carrying it (RecordBatch.offsetOfMaxTimestamp).
// Under LogAppendTime every record carries the batch's timestamp, so that
// is the batch's first record. The search is done here, when asked, so the
// append path stays a header read. As in Kafka the log start offset does
// not bound it. found is false for an empty log, or if the batch has no
// record with its own max timestamp (a cleaned batch can keep a removed
// record's timestamp in its header).
func (l *Log) OffsetOfMaxTimestamp() (offset int64, timestamp int64, found bool, err error) {
	for range maxReadAttempts {
		gen := l.truncations.Load()
		offset, timestamp, found, retry, err := l.offsetOfMaxTimestamp()
		if !retry && l.truncations.Load() == gen {
			return offset, timestamp, found, err
		}
	}
	return -1, -1, false, fmt.Errorf("offset of max timestamp %s: segments keep changing under the search", l.tp)
}

// offsetOfMaxTimestamp is one attempt; retry is set when a segment was
// deleted under it.
func (l *Log) offsetOfMaxTimestamp() (offset int64, timestamp int64, found, retry bool, err error) {
	if l.closed.Load() {
		return -1, -1, false, false, fmt.Errorf("offset of max timestamp %s: %w", l.tp, ErrClosed)
	}
	cfg := l.cfg.Load()
	var best *segment
	var bestTs, bestOff int64
	// The first segment with the largest maximum wins, as Scala's maxBy
	// picks; a log without timestamps picks its first segment.
	for _, s := range l.segments() {
		if !s.acquire() {
			return -1, -1, false, !l.closed.Load(), fmt.Errorf("offset of max timestamp %s: %w", l.tp, ErrClosed)
		}
		err := s.ensureLoaded(cfg, l.logger)
		s.mu.RLock()
		ts, off := s.maxTs, s.maxTsOffset
		s.mu.RUnlock()
		s.release()
		if err != nil {
			return -1, -1, false, false, fmt.Errorf("offset of max timestamp %s: %w", l.tp, err)
		}
		if best == nil || ts > bestTs {
			best, bestTs, bestOff = s, ts, off
		}
	}
	if !best.acquire() {
		return -1, -1, false, !l.closed.Load(), fmt.Errorf("offset of max timestamp %s: %w", l.tp, ErrClosed)
	}
	defer best.release()
	best.mu.RLock()
	pos := offsetLookup(best.offIdx, best.base, bestOff)
	best.mu.RUnlock()
	offset, timestamp, found, err = best.searchForMaxTimestamp(bestTs, pos, l.decompress)
	if err != nil {
		return -1, -1, false, false, fmt.Errorf("offset of max timestamp %s: %w", l.tp, err)
	}
	return offset, timestamp, found, false, nil
}

// searchForMaxTimestamp scans batches from pos for the first whose max
// timestamp is ts and returns its first record with timestamp ts.
func (s *segment) searchForMaxTimestamp(ts, pos int64, decompress func(protocol.Codec, []byte) ([]byte, error)) (int64, int64, bool, error) {
	sc := newHeaderScanner(s.log, pos, s.size.Load())
	defer sc.release()
	for {
		b, err := sc.next()
		if err == io.EOF {
			return -1, -1, false, nil
		}
		if err != nil {
			return -1, -1, false, err
		}
		if b.maxTimestamp != ts {
			continue
		}
		batch := make([]byte, b.size)
		if err := s.readFull(batch, b.pos); err != nil {
			return -1, -1, false, err
		}
		off, rts, ok, err := firstRecord(batch, decompress, func(_, rts int64) bool { return rts == ts })
		if err != nil {
			return -1, -1, false, fmt.Errorf("batch at %d: %w", b.pos, err)
		}
		return off, rts, ok, nil
	}
}
