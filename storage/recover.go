package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync/atomic"

	"github.com/gregorbroker/gregor/protocol"
)

// recover re-reads every batch of the segment, as Kafka's
// LogSegment.recover: it checks each batch's length, magic, CRC and that
// offsets rise, truncates the .log after the last good batch, rebuilds both
// indexes from what survived and fsyncs everything (the data may have been
// read from a page cache that a later power loss would still drop). It
// rebuilds the transaction index too, following the transactions through
// txns (Kafka's LogSegment.recover with its ProducerStateManager). It
// returns how many bytes it cut off. It adds the size of each batch it
// checks to done, for the load's progress report.
func (s *segment) recover(cfg *LogConfig, batches, done *atomic.Int64, txns *txnRebuild) (truncated int64, reason error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.log.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("recover segment %d: %w", s.base, err)
	}
	fileSize := st.Size()
	s.offIdx, s.timeIdx = nil, nil
	s.maxTs, s.maxTsOffset = noTimestamp, s.base

	r := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, fileSize), 64<<10)
	var (
		valid      int64
		next       = s.base
		bytesSince int64
		buf        []byte
	)
	for valid < fileSize {
		b, err := readRecoveredBatch(r, &buf, fileSize-valid, next, s.base)
		if err != nil {
			reason = fmt.Errorf("batch at byte %d: %w", valid, err)
			break
		}
		batches.Add(1)
		done.Add(int64(b.Size()))
		txns.track(&b, buf[:b.Size()])
		info := infoOf(&b, valid)
		s.indexBatchLocked(info, cfg, &bytesSince)
		next = b.LastOffset() + 1
		valid += int64(b.Size())
	}
	if valid < fileSize {
		if err := s.log.Truncate(valid); err != nil {
			return 0, reason, fmt.Errorf("recover segment %d: truncate: %w", s.base, err)
		}
	}
	if err := s.log.Sync(); err != nil {
		return 0, reason, fmt.Errorf("recover segment %d: %w", s.base, err)
	}
	s.size.Store(valid)
	s.addFinalTimeEntryLocked()
	if _, err := s.rewriteIndexFilesLocked(); err != nil {
		if !IsExhausted(err) {
			return 0, reason, fmt.Errorf("recover segment %d: %w", s.base, err)
		}
		s.deferIndexFilesLocked()
	}
	if err := s.replaceTxnIndexLocked(txns.take()); err != nil {
		return 0, reason, fmt.Errorf("recover segment %d: %w", s.base, err)
	}
	s.loaded = true
	s.nextOffset = next
	s.bytesSinceIndex = bytesSince
	s.rollTsKnown = false
	return fileSize - valid, reason, nil
}

// readRecoveredBatch reads the next whole batch from r and checks it:
// remaining bounds its length, so a corrupt length cannot allocate beyond
// the file; its offsets must not go back (next) and must fit a 32-bit
// offset relative to the segment's base.
func readRecoveredBatch(r *bufio.Reader, buf *[]byte, remaining, next, base int64) (protocol.BatchHeader, error) {
	var prefix [12]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return protocol.BatchHeader{}, fmt.Errorf("%w: torn header", protocol.ErrTruncated)
	}
	length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
	if length < protocol.BatchHeaderSize-12 {
		return protocol.BatchHeader{}, fmt.Errorf("%w: batch length %d", protocol.ErrCorrupt, length)
	}
	if 12+length > remaining {
		return protocol.BatchHeader{}, fmt.Errorf("%w: batch of %d bytes, %d left in segment", protocol.ErrTruncated, 12+length, remaining)
	}
	size := int(12 + length)
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	b := (*buf)[:size]
	copy(b, prefix[:])
	if _, err := io.ReadFull(r, b[12:]); err != nil {
		return protocol.BatchHeader{}, fmt.Errorf("%w: %v", protocol.ErrTruncated, err)
	}
	h, err := protocol.ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if err := protocol.VerifyCRC(b); err != nil {
		return h, err
	}
	if h.BaseOffset < next || h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: offsets %d..%d after %d", protocol.ErrCorrupt, h.BaseOffset, h.LastOffset(), next-1)
	}
	if h.LastOffset()-base > math.MaxInt32 {
		return h, fmt.Errorf("%w: offset %d overflows segment %d", protocol.ErrCorrupt, h.LastOffset(), base)
	}
	return h, nil
}

// errNeedsRecovery says the active segment did not end cleanly on a batch
// boundary although the log dir was shut down cleanly.
var errNeedsRecovery = errors.New("active segment needs recovery")

// loadActive prepares the last segment for appends after a clean shutdown
// without checking CRCs: it loads the indexes and walks the batch headers
// after the last .index entry to find the next offset (Kafka's
// readNextOffset), the largest timestamp and the bytes since the last
// index entry. A header that does not parse means the segment needs
// recovery after all.
func (s *segment) loadActive(cfg *LogConfig, logger *slog.Logger) error {
	if err := s.ensureLoaded(cfg, logger); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var pos int64
	if n := len(s.offIdx); n > 0 {
		pos = int64(s.offIdx[n-1].pos)
	}
	next := s.base
	var bytesSince int64
	sc := newHeaderScanner(s.log, pos, s.size.Load())
	defer sc.release()
	for {
		b, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errNeedsRecovery, err)
		}
		if b.baseOffset < next || b.lastOffset-s.base > math.MaxInt32 {
			return fmt.Errorf("%w: offsets %d..%d after %d", errNeedsRecovery, b.baseOffset, b.lastOffset, next-1)
		}
		if b.maxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = b.maxTimestamp, b.lastOffset
		}
		next = b.lastOffset + 1
		bytesSince += b.size
	}
	s.nextOffset = next
	s.bytesSinceIndex = bytesSince
	return nil
}
