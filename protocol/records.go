package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Header is a record header. Kafka never reads headers; they are for
// producers and consumers.
type Header struct {
	Key   string
	Value []byte // nil is a null value
}

// Record is one record of a magic-2 batch (Kafka's record format v2). Its
// offset and timestamp are deltas from the batch's base offset and first
// timestamp.
type Record struct {
	Attributes     int8 // unused by Kafka so far
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil is a null key
	Value          []byte // nil is a null value (a tombstone)
	Headers        []Header
}

// AppendRecord appends r in record format v2: a varint length, then the
// attributes, the timestamp and offset deltas, the key, the value and the
// headers, with every length and delta a zigzag varint and -1 standing for
// null. A record must encode to less than 2 GiB; BuildBatch checks this.
func AppendRecord(dst []byte, r Record) []byte {
	dst = appendZigzag32(dst, int32(recordBodySize(&r)))
	dst = append(dst, byte(r.Attributes))
	dst = appendZigzag64(dst, r.TimestampDelta)
	dst = appendZigzag32(dst, r.OffsetDelta)
	dst = appendNullableBytes(dst, r.Key)
	dst = appendNullableBytes(dst, r.Value)
	dst = appendZigzag32(dst, int32(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendZigzag32(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullableBytes(dst, h.Value)
	}
	return dst
}

// recordBodySize is the encoded size of r after its length prefix.
func recordBodySize(r *Record) int {
	n := 1 + zigzag64Len(r.TimestampDelta) + zigzag64Len(int64(r.OffsetDelta)) +
		nullableBytesLen(r.Key) + nullableBytesLen(r.Value) + zigzag64Len(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += zigzag64Len(int64(len(h.Key))) + len(h.Key) + nullableBytesLen(h.Value)
	}
	return n
}

// recordSize is the encoded size of r including its length prefix.
func recordSize(r *Record) int {
	body := recordBodySize(r)
	return zigzag64Len(int64(body)) + body
}

// ReadRecords parses exactly n records from uncompressed record bytes (a
// batch's records section) and calls fn for each in order. Every record is
// checked before fn is first called, so fn never sees part of a malformed
// batch. Malformed input (a count that does not match the records present,
// a length running past the end, a negative length other than -1 for null,
// a null header key, bytes left over) fails with an error wrapping
// ErrCorrupt. An error from fn is returned as it is.
//
// Keys, values and header values alias data; header keys are copied.
func ReadRecords(data []byte, n int32, fn func(Record) error) error {
	if err := walkRecords(data, n); err != nil {
		return fmt.Errorf("read records: %w: %w", ErrCorrupt, err)
	}
	it := recordIter{data: data, n: n}
	for {
		var v recordView
		more, err := it.next(&v)
		if err != nil {
			// walkRecords accepted these bytes, so this cannot happen.
			return fmt.Errorf("read records: %w: %w", ErrCorrupt, err)
		}
		if !more {
			return nil
		}
		r := Record{
			Attributes:     v.attributes,
			TimestampDelta: v.timestampDelta,
			OffsetDelta:    v.offsetDelta,
			Key:            v.key,
			Value:          v.value,
		}
		if v.numHeaders > 0 {
			r.Headers = decodeHeaders(v.headers, v.numHeaders)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// recordView is a parsed record whose slices alias the input. Headers are
// left encoded, so parsing allocates nothing.
type recordView struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key            []byte
	value          []byte
	numHeaders     int32
	headers        []byte
}

// walkRecords checks that data holds exactly n well-formed records.
func walkRecords(data []byte, n int32) error {
	it := recordIter{data: data, n: n}
	var v recordView
	for {
		more, err := it.next(&v)
		if err != nil || !more {
			return err
		}
	}
}

// recordIter steps through the n records of a records section. It is a
// struct rather than a callback so that the recordView filled in stays on
// the caller's stack and walking allocates nothing.
type recordIter struct {
	data []byte
	pos  int
	n, i int32
}

// next parses the next record into v. It returns false once n records have
// been read and nothing follows them, and an error if the records run out
// early, one is malformed, or bytes follow the last.
func (it *recordIter) next(v *recordView) (bool, error) {
	if it.n < 0 {
		return false, fmt.Errorf("negative record count %d", it.n)
	}
	if it.i == it.n {
		if it.pos != len(it.data) {
			return false, fmt.Errorf("%d bytes after the %d records the batch claims",
				len(it.data)-it.pos, it.n)
		}
		return false, nil
	}
	if it.pos == len(it.data) {
		return false, fmt.Errorf("batch claims %d records, holds %d", it.n, it.i)
	}
	next, err := parseRecord(it.data, it.pos, v)
	if err != nil {
		return false, fmt.Errorf("record %d at byte %d: %w", it.i, it.pos, err)
	}
	it.pos = next
	it.i++
	return true, nil
}

// parseRecord parses the record starting at data[pos] into v and returns the
// position after it. All reads stay inside the record's stated length.
func parseRecord(data []byte, pos int, v *recordView) (int, error) {
	length, p, err := readZigzag32(data, pos)
	if err != nil {
		return 0, fmt.Errorf("length: %w", err)
	}
	if length < 0 {
		return 0, fmt.Errorf("negative length %d", length)
	}
	if int(length) > len(data)-p {
		return 0, fmt.Errorf("length %d runs past the end (%d bytes left)", length, len(data)-p)
	}
	end := p + int(length)
	body := data[:end]
	if p >= end {
		return 0, errors.New("empty record")
	}
	v.attributes = int8(body[p])
	p++
	if v.timestampDelta, p, err = readZigzag64(body, p); err != nil {
		return 0, fmt.Errorf("timestamp delta: %w", err)
	}
	if v.offsetDelta, p, err = readZigzag32(body, p); err != nil {
		return 0, fmt.Errorf("offset delta: %w", err)
	}
	if v.key, p, err = readNullableBytes(body, p); err != nil {
		return 0, fmt.Errorf("key: %w", err)
	}
	if v.value, p, err = readNullableBytes(body, p); err != nil {
		return 0, fmt.Errorf("value: %w", err)
	}
	if v.numHeaders, p, err = readZigzag32(body, p); err != nil {
		return 0, fmt.Errorf("header count: %w", err)
	}
	if v.numHeaders < 0 {
		return 0, fmt.Errorf("negative header count %d", v.numHeaders)
	}
	start := p
	// Each header takes at least two bytes, so this loop is bounded by the
	// record's length whatever the count claims.
	for i := range v.numHeaders {
		var klen int32
		if klen, p, err = readZigzag32(body, p); err != nil {
			return 0, fmt.Errorf("header %d key length: %w", i, err)
		}
		if klen < 0 {
			return 0, fmt.Errorf("header %d: null or negative key length %d", i, klen)
		}
		if int(klen) > end-p {
			return 0, fmt.Errorf("header %d key length %d runs past the record", i, klen)
		}
		p += int(klen)
		if _, p, err = readNullableBytes(body, p); err != nil {
			return 0, fmt.Errorf("header %d value: %w", i, err)
		}
	}
	v.headers = body[start:p]
	if p != end {
		return 0, fmt.Errorf("%d bytes after the fields, inside the record's length", end-p)
	}
	return end, nil
}

// decodeHeaders decodes n headers that parseRecord has already checked.
func decodeHeaders(b []byte, n int32) []Header {
	hs := make([]Header, n)
	p := 0
	for i := range hs {
		klen, next, _ := readZigzag32(b, p)
		p = next + int(klen)
		hs[i].Key = string(b[next:p])
		hs[i].Value, p, _ = readNullableBytes(b, p)
	}
	return hs
}

var (
	errVarintTruncated = errors.New("varint runs past the end")
	errVarintOverflow  = errors.New("varint overflows")
)

// readZigzag32 reads a zigzag varint as Kafka's ByteUtils.readVarint does:
// at most five bytes. Unlike Java it rejects bits beyond the 32nd instead of
// dropping them.
func readZigzag32(b []byte, p int) (int32, int, error) {
	// Most lengths and deltas fit one byte, a 1 KiB record's length and
	// value length two: these inline into the record walk, a call per
	// field was a third of its time.
	if p+1 < len(b) {
		if c := b[p]; c < 0x80 {
			x := uint32(c)
			return int32(x>>1) ^ -int32(x&1), p + 1, nil
		} else if d := b[p+1]; d < 0x80 {
			x := uint32(c&0x7f) | uint32(d)<<7
			return int32(x>>1) ^ -int32(x&1), p + 2, nil
		}
	}
	return readZigzag32Long(b, p)
}

// readZigzag32Long is readZigzag32 for the varints of three bytes or
// more, or at the end of b.
func readZigzag32Long(b []byte, p int) (int32, int, error) {
	var x uint32
	for shift := uint(0); shift < 35; shift += 7 {
		if p >= len(b) {
			return 0, p, errVarintTruncated
		}
		c := b[p]
		p++
		if shift == 28 && c > 0x0f {
			return 0, p, errVarintOverflow
		}
		x |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return int32(x>>1) ^ -int32(x&1), p, nil
		}
	}
	return 0, p, errVarintOverflow
}

// readZigzag64 reads a zigzag varlong: at most ten bytes.
func readZigzag64(b []byte, p int) (int64, int, error) {
	if p < len(b) && b[p] < 0x80 {
		x := uint64(b[p])
		return int64(x>>1) ^ -int64(x&1), p + 1, nil
	}
	var x uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if p >= len(b) {
			return 0, p, errVarintTruncated
		}
		c := b[p]
		p++
		if shift == 63 && c > 0x01 {
			return 0, p, errVarintOverflow
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(x>>1) ^ -int64(x&1), p, nil
		}
	}
	return 0, p, errVarintOverflow
}

// readNullableBytes reads a varint length and that many bytes; -1 is null.
// The returned slice aliases b and is non-nil for an empty, non-null value.
func readNullableBytes(b []byte, p int) ([]byte, int, error) {
	n, p, err := readZigzag32(b, p)
	if err != nil {
		return nil, p, err
	}
	switch {
	case n == -1:
		return nil, p, nil
	case n < 0:
		return nil, p, fmt.Errorf("negative length %d", n)
	case int(n) > len(b)-p:
		return nil, p, fmt.Errorf("length %d runs past the record (%d bytes left)", n, len(b)-p)
	}
	return b[p : p+int(n) : p+int(n)], p + int(n), nil
}

func appendZigzag32(dst []byte, v int32) []byte {
	return binary.AppendUvarint(dst, uint64(uint32(v<<1)^uint32(v>>31)))
}

func appendZigzag64(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 1) // zigzag(-1)
	}
	dst = appendZigzag32(dst, int32(len(b)))
	return append(dst, b...)
}

// zigzag64Len is the encoded size of v as a zigzag varint. For values that
// fit an int32 it is also the size appendZigzag32 writes.
func zigzag64Len(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return max(1, (bits.Len64(u)+6)/7)
}

func nullableBytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return zigzag64Len(int64(len(b))) + len(b)
}

// maxRecordBodySize is the largest body a record's int32 length can state.
const maxRecordBodySize = math.MaxInt32
