// Package compact is the binary encoding the metadata records, the image
// snapshots and the messages between metadata nodes share: varints (zigzag
// for signed integers), length-prefixed strings and arrays, and -1 lengths
// for null, as Kafka's compact encodings. Decoding never panics and never
// allocates more than the bytes left could hold.
//
// It sits below every other raftmeta package and imports none of them.
package compact

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort is wrapped by the error of a decoding that ends before a field
// it promises.
var ErrShort = errors.New("truncated")

// Encoder appends the compact binary form of values to Buf.
// Integers are varints (zigzag for signed), strings and arrays are length
// prefixed, and nullable values use a length of -1 for null, as Kafka's
// compact encodings do.
type Encoder struct {
	Buf []byte
}

// Uvarint encodes v as an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.Buf = binary.AppendUvarint(e.Buf, v) }

// Varint encodes v as a zigzag varint.
func (e *Encoder) Varint(v int64) { e.Buf = binary.AppendVarint(e.Buf, v) }

// Int8 encodes v as one byte.
func (e *Encoder) Int8(v int8) { e.Buf = append(e.Buf, byte(v)) }

// Int16 encodes v as a zigzag varint.
func (e *Encoder) Int16(v int16) { e.Varint(int64(v)) }

// Int32 encodes v as a zigzag varint.
func (e *Encoder) Int32(v int32) { e.Varint(int64(v)) }

// Int64 encodes v as a zigzag varint.
func (e *Encoder) Int64(v int64) { e.Varint(v) }

// UUID encodes v as its 16 bytes.
func (e *Encoder) UUID(v [16]byte) { e.Buf = append(e.Buf, v[:]...) }

// Bool encodes v as one byte, 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.Buf = append(e.Buf, 1)
	} else {
		e.Buf = append(e.Buf, 0)
	}
}

// Str encodes s with its length.
func (e *Encoder) Str(s string) {
	e.Uvarint(uint64(len(s)))
	e.Buf = append(e.Buf, s...)
}

// NullableString encodes s with its length, -1 for nil.
func (e *Encoder) NullableString(s *string) {
	if s == nil {
		e.Varint(-1)
		return
	}
	e.Varint(int64(len(*s)))
	e.Buf = append(e.Buf, *s...)
}

// Int32s encodes a nullable array: nil and empty are distinct.
func (e *Encoder) Int32s(v []int32) {
	if v == nil {
		e.Varint(-1)
		return
	}
	e.Varint(int64(len(v)))
	for _, x := range v {
		e.Int32(x)
	}
}

// Decoder reads what Encoder wrote from Buf. The first failure is kept in
// Err and every later read returns a zero value, so decode functions read
// all fields and check Err once. Lengths are checked against the bytes left
// before anything is allocated, so garbage cannot cause a large allocation.
type Decoder struct {
	Buf []byte
	Err error
	// Version is the version of the record being decoded, for fields
	// added in later versions.
	Version uint64
}

// Fail records the decoding's first error; later reads return zero values.
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf(format, args...)
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.Buf)
	if n <= 0 {
		d.Fail("bad uvarint: %w", ErrShort)
		return 0
	}
	d.Buf = d.Buf[n:]
	return v
}

// Varint reads a zigzag varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.Buf)
	if n <= 0 {
		d.Fail("bad varint: %w", ErrShort)
		return 0
	}
	d.Buf = d.Buf[n:]
	return v
}

// Int8 reads one byte.
func (d *Decoder) Int8() int8 {
	if d.Err != nil {
		return 0
	}
	if len(d.Buf) < 1 {
		d.Fail("int8: %w", ErrShort)
		return 0
	}
	v := int8(d.Buf[0])
	d.Buf = d.Buf[1:]
	return v
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	switch b := d.Int8(); b {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Fail("bool: invalid byte %d", b)
		return false
	}
}

// Int16 reads a varint that must fit 16 bits.
func (d *Decoder) Int16() int16 {
	v := d.Varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.Fail("int16 out of range: %d", v)
		return 0
	}
	return int16(v)
}

// Int32 reads a varint that must fit 32 bits.
func (d *Decoder) Int32() int32 {
	v := d.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail("int32 out of range: %d", v)
		return 0
	}
	return int32(v)
}

// Int64 reads a varint.
func (d *Decoder) Int64() int64 { return d.Varint() }

// UUID reads 16 bytes.
func (d *Decoder) UUID() [16]byte {
	var v [16]byte
	if d.Err != nil {
		return v
	}
	if len(d.Buf) < 16 {
		d.Fail("uuid: %w", ErrShort)
		return v
	}
	copy(v[:], d.Buf)
	d.Buf = d.Buf[16:]
	return v
}

// BytesOf returns the next n bytes, which alias Buf.
func (d *Decoder) BytesOf(n uint64) []byte {
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.Buf)) {
		d.Fail("length %d exceeds %d remaining bytes: %w", n, len(d.Buf), ErrShort)
		return nil
	}
	b := d.Buf[:n]
	d.Buf = d.Buf[n:]
	return b
}

// Str reads what Encoder.Str wrote.
func (d *Decoder) Str() string {
	return string(d.BytesOf(d.Uvarint()))
}

// NullableString reads what Encoder.NullableString wrote.
func (d *Decoder) NullableString() *string {
	n := d.Varint()
	if d.Err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < 0 {
		d.Fail("negative string length %d", n)
		return nil
	}
	s := string(d.BytesOf(uint64(n)))
	if d.Err != nil {
		return nil
	}
	return &s
}

// Int32s reads what Encoder.Int32s wrote.
func (d *Decoder) Int32s() []int32 {
	n := d.Varint()
	if d.Err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	// Each element takes at least one byte, which bounds the allocation.
	if n < 0 || n > int64(len(d.Buf)) {
		d.Fail("bad array length %d with %d bytes left", n, len(d.Buf))
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.Int32()
	}
	if d.Err != nil {
		return nil
	}
	return v
}

// Count reads an array length that must be non-negative and no larger than
// the bytes left divided by min, the smallest encoding of one element.
func (d *Decoder) Count(min int) int {
	n := d.Uvarint()
	if d.Err != nil {
		return 0
	}
	if n > uint64(len(d.Buf)/min) {
		d.Fail("count %d too large for %d bytes left", n, len(d.Buf))
		return 0
	}
	return int(n)
}

// Strs encodes a non-nullable array of strings.
func (e *Encoder) Strs(v []string) {
	e.Uvarint(uint64(len(v)))
	for _, s := range v {
		e.Str(s)
	}
}

// Strs reads what Encoder.Strs wrote.
func (d *Decoder) Strs() []string {
	n := d.Count(1)
	var v []string
	for i := 0; i < n && d.Err == nil; i++ {
		v = append(v, d.Str())
	}
	return v
}

// Finish fails d if bytes are left over, and returns its error wrapped
// with what was being decoded.
func (d *Decoder) Finish(what string) error {
	if d.Err == nil && len(d.Buf) != 0 {
		d.Fail("%d trailing bytes", len(d.Buf))
	}
	if d.Err != nil {
		return fmt.Errorf("decode %s: %w", what, d.Err)
	}
	return nil
}
