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
// Under LogAppendTime every record carries the batch's max timestamp.
func firstRecordAtOrAfter(batch []byte, ts, minOffset int64, decompress func(protocol.Codec, []byte) ([]byte, error)) (int64, int64, bool, error) {
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
		if recTs >= ts && recOff >= minOffset {
			return recOff, recTs, true, nil
		}
	}
	return -1, -1, false, nil
}
