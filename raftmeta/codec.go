package raftmeta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// errShort is returned when an encoding ends before a field it promises.
var errShort = errors.New("truncated")

// encoder appends the compact binary form of metadata values to buf.
// Integers are varints (zigzag for signed), strings and arrays are length
// prefixed, and nullable values use a length of -1 for null, as Kafka's
// compact encodings do.
type encoder struct {
	buf []byte
}

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) int8(v int8)      { e.buf = append(e.buf, byte(v)) }
func (e *encoder) int16(v int16)    { e.varint(int64(v)) }
func (e *encoder) int32(v int32)    { e.varint(int64(v)) }
func (e *encoder) int64(v int64)    { e.varint(v) }
func (e *encoder) uuid(v [16]byte)  { e.buf = append(e.buf, v[:]...) }

func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) nullableString(s *string) {
	if s == nil {
		e.varint(-1)
		return
	}
	e.varint(int64(len(*s)))
	e.buf = append(e.buf, *s...)
}

// int32s encodes a nullable array: nil and empty are distinct.
func (e *encoder) int32s(v []int32) {
	if v == nil {
		e.varint(-1)
		return
	}
	e.varint(int64(len(v)))
	for _, x := range v {
		e.int32(x)
	}
}

// decoder reads what encoder wrote. The first failure is kept in err and
// every later read returns a zero value, so decode functions read all
// fields and check err once. Lengths are checked against the bytes left
// before anything is allocated, so garbage cannot cause a large allocation.
type decoder struct {
	buf []byte
	err error
	// version is the version of the record being decoded, for fields
	// added in later versions (see latestVersion).
	version uint64
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("bad uvarint: %w", errShort)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail("bad varint: %w", errShort)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) int8() int8 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 1 {
		d.fail("int8: %w", errShort)
		return 0
	}
	v := int8(d.buf[0])
	d.buf = d.buf[1:]
	return v
}

func (d *decoder) bool() bool {
	switch b := d.int8(); b {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bool: invalid byte %d", b)
		return false
	}
}

func (d *decoder) int16() int16 {
	v := d.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.fail("int16 out of range: %d", v)
		return 0
	}
	return int16(v)
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32 out of range: %d", v)
		return 0
	}
	return int32(v)
}

func (d *decoder) int64() int64 { return d.varint() }

func (d *decoder) uuid() [16]byte {
	var v [16]byte
	if d.err != nil {
		return v
	}
	if len(d.buf) < 16 {
		d.fail("uuid: %w", errShort)
		return v
	}
	copy(v[:], d.buf)
	d.buf = d.buf[16:]
	return v
}

func (d *decoder) bytesOf(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail("length %d exceeds %d remaining bytes: %w", n, len(d.buf), errShort)
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) string() string {
	return string(d.bytesOf(d.uvarint()))
}

func (d *decoder) nullableString() *string {
	n := d.varint()
	if d.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < 0 {
		d.fail("negative string length %d", n)
		return nil
	}
	s := string(d.bytesOf(uint64(n)))
	if d.err != nil {
		return nil
	}
	return &s
}

func (d *decoder) int32s() []int32 {
	n := d.varint()
	if d.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	// Each element takes at least one byte, which bounds the allocation.
	if n < 0 || n > int64(len(d.buf)) {
		d.fail("bad array length %d with %d bytes left", n, len(d.buf))
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.int32()
	}
	if d.err != nil {
		return nil
	}
	return v
}

// count reads an array length that must be non-negative and no larger than
// the bytes left divided by min, the smallest encoding of one element.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.buf)/min) {
		d.fail("count %d too large for %d bytes left", n, len(d.buf))
		return 0
	}
	return int(n)
}
