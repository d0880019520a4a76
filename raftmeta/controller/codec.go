package controller

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// The requests and answers of the controller rpcs (rpc.go) are Go values
// written in the compact encoding by their shape, so that a call needs no
// codec of its own:
//
//	bool, integers     as compact writes them
//	string             length-prefixed
//	[16]byte           its 16 bytes (topic IDs, incarnation IDs)
//	slice, map         -1 for nil, else a count and the elements (a map's
//	                   as key, value pairs), so nil and empty stay apart
//	pointer            0 for nil, else 1 and the value
//	struct             its exported fields in order
//	error              a Kafka error code, and unless it is 0 the message
//	                   (*Error on the receiving side; see putErr)
//
// Both sides of a call run the same version (the format carries none), and
// a decoder checks every length against the bytes left before it
// allocates, so garbage yields an error, never a panic or a large
// allocation.

var errorType = reflect.TypeFor[error]()

// encodeValue returns the encoding of v.
func encodeValue[T any](v T) []byte {
	e := compact.Encoder{}
	putValue(&e, reflect.ValueOf(&v).Elem())
	return e.Buf
}

// decodeValue decodes a T that fills b exactly.
func decodeValue[T any](b []byte) (T, error) {
	var v T
	d := compact.Decoder{Buf: b}
	getValue(&d, reflect.ValueOf(&v).Elem())
	if err := d.Finish(reflect.TypeFor[T]().String()); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

func putValue(e *compact.Encoder, v reflect.Value) {
	t := v.Type()
	if t == errorType {
		var err error
		if !v.IsNil() {
			err = v.Interface().(error)
		}
		putErr(e, err)
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		e.Bool(v.Bool())
	case reflect.Int8:
		e.Int8(int8(v.Int()))
	case reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		e.Varint(v.Int())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.Uvarint(v.Uint())
	case reflect.String:
		e.Str(v.String())
	case reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 || t.Len() != 16 {
			panic(fmt.Sprintf("controller rpc codec: unsupported array %s", t))
		}
		var id [16]byte
		reflect.Copy(reflect.ValueOf(&id).Elem(), v)
		e.UUID(id)
	case reflect.Slice:
		if v.IsNil() {
			e.Varint(-1)
			return
		}
		e.Varint(int64(v.Len()))
		for i := range v.Len() {
			putValue(e, v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			e.Varint(-1)
			return
		}
		e.Varint(int64(v.Len()))
		for it := v.MapRange(); it.Next(); {
			putValue(e, it.Key())
			putValue(e, it.Value())
		}
	case reflect.Pointer:
		e.Bool(!v.IsNil())
		if !v.IsNil() {
			putValue(e, v.Elem())
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				putValue(e, v.Field(i))
			}
		}
	default:
		panic(fmt.Sprintf("controller rpc codec: unsupported type %s", t))
	}
}

func getValue(d *compact.Decoder, v reflect.Value) {
	if d.Err != nil {
		return
	}
	t := v.Type()
	if t == errorType {
		if err := getErr(d); err != nil {
			v.Set(reflect.ValueOf(err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(d.Bool())
	case reflect.Int8:
		v.SetInt(int64(d.Int8()))
	case reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		n := d.Varint()
		if v.OverflowInt(n) {
			d.Fail("%s out of range: %d", t, n)
			return
		}
		v.SetInt(n)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := d.Uvarint()
		if v.OverflowUint(n) {
			d.Fail("%s out of range: %d", t, n)
			return
		}
		v.SetUint(n)
	case reflect.String:
		v.SetString(d.Str())
	case reflect.Array:
		id := d.UUID()
		reflect.Copy(v, reflect.ValueOf(id))
	case reflect.Slice:
		n := getLen(d, t.Elem())
		if n < 0 {
			return
		}
		s := reflect.MakeSlice(t, n, n)
		for i := 0; i < n && d.Err == nil; i++ {
			getValue(d, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		n := getLen(d, t.Key())
		if n < 0 {
			return
		}
		m := reflect.MakeMapWithSize(t, n)
		for i := 0; i < n && d.Err == nil; i++ {
			k := reflect.New(t.Key()).Elem()
			getValue(d, k)
			val := reflect.New(t.Elem()).Elem()
			getValue(d, val)
			m.SetMapIndex(k, val)
		}
		v.Set(m)
	case reflect.Pointer:
		if d.Bool() {
			p := reflect.New(t.Elem())
			getValue(d, p.Elem())
			v.Set(p)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				getValue(d, v.Field(i))
			}
		}
	default:
		panic(fmt.Sprintf("controller rpc codec: unsupported type %s", t))
	}
}

// getLen reads a nullable count of elements of type elem: -1 for nil, and
// an error for a count the bytes left cannot hold.
func getLen(d *compact.Decoder, elem reflect.Type) int {
	n := d.Varint()
	switch {
	case d.Err != nil || n == -1:
		return -1
	case n < 0 || n > int64(len(d.Buf)/minSize(elem)):
		d.Fail("bad count %d of %s with %d bytes left", n, elem, len(d.Buf))
		return -1
	}
	return int(n)
}

// minSize is the fewest bytes an encoded value of type t takes, at least 1
// so that a count is bounded by the bytes left.
func minSize(t reflect.Type) int {
	switch {
	case t == errorType:
		return 1
	case t.Kind() == reflect.Array:
		return 16
	case t.Kind() == reflect.Struct:
		n := 0
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				n += minSize(t.Field(i).Type)
			}
		}
		return max(n, 1)
	default:
		return 1
	}
}

// putErr writes err as a Kafka error code and, unless it is nil, the
// message to send with it: an *Error's own message, or the text of an
// error that carries no Kafka code. It is the form raftnode.AppendCallError
// writes a whole call's error in.
func putErr(e *compact.Encoder, err error) {
	if err == nil {
		e.Buf = raftnode.AppendCallError(e.Buf, 0, nil)
		return
	}
	msg := ErrorMessage(err)
	if _, ok := errors.AsType[*kerr.Error](err); !ok {
		s := err.Error()
		msg = &s
	}
	e.Buf = raftnode.AppendCallError(e.Buf, ErrorCode(err), msg)
}

// getErr reads what putErr wrote.
func getErr(d *compact.Decoder) error {
	code := d.Int16()
	if d.Err != nil || code == 0 {
		return nil
	}
	msg := d.NullableString()
	e := &Error{Code: kerr.TypedErrorForCode(code)}
	if msg != nil {
		e.Message = *msg
	}
	return e
}
