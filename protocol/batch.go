package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrInvalidRecord reports a batch that is well formed on the wire but that
// Kafka's broker refuses from a producer: the broker answers INVALID_RECORD.
var ErrInvalidRecord = errors.New("invalid record")

// NoTimestamp is the timestamp of a record that has none.
const NoTimestamp = -1

// BatchInfo is what ValidateBatch learns about a batch beyond its header,
// for the checks that depend on broker or topic configuration.
type BatchInfo struct {
	Header BatchHeader
	// Records is the number of records found, equal to Header.NumRecords
	// once the batch is valid.
	Records int32
	// MaxTimestamp is the largest record timestamp (FirstTimestamp plus
	// the record's delta), or NoTimestamp. Kafka overwrites the header's
	// MaxTimestamp with it when it appends a CreateTime batch.
	MaxTimestamp int64
	// MinTimestamp is the smallest record timestamp other than
	// NoTimestamp, or NoTimestamp if there is none. With MaxTimestamp it
	// bounds the records for message.timestamp.{before,after}.max.ms.
	MinTimestamp int64
	// NullKeys counts records with a null key, which a compacted topic
	// refuses with INVALID_RECORD.
	NullKeys int32
	// UncompressedBytes is the size of the records section once
	// decompressed.
	UncompressedBytes int
}

// ValidateBatch checks one magic-2 batch from a produce request the way
// Kafka's broker does (UnifiedLog.analyzeAndValidateRecords and
// LogValidator for a client append): base offset 0, CRC-32C, a record
// count of at least one that equals LastOffsetDelta+1, no control batch, a
// sequence for an idempotent producer, a known codec, and records that
// parse and number exactly NumRecords, decompressing at most
// maxUncompressed bytes. batch must hold exactly one batch.
//
// Errors wrap ErrCorrupt or ErrTruncated (CORRUPT_MESSAGE), ErrInvalidRecord
// (INVALID_RECORD), ErrUnsupportedCodec (UNSUPPORTED_COMPRESSION_TYPE) or
// ErrUncompressedTooLarge. A batch of magic 0 or 1 wraps both ErrMagic and
// ErrInvalidRecord, as Kafka refuses old formats in produce v3 and later;
// any other unknown magic wraps ErrMagic and ErrCorrupt.
//
// Unlike Kafka, offset deltas must run 0, 1, 2...: Kafka ignores them in an
// uncompressed batch and recompresses a compressed one whose deltas are off,
// but Gregor stores the producer's bytes as they are, so such a batch would
// hand consumers offsets outside the batch. No Kafka client writes one.
//
// An uncompressed batch is checked without allocating.
func ValidateBatch(batch []byte, maxUncompressed int) (BatchInfo, error) {
	return validateBatch(batch, maxUncompressed, streamWindow, batchCRC{}, nil)
}

// ValidateBatchCRC is ValidateBatch for a batch whose CRC-32C the caller
// has already computed, as BatchCRC does (from the attributes to the end):
// the broker computes it while a produce request's bytes arrive, when they
// are still in the CPU's cache. Every check is ValidateBatch's, crc
// standing in for BatchCRC(batch).
func ValidateBatchCRC(batch []byte, maxUncompressed int, crc uint32) (BatchInfo, error) {
	return validateBatch(batch, maxUncompressed, streamWindow, batchCRC{sum: crc, known: true}, nil)
}

// batchCRC is a batch's CRC-32C computed beforehand, if known.
type batchCRC struct {
	sum   uint32
	known bool
}

