package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// batchReader reads the whole batches of a segment file in order, through
// a buffer that grows to hold a batch larger than it.
type batchReader struct {
	f        vfs.File
	pos, end int64 // next batch; end of whole batches
	buf      []byte
	bpos     int64 // file position of buf[0]
	blen     int   // valid bytes in buf
	onRead   func(n int)
}

func newBatchReader(f vfs.File, pos, end int64, buf []byte, onRead func(int)) *batchReader {
	return &batchReader{f: f, pos: pos, end: end, buf: buf, onRead: onRead}
}

// next returns the next batch, its header and its position; the bytes are
// valid until the following call. The CRC is checked: the cleaner rewrites
// what it reads and must not launder a corrupt batch. io.EOF at the end.
func (r *batchReader) next() (protocol.BatchHeader, []byte, int64, error) {
	if r.pos >= r.end {
		return protocol.BatchHeader{}, nil, 0, io.EOF
	}
	if err := r.fill(protocol.BatchHeaderSize); err != nil {
		return protocol.BatchHeader{}, nil, 0, err
	}
	off := int(r.pos - r.bpos)
	info, err := decodeBatchPrefix(r.buf[off:off+protocol.BatchHeaderSize], r.pos)
	if err != nil {
		return protocol.BatchHeader{}, nil, 0, fmt.Errorf("batch at %d: %w", r.pos, err)
	}
	if r.pos+info.size > r.end {
		return protocol.BatchHeader{}, nil, 0, fmt.Errorf("batch at %d of %d bytes: %w", r.pos, info.size, errTornBatch)
	}
	if err := r.fill(int(info.size)); err != nil {
		return protocol.BatchHeader{}, nil, 0, err
	}
	off = int(r.pos - r.bpos)
	batch := r.buf[off : off+int(info.size)]
	h, err := protocol.ParseBatchHeader(batch)
	if err == nil {
		err = protocol.VerifyCRC(batch)
	}
	if err != nil {
		return h, nil, 0, fmt.Errorf("batch at %d: %w", r.pos, err)
	}
	pos := r.pos
	r.pos += info.size
	return h, batch, pos, nil
}

// fill makes the n bytes at pos (n <= end-pos) present in buf.
func (r *batchReader) fill(n int) error {
	if r.pos >= r.bpos && r.pos+int64(n) <= r.bpos+int64(r.blen) {
		return nil
	}
	if n > len(r.buf) {
		r.buf = make([]byte, n)
	}
	want := int(min(int64(len(r.buf)), r.end-r.pos))
	m, err := r.f.ReadAt(r.buf[:want], r.pos)
	if m < want {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read %s at %d: %w", r.f.Name(), r.pos, err)
	}
	if r.onRead != nil {
		r.onRead(m)
	}
	r.bpos, r.blen = r.pos, m
	return nil
}

// Control record types, the second int16 of a control record's key
// (Kafka's ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlType reads a control batch's type from its first record's key,
// or -1 if the batch has no records (already cleaned).
func controlType(recs []protocol.Record) int16 {
	if len(recs) == 0 {
		return -1
	}
	k := recs[0].Key
	if len(k) < 4 {
		return math.MaxInt16 // unknown: never discarded
	}
	return int16(binary.BigEndian.Uint16(k[2:]))
}

// abortedTxn is an aborted transaction: its producer, the first offset of
// its records and the offset of its ABORT marker (Kafka's AbortedTxn).
type abortedTxn struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64
}

// txnTracker is Kafka's CleanedTransactionMetadata: walking the log in
// order with the list of aborted transactions, it tells which batches
// belong to aborted transactions (removable) and which markers may go: an
// ABORT marker once no batch of its transaction remains, a COMMIT marker
// once the cleaner saw no batch of its transaction.
type txnTracker struct {
	aborted          []abortedTxn // sorted by firstOffset; next is aborted[i]
	i                int
	ongoingCommitted map[int64]bool
	ongoingAborted   map[int64]*abortedState
}

type abortedState struct {
	txn          abortedTxn
	sawBatchLast int64 // last offset of a batch seen from it, or -1
}

// newTxnTracker tracks from offset start: aborted transactions that ended
// before start are ignored (their batches and markers are not walked).
func newTxnTracker(all []abortedTxn, start int64) *txnTracker {
	t := &txnTracker{ongoingCommitted: map[int64]bool{}, ongoingAborted: map[int64]*abortedState{}}
	for _, a := range all {
		if a.lastOffset >= start {
			t.aborted = append(t.aborted, a)
		}
	}
	return t
}

func (t *txnTracker) consumeUpTo(offset int64) {
	for t.i < len(t.aborted) && t.aborted[t.i].firstOffset <= offset {
		a := t.aborted[t.i]
		t.i++
		if _, ok := t.ongoingAborted[a.producerID]; !ok {
			t.ongoingAborted[a.producerID] = &abortedState{txn: a, sawBatchLast: -1}
		}
	}
}

// onControlBatch returns whether a control batch may be discarded.
func (t *txnTracker) onControlBatch(h *protocol.BatchHeader, typ int16) bool {
	t.consumeUpTo(h.LastOffset())
	switch typ {
	case -1:
		return true // emptied by an earlier cleaning
	case controlAbort:
		st, ok := t.ongoingAborted[h.ProducerID]
		delete(t.ongoingAborted, h.ProducerID)
		// Keep the marker until every batch of its transaction is gone.
		return !(ok && st.sawBatchLast >= 0)
	case controlCommit:
		ok := t.ongoingCommitted[h.ProducerID]
		delete(t.ongoingCommitted, h.ProducerID)
		return !ok
	}
	return false
}

