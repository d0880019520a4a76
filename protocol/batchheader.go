package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/internal/crc32c"
)

// BatchHeaderSize is the size of a magic-2 record batch header: the 8-byte
// base offset and 4-byte length that precede every batch, then the 49 bytes
// up to and including the record count.
const BatchHeaderSize = 61

// Byte positions of the header fields inside a batch.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57
)

// Attribute bits of a record batch.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Errors returned when a batch is malformed. The broker answers
// CORRUPT_MESSAGE for ErrCorrupt and ErrTruncated.
var (
	ErrTruncated = errors.New("record batch truncated")
	ErrCorrupt   = errors.New("record batch corrupt")
	ErrMagic     = errors.New("unsupported record batch magic")
)

// BatchHeader is the fixed-size header of a magic-2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the whole batch's size in bytes, header included.
func (h *BatchHeader) Size() int { return 12 + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the batch's compression codec.
func (h *BatchHeader) Codec() Codec { return Codec(h.Attributes & AttrCompressionMask) }

// IsTransactional reports whether the batch belongs to a transaction.
func (h *BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports whether the batch holds control records (markers).
func (h *BatchHeader) IsControl() bool { return h.Attributes&AttrControl != 0 }

// HasLogAppendTime reports whether the batch's timestamps are broker time.
func (h *BatchHeader) HasLogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// ParseBatchHeader reads a batch header from the start of b. It checks that
// the length is plausible and that b holds the whole batch, but not the CRC.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < 17 {
		return h, ErrTruncated
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.Magic != 2 {
		return h, fmt.Errorf("%w %d", ErrMagic, h.Magic)
	}
	if h.BatchLength < BatchHeaderSize-12 {
		return h, fmt.Errorf("%w: batch length %d below header size", ErrCorrupt, h.BatchLength)
	}
	if len(b) < BatchHeaderSize {
		return h, ErrTruncated
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.FirstTimestamp = int64(binary.BigEndian.Uint64(b[offFirstTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[offNumRecords:]))
	if len(b) < h.Size() {
		return h, ErrTruncated
	}
	return h, nil
}

// BatchCRC computes the CRC-32C of a batch: it covers the bytes from the
// attributes to the end, so the base offset, length and partition leader
// epoch can be rewritten without recomputing it.
func BatchCRC(batch []byte) uint32 {
	return crc32c.Checksum(batch[offAttributes:])
}

// VerifyCRC checks a whole batch's CRC-32C against its header.
func VerifyCRC(batch []byte) error {
	if len(batch) < BatchHeaderSize {
		return ErrTruncated
	}
	return checkCRC(batch, BatchCRC(batch))
}

// checkCRC compares got, the CRC-32C of a batch of at least
// BatchHeaderSize bytes, with the one its header carries.
func checkCRC(batch []byte, got uint32) error {
	if want := binary.BigEndian.Uint32(batch[offCRC:]); got != want {
		return fmt.Errorf("%w: crc %08x, header says %08x", ErrCorrupt, got, want)
	}
	return nil
}

// UpdateBatchCRC continues a CRC-32C over more of a batch's bytes, so that
// a batch arriving in pieces can be checksummed piece by piece: starting
// from 0 over everything from the attributes to the end, it ends at
// BatchCRC's value.
func UpdateBatchCRC(crc uint32, p []byte) uint32 {
	return crc32c.Update(crc, p)
}

// BatchCRCStart is where the bytes a batch's CRC-32C covers begin: its
// attributes, after the base offset, length, leader epoch, magic and CRC.
const BatchCRCStart = offAttributes

// SetBaseOffset rewrites a batch's base offset in place.
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch rewrites a batch's partition leader epoch in place.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks a batch as carrying broker time ts, setting the
// timestamp-type attribute and the max timestamp, and recomputes the CRC.
func SetLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:])
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs|AttrLogAppendTime)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], BatchCRC(batch))
}

// Codec is a record batch compression codec.
type Codec int8

// The codecs Kafka defines, by attribute value.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String names the codec as Kafka's compression.type does.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}