// validateBatch is ValidateBatch reading compressed records through a
// window of the given size, which tests make small.
func validateBatch(batch []byte, maxUncompressed, window int, crc batchCRC, walk *RecordWalk) (BatchInfo, error) {
	info := BatchInfo{MaxTimestamp: NoTimestamp, MinTimestamp: NoTimestamp}
	h, err := ParseBatchHeader(batch)
	info.Header = h
	if err != nil {
		if errors.Is(err, ErrMagic) {
			if h.Magic == 0 || h.Magic == 1 {
				return info, fmt.Errorf("validate batch: %w: %w", ErrInvalidRecord, err)
			}
			return info, fmt.Errorf("validate batch: %w: %w", ErrCorrupt, err)
		}
		return info, fmt.Errorf("validate batch: %w", err)
	}
	if len(batch) != h.Size() {
		return info, fmt.Errorf("validate batch: %w: %d bytes after the batch; a produce carries one batch per partition",
			ErrInvalidRecord, len(batch)-h.Size())
	}
	if h.BaseOffset != 0 {
		return info, fmt.Errorf("validate batch: %w: base offset %d, a producer must send 0", ErrInvalidRecord, h.BaseOffset)
	}
	if !crc.known {
		crc = batchCRC{sum: BatchCRC(batch), known: true}
	}
	if err := checkCRC(batch, crc.sum); err != nil {
		return info, fmt.Errorf("validate batch: %w", err)
	}
	if countFromOffsets := int64(h.LastOffsetDelta) + 1; countFromOffsets <= 0 {
		return info, fmt.Errorf("validate batch: %w: last offset delta %d", ErrInvalidRecord, h.LastOffsetDelta)
	}
	if h.NumRecords <= 0 {
		return info, fmt.Errorf("validate batch: %w: record count %d", ErrInvalidRecord, h.NumRecords)
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return info, fmt.Errorf("validate batch: %w: record count %d but last offset delta %d",
			ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	}
	if h.IsControl() {
		return info, fmt.Errorf("validate batch: %w: producers may not write control batches", ErrInvalidRecord)
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return info, fmt.Errorf("validate batch: %w: producer id %d with sequence %d",
			ErrInvalidRecord, h.ProducerID, h.BaseSequence)
	}
	codec := h.Codec()
	if codec > CodecZstd {
		return info, fmt.Errorf("validate batch: %w: attribute codec %d", ErrUnsupportedCodec, int8(codec))
	}

	if codec != CodecNone {
		return validateStream(batch[BatchHeaderSize:], &h, codec, maxUncompressed, window, info)
	}
	records := batch[BatchHeaderSize:]
	info.UncompressedBytes = len(records)
	var walked recordWalk
	if walk != nil && walk.ok && walk.header == h {
		// The records before walk.pos were walked as they arrived;
		// the walk goes on from there as if it had never stopped.
		walked = walk.recordWalk
	} else {
		walked = newRecordWalk()
	}
	if err := walked.run(records, &h, false); err != nil {
		return info, fmt.Errorf("validate batch: %w: %v", ErrInvalidRecord, err)
	}
	info.Records, info.MaxTimestamp, info.MinTimestamp, info.NullKeys = walked.i, walked.maxTimestamp, walked.minTimestamp, walked.nullKeys
	return info, nil
}

// recordWalk is a walk through an uncompressed batch's records: how far
// it got, and what it found of the records before that.
type recordWalk struct {
	pos                        int   // the next record's first byte in the records section
	i                          int32 // records walked
	maxTimestamp, minTimestamp int64
	nullKeys                   int32
}

func newRecordWalk() recordWalk {
	return recordWalk{maxTimestamp: NoTimestamp, minTimestamp: NoTimestamp}
}

// run walks on through records, the batch's records section. When
// partial, records is only what has arrived of it: the walk stops before
// the first record not wholly there, or after the last one. Otherwise
// records is the whole section, and the walk ends at its end, or with
// the error that the first bad record (or a wrong record count) makes.
func (w *recordWalk) run(records []byte, h *BatchHeader, partial bool) error {
	it := recordIter{data: records, n: h.NumRecords, pos: w.pos, i: w.i}
	defer func() { w.pos, w.i = it.pos, it.i }()
	var v recordView
	for {
		if partial && (it.i == it.n || !recordArrived(records, it.pos)) {
			return nil
		}
		i := it.i
		more, err := it.next(&v)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		// The accounting of add, written out: this loop is the hot path.
		if v.offsetDelta != i {
			return fmt.Errorf("record %d has offset delta %d", i, v.offsetDelta)
		}
		ts := h.FirstTimestamp + v.timestampDelta
		w.maxTimestamp = max(w.maxTimestamp, ts)
		if ts != NoTimestamp && (w.minTimestamp == NoTimestamp || ts < w.minTimestamp) {
			w.minTimestamp = ts
		}
		if v.key == nil {
			w.nullKeys++
		}
	}
}

// recordArrived reports whether the record at records[pos] is wholly in
// records, or is malformed so that parsing it fails whatever follows.
func recordArrived(records []byte, pos int) bool {
	length, p, err := readZigzag32(records, pos)
	if err == errVarintTruncated { // unwrapped: readZigzag32's own
		return false
	}
	return err != nil || length < 0 || int(length) <= len(records)-p
}

// RecordWalk walks an uncompressed batch's records while its bytes are
// still arriving, so that each record is parsed while the socket read
// that brought it is in the CPU's cache (see broker/produce_precheck.go);
// ValidateBatchWalked then walks only what is left. A walk that met
// anything wrong stops, and the validation walks the batch from its
// start, so the answer is ValidateBatch's whatever the walk saw.
type RecordWalk struct {
	recordWalk
	header BatchHeader
	ok     bool
}

// Start begins a walk of the batch whose first BatchHeaderSize bytes are
// header. It reports false, and walks nothing, for a batch that is not
// an uncompressed magic-2 batch of records.
func (w *RecordWalk) Start(header []byte) bool {
	h, err := ParseBatchHeader(header)
	if errors.Is(err, ErrTruncated) && len(header) >= BatchHeaderSize {
		err = nil // the header is whole; the records are still to come
	}
	w.ok = err == nil && h.Codec() == CodecNone && h.NumRecords > 0
	w.header, w.recordWalk = h, newRecordWalk()
	return w.ok
}

// Advance walks the records wholly inside records, the part of the
// batch's records section (the bytes after its header) that has arrived.
func (w *RecordWalk) Advance(records []byte) {
	if w.ok && w.run(records, &w.header, true) != nil {
		w.ok = false
	}
}

// ValidateBatchWalked is ValidateBatchCRC for a batch whose records walk
// has walked as they arrived (w is ignored unless it walked this batch).
func ValidateBatchWalked(batch []byte, maxUncompressed int, crc uint32, w *RecordWalk) (BatchInfo, error) {
	return validateBatch(batch, maxUncompressed, streamWindow, batchCRC{sum: crc, known: true}, w)
}

// validateStream checks the records of a compressed batch as they
// decompress, through a window of streamWindow bytes: a batch costs the
// window and its codec's state (see maxStreamWindow), not what it expands
// to. A codec failure wraps ErrCorrupt, malformed records ErrInvalidRecord.
func validateStream(src []byte, h *BatchHeader, codec Codec, maxUncompressed, window int, info BatchInfo) (BatchInfo, error) {
	sv := streamValidators.Get().(*streamValidator)
	defer sv.release()
	rs, err := sv.open(codec, src, max(maxUncompressed, 0), window)
	if err != nil {
		return info, fmt.Errorf("validate batch: %w", err)
	}
	var v recordView
	for i := int32(0); i < h.NumRecords; i++ {
		if err := rs.next(&v); err != nil {
			return info, recordStreamError(rs, codec, fmt.Errorf("record %d: %w", i, err))
		}
		if err := info.add(h, i, &v); err != nil {
			return info, err
		}
	}
	end, err := rs.atEnd()
	if err == nil && !end {
		err = fmt.Errorf("bytes after the %d records the batch claims", h.NumRecords)
	}
	if err != nil {
		return info, recordStreamError(rs, codec, err)
	}
	info.UncompressedBytes = rs.read
	return info, nil
}

// recordStreamError reports a codec failure if there was one, since it
// also cuts the records short, and otherwise malformed records.
func recordStreamError(rs *recordStream, codec Codec, err error) error {
	if rs.srcErr != nil {
		return fmt.Errorf("validate batch: decompress %s: %w", codec, rs.srcErr)
	}
	return fmt.Errorf("validate batch: %w: %v", ErrInvalidRecord, err)
}

// add accounts for record i of a batch being validated.
func (info *BatchInfo) add(h *BatchHeader, i int32, v *recordView) error {
	if v.offsetDelta != i {
		return fmt.Errorf("validate batch: %w: record %d has offset delta %d", ErrInvalidRecord, i, v.offsetDelta)
	}
	ts := h.FirstTimestamp + v.timestampDelta
	info.MaxTimestamp = max(info.MaxTimestamp, ts)
	if ts != NoTimestamp && (info.MinTimestamp == NoTimestamp || ts < info.MinTimestamp) {
		info.MinTimestamp = ts
	}
	if v.key == nil {
		info.NullKeys++
	}
	info.Records++
	return nil
}

// NextBatch splits the first batch off b, which holds consecutive batches
// (a produce request's records or a read from a log), returning it, the
// bytes after it and its header. It checks the header and that the whole
// batch is present, not the CRC or the records. A partial batch at the end
// fails with ErrTruncated, as does an empty b; callers loop while len(rest)
// is not zero. The returned batch has its capacity capped at its length,
// so appending to it cannot overwrite rest.
func NextBatch(b []byte) (batch, rest []byte, h BatchHeader, err error) {
	h, err = ParseBatchHeader(b)
	if err != nil {
		return nil, b, h, fmt.Errorf("next batch: %w", err)
	}
	n := h.Size()
	return b[:n:n], b[n:], h, nil
}

// DecodeBatch checks the CRC of the one batch in batch, decompresses its
// records (at most limit bytes) and calls fn for each. A malformed batch
// fails with an error wrapping ErrCorrupt, ErrTruncated, ErrMagic,
// ErrUnsupportedCodec or ErrUncompressedTooLarge, before fn is first
// called; an error from fn is returned as it is. Record keys and values
// alias batch (or, for a compressed batch, a buffer of their own), so they
// stay valid after fn returns.
func DecodeBatch(batch []byte, limit int, fn func(h *BatchHeader, r Record) error) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	if len(batch) != h.Size() {
		return fmt.Errorf("decode batch: %w: %d bytes after the batch", ErrCorrupt, len(batch)-h.Size())
	}
	if err := VerifyCRC(batch); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	codec := h.Codec()
	if codec > CodecZstd {
		return fmt.Errorf("decode batch: %w: attribute codec %d", ErrUnsupportedCodec, int8(codec))
	}
	records := batch[BatchHeaderSize:]
	if codec != CodecNone {
		if records, err = decompressAppend(codec, nil, records, limit); err != nil {
			return fmt.Errorf("decode batch: %w", err)
		}
	}
	var fnErr error
	err = ReadRecords(records, h.NumRecords, func(r Record) error {
		fnErr = fn(&h, r)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	return nil
}

// BuildBatch encodes recs as one magic-2 batch compressed with c. From h it
// takes the base offset, partition leader epoch, attributes other than the
// codec, timestamps, producer id and epoch and base sequence; it sets the
// magic, length, record count, codec, CRC and LastOffsetDelta, which is the
// last record's offset delta (h's own when recs is empty, as compaction
// leaves it). Records are written as given; nothing checks their deltas.
func BuildBatch(h BatchHeader, recs []Record, c Codec) ([]byte, error) {
	if c < CodecNone || c > CodecZstd {
		return nil, fmt.Errorf("build batch: %w: %s", ErrUnsupportedCodec, c)
	}
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("build batch: %d records", len(recs))
	}
	size := 0
	for i := range recs {
		if body := recordBodySize(&recs[i]); body > maxRecordBodySize {
			return nil, fmt.Errorf("build batch: record %d encodes to %d bytes", i, body)
		}
		size += recordSize(&recs[i])
	}

	var out []byte
	if c == CodecNone {
		out = make([]byte, BatchHeaderSize, BatchHeaderSize+size)
		for i := range recs {
			out = AppendRecord(out, recs[i])
		}
	} else {
		raw := make([]byte, 0, size)
		for i := range recs {
			raw = AppendRecord(raw, recs[i])
		}
		var err error
		if out, err = Compress(c, make([]byte, BatchHeaderSize), raw); err != nil {
			return nil, fmt.Errorf("build batch: %w", err)
		}
	}
	if len(out)-12 > math.MaxInt32 {
		return nil, fmt.Errorf("build batch: batch of %d bytes", len(out))
	}

	h.Magic = 2
	h.BatchLength = int32(len(out) - 12)
	h.NumRecords = int32(len(recs))
	if len(recs) > 0 {
		h.LastOffsetDelta = recs[len(recs)-1].OffsetDelta
	}
	h.Attributes = h.Attributes&^AttrCompressionMask | int16(c)
	putBatchHeader(out, &h)
	binary.BigEndian.PutUint32(out[offCRC:], BatchCRC(out))
	return out, nil
}

// putBatchHeader writes h into the first BatchHeaderSize bytes of b, all but
// the CRC, which covers what this writes.
func putBatchHeader(b []byte, h *BatchHeader) {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(h.BatchLength))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = byte(h.Magic)
	be.PutUint16(b[offAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offFirstTimestamp:], uint64(h.FirstTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offNumRecords:], uint32(h.NumRecords))
}