// onBatch returns whether a data batch belongs to an aborted transaction.
func (t *txnTracker) onBatch(h *protocol.BatchHeader) bool {
	t.consumeUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if st, ok := t.ongoingAborted[h.ProducerID]; ok {
		st.sawBatchLast = h.LastOffset()
		return true
	}
	t.ongoingCommitted[h.ProducerID] = true
	return false
}

// decodeRecords returns a batch's records, decompressing with the
// manager's hook. Keys and values alias batch or the decompressed buffer.
func decodeRecords(h *protocol.BatchHeader, batch []byte, decompress func(protocol.Codec, []byte) ([]byte, error), recs []protocol.Record) ([]protocol.Record, error) {
	data := batch[protocol.BatchHeaderSize:]
	if c := h.Codec(); c != protocol.CodecNone {
		if decompress == nil {
			return nil, fmt.Errorf("%w (%s)", ErrNoDecompressor, c)
		}
		var err error
		if data, err = decompress(c, data); err != nil {
			return nil, fmt.Errorf("decompress %s batch at offset %d: %w", c, h.BaseOffset, err)
		}
	}
	recs = recs[:0]
	err := protocol.ReadRecords(data, h.NumRecords, func(r protocol.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	return recs, nil
}

// recordTimestamp is a record's timestamp as Kafka reads it: the batch's
// max timestamp under LogAppendTime.
func recordTimestamp(h *protocol.BatchHeader, r *protocol.Record) int64 {
	if h.HasLogAppendTime() {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + r.TimestampDelta
}

// rebuildBatch writes the retained records of a batch as Kafka's
// buildRetainedRecordsInto: the same base offset, last offset (so that the
// producer's last sequence survives), leader epoch, producer, sequence,
// timestamp type, transactional and control flags and codec; records keep
// their offsets and timestamps. deleteHorizon >= 0 sets the delete
// horizon flag and makes it the base timestamp. The records are
// recompressed with the batch's codec.
func rebuildBatch(h *protocol.BatchHeader, recs []protocol.Record, deleteHorizon int64, compress func(protocol.Codec, []byte, []byte) ([]byte, error)) ([]byte, error) {
	base := deleteHorizon
	if base < 0 {
		base = recordTimestamp(h, &recs[0])
	}
	maxTs := int64(noTimestamp)
	raw := make([]byte, 0, 64*len(recs))
	for i := range recs {
		r := recs[i]
		ts := recordTimestamp(h, &r)
		maxTs = max(maxTs, ts)
		r.Attributes = 0
		r.TimestampDelta = ts - base
		raw = protocol.AppendRecord(raw, r)
	}
	if h.HasLogAppendTime() {
		maxTs = h.MaxTimestamp
	}
	out := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(raw))
	if c := h.Codec(); c == protocol.CodecNone {
		out = append(out, raw...)
	} else {
		if compress == nil {
			return nil, fmt.Errorf("%w (%s)", ErrNoCompressor, c)
		}
		var err error
		if out, err = compress(c, out, raw); err != nil {
			return nil, fmt.Errorf("recompress %s batch at offset %d: %w", c, h.BaseOffset, err)
		}
	}
	if len(out)-12 > math.MaxInt32 {
		return nil, fmt.Errorf("rebuilt batch at offset %d: %d bytes", h.BaseOffset, len(out))
	}
	attrs := h.Attributes &^ protocol.AttrDeleteHorizon
	if deleteHorizon >= 0 {
		attrs |= protocol.AttrDeleteHorizon
	}
	putHeader(out, h, int32(len(recs)), attrs, base, maxTs)
	return out, nil
}

// emptyBatch is Kafka's writeEmptyHeader: a batch without records that
// keeps a producer's last sequence and epoch, or a cleaning round's last
// offset.
func emptyBatch(h *protocol.BatchHeader) []byte {
	out := make([]byte, protocol.BatchHeaderSize)
	attrs := h.Attributes &^ (protocol.AttrCompressionMask | protocol.AttrDeleteHorizon)
	putHeader(out, h, 0, attrs, noTimestamp, h.MaxTimestamp)
	return out
}

// putHeader fills in a batch header from h with the given record count,
// attributes and timestamps, then the length and the CRC over everything
// after it. The field positions are fixed by Kafka's magic-2 format.
func putHeader(b []byte, h *protocol.BatchHeader, n int32, attrs int16, firstTs, maxTs int64) {
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], uint32(h.PartitionLeaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[27:], uint64(firstTs))
	be.PutUint64(b[35:], uint64(maxTs))
	be.PutUint64(b[43:], uint64(h.ProducerID))
	be.PutUint16(b[51:], uint16(h.ProducerEpoch))
	be.PutUint32(b[53:], uint32(h.BaseSequence))
	be.PutUint32(b[57:], uint32(n))
	be.PutUint32(b[17:], protocol.BatchCRC(b))
}

// hasDeleteHorizon reports whether a batch carries a delete horizon, which
// is then its first timestamp (Kafka's deleteHorizonMs).
func hasDeleteHorizon(h *protocol.BatchHeader) bool {
	return h.Attributes&protocol.AttrDeleteHorizon != 0
}
