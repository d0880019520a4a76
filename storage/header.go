package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/gregorbroker/gregor/protocol"
)

// batchInfo is what the log needs to know about a batch on disk without
// reading its records: where it is, how long it is, which offsets and
// timestamps it covers.
type batchInfo struct {
	pos          int64 // byte position in the segment
	size         int64 // whole batch, header included
	baseOffset   int64
	lastOffset   int64
	maxTimestamp int64
	attributes   int16
}

// decodeBatchPrefix reads a batch's fixed header from b, which need hold
// only the first protocol.BatchHeaderSize bytes. protocol.ParseBatchHeader
// wants the whole batch in memory; walking a segment to find a position
// needs only the header, so this reads the same fields at the same places
// (the magic-2 layout is fixed by Kafka) and leaves checksums to the
// callers that read whole batches.
func decodeBatchPrefix(b []byte, pos int64) (batchInfo, error) {
	if len(b) < protocol.BatchHeaderSize {
		return batchInfo{}, protocol.ErrTruncated
	}
	length := int32(binary.BigEndian.Uint32(b[8:]))
	if magic := int8(b[16]); magic != 2 {
		return batchInfo{}, fmt.Errorf("%w %d", protocol.ErrMagic, magic)
	}
	if length < protocol.BatchHeaderSize-12 {
		return batchInfo{}, fmt.Errorf("%w: batch length %d below header size", protocol.ErrCorrupt, length)
	}
	base := int64(binary.BigEndian.Uint64(b[0:]))
	delta := int32(binary.BigEndian.Uint32(b[23:]))
	if delta < 0 || base < 0 {
		return batchInfo{}, fmt.Errorf("%w: base offset %d, last offset delta %d", protocol.ErrCorrupt, base, delta)
	}
	return batchInfo{
		pos:          pos,
		size:         12 + int64(length),
		baseOffset:   base,
		lastOffset:   base + int64(delta),
		maxTimestamp: int64(binary.BigEndian.Uint64(b[35:])),
		attributes:   int16(binary.BigEndian.Uint16(b[21:])),
	}, nil
}

// infoOf describes a batch parsed by protocol.ParseBatchHeader.
func infoOf(h *protocol.BatchHeader, pos int64) batchInfo {
	return batchInfo{
		pos:          pos,
		size:         int64(h.Size()),
		baseOffset:   h.BaseOffset,
		lastOffset:   h.LastOffset(),
		maxTimestamp: h.MaxTimestamp,
		attributes:   h.Attributes,
	}
}

// errTornBatch reports a batch that runs past the end of its segment.
var errTornBatch = errors.New("batch runs past the end of the segment")

// headerScanner walks the batch headers of a segment file from a position,
// reading the file in windows so that small batches cost one read between
// them, not one each.
type headerScanner struct {
	r    io.ReaderAt
	end  int64 // bytes of the file that hold whole batches
	pos  int64 // position of the next header
	buf  []byte
	bpos int64 // file position of buf[0]
	blen int   // valid bytes in buf
	last []byte
}

const scanWindow = 16 << 10

// scanBufs recycles scanner windows: every Read makes a scanner.
var scanBufs = sync.Pool{New: func() any { b := make([]byte, scanWindow); return &b }}

// newHeaderScanner starts a scan at pos; release returns its buffer.
func newHeaderScanner(r io.ReaderAt, pos, end int64) *headerScanner {
	return &headerScanner{r: r, pos: pos, end: end, buf: *scanBufs.Get().(*[]byte)}
}

// release gives the scanner's window back for reuse.
func (s *headerScanner) release() {
	b := s.buf
	s.buf = nil
	scanBufs.Put(&b)
}

// next returns the batch at the scanner's position and moves past it. It
// returns io.EOF exactly at end.
func (s *headerScanner) next() (batchInfo, error) {
	if s.pos >= s.end {
		return batchInfo{}, io.EOF
	}
	if s.end-s.pos < protocol.BatchHeaderSize {
		return batchInfo{}, fmt.Errorf("header at %d: %w", s.pos, errTornBatch)
	}
	if s.pos < s.bpos || s.pos+protocol.BatchHeaderSize > s.bpos+int64(s.blen) {
		n := int(min(int64(len(s.buf)), s.end-s.pos))
		m, err := s.r.ReadAt(s.buf[:n], s.pos)
		if m < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return batchInfo{}, fmt.Errorf("read header at %d: %w", s.pos, err)
		}
		s.bpos, s.blen = s.pos, n
	}
	off := s.pos - s.bpos
	s.last = s.buf[off : off+protocol.BatchHeaderSize]
	b, err := decodeBatchPrefix(s.last, s.pos)
	if err != nil {
		return batchInfo{}, fmt.Errorf("header at %d: %w", s.pos, err)
	}
	if b.pos+b.size > s.end {
		return batchInfo{}, fmt.Errorf("batch at %d of %d bytes: %w", b.pos, b.size, errTornBatch)
	}
	s.pos += b.size
	return b, nil
}

// lastHeader returns the header bytes of the batch next returned last,
// valid until the following call.
func (s *headerScanner) lastHeader() []byte { return s.last }

// headerFromPrefix decodes every field of a magic-2 batch header from its
// first protocol.BatchHeaderSize bytes, which decodeBatchPrefix has
// checked; the records and CRC are not looked at.
func headerFromPrefix(b []byte) protocol.BatchHeader {
	be := binary.BigEndian
	return protocol.BatchHeader{
		BaseOffset:           int64(be.Uint64(b[0:])),
		BatchLength:          int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           int16(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		FirstTimestamp:       int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		NumRecords:           int32(be.Uint32(b[57:])),
	}
}
