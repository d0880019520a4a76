package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendRecordGolden checks two records against bytes derived by hand
// from the record format v2 spec.
func TestAppendRecordGolden(t *testing.T) {
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{
			name: "key and value",
			r:    Record{Key: []byte("a"), Value: []byte("xyz")},
			// length 10, attributes 0, timestamp delta 0, offset delta 0,
			// key length 1 (zigzag 2) "a", value length 3 (zigzag 6)
			// "xyz", 0 headers.
			want: "14 00 00 00 02 61 06 78 79 7a 00",
		},
		{
			name: "null key, empty value, a header with a null value",
			r: Record{TimestampDelta: 5, OffsetDelta: 1, Value: []byte{},
				Headers: []Header{{Key: "h"}}},
			// length 9, attributes 0, timestamp delta 5 (zigzag 10),
			// offset delta 1 (zigzag 2), key -1 (zigzag 1), value length
			// 0, 1 header (zigzag 2): key length 1 "h", value -1.
			want: "12 00 0a 02 01 00 02 02 68 01",
		},
		{
			name: "negative deltas and multi-byte varints",
			r:    Record{Attributes: 3, TimestampDelta: -65, OffsetDelta: 64, Value: bytes.Repeat([]byte{7}, 64)},
			// length 73 (zigzag 146 = 92 01), attributes 3, timestamp
			// delta -65 (zigzag 129 = 81 01), offset delta 64 (zigzag 128
			// = 80 01), key -1, value length 64 (zigzag 128 = 80 01), 64
			// sevens, 0 headers.
			want: "92 01 03 81 01 80 01 01 80 01" + strings.Repeat(" 07", 64) + " 00",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.want)
			got := AppendRecord([]byte{0xaa}, tt.r)
			if !bytes.Equal(got[1:], want) || got[0] != 0xaa {
				t.Fatalf("AppendRecord\n got % x\nwant   % x", got, want)
			}
			if n := recordSize(&tt.r); n != len(want) {
				t.Fatalf("recordSize = %d, want %d", n, len(want))
			}
		})
	}
}

func testRecords() []Record {
	return []Record{
		{OffsetDelta: 0, Key: []byte("key"), Value: []byte("value")},
		{OffsetDelta: 1, Key: nil, Value: nil}, // a tombstone with no key
		{OffsetDelta: 2, Key: []byte{}, Value: []byte{}, TimestampDelta: -1},
		{OffsetDelta: 3, TimestampDelta: math.MaxInt64, Attributes: -1, Value: []byte("v"),
			Headers: []Header{{Key: "trace", Value: []byte("abc")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}},
		{OffsetDelta: 4, TimestampDelta: math.MinInt64, Value: bytes.Repeat([]byte("big"), 10000)},
		{OffsetDelta: math.MaxInt32, Value: []byte("last")},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	recs := testRecords()
	var data []byte
	for _, r := range recs {
		data = AppendRecord(data, r)
	}
	var got []Record
	err := ReadRecords(data, int32(len(recs)), func(r Record) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// DeepEqual tells nil from empty, so null and empty keys must survive.
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, recs)
	}
}

// TestAppendRecordMatchesKmsg encodes the same records with franz-go's kmsg
// and with AppendRecord.
func TestAppendRecordMatchesKmsg(t *testing.T) {
	for i, r := range testRecords() {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      r.OffsetDelta,
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(recordBodySize(&r))
		want := kr.AppendTo(nil)
		if got := AppendRecord(nil, r); !bytes.Equal(got, want) {
			t.Errorf("record %d\n got % x\nwant % x", i, got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
		var back kmsg.Record
		if err := back.ReadFrom(want); err != nil || back.Length != int32(len(want)-zigzag64Len(int64(back.Length))) {
			t.Errorf("record %d: kmsg reads length %d, err %v", i, back.Length, err)
		}
	}
}

func TestReadRecordsRejects(t *testing.T) {
	one := AppendRecord(nil, Record{Key: []byte("k"), Value: []byte("v")})
	two := AppendRecord(bytes.Clone(one), Record{OffsetDelta: 1, Value: []byte("w")})
	tests := []struct {
		name string
		data []byte
		n    int32
	}{
		{"count too high", two, 3},
		{"count too low", two, 1},
		{"negative count", two, -1},
		{"no data", nil, 1},
		{"negative record length", unhex(t, "01 00 00 00 01 01 00"), 1},
		{"record length past end", unhex(t, "20 00 00 00 01 01 00"), 1},
		{"record length zero", unhex(t, "00"), 1},
		{"length varint truncated", unhex(t, "80"), 1},
		{"length varint too long", unhex(t, "80 80 80 80 80 01"), 1},
		{"length varint overflows 32 bits", unhex(t, "80 80 80 80 10"), 1},
		{"key length -2", unhex(t, "0c 00 00 00 03 01 00"), 1},
		{"key past record", unhex(t, "0c 00 00 00 08 61 61 00"), 1},
		{"value length -5", unhex(t, "0c 00 00 00 01 09 00"), 1},
		{"value past record", unhex(t, "0c 00 00 00 01 06 61 00"), 1},
		{"negative header count", unhex(t, "0c 00 00 00 01 01 01"), 1},
		{"header count too high", unhex(t, "0c 00 00 00 01 01 04"), 1},
		{"null header key", unhex(t, "10 00 00 00 01 01 02 01 01"), 1},
		{"header key past record", unhex(t, "10 00 00 00 01 01 02 08 01"), 1},
		{"header value -3", unhex(t, "12 00 00 00 01 01 02 02 68 05"), 1},
		{"bytes inside length after fields", unhex(t, "10 00 00 00 01 01 00 00 00"), 1},
		{"timestamp varlong too long", unhex(t, "18 00 80 80 80 80 80 80 80 80 80 80 01 00"), 1},
		{"second record truncated", two[:len(two)-1], 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := ReadRecords(tt.data, tt.n, func(Record) error { calls++; return nil })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if calls != 0 {
				t.Fatalf("fn called %d times before the error", calls)
			}
		})
	}
}

func TestReadRecordsCallbackError(t *testing.T) {
	data := AppendRecord(nil, Record{Value: []byte("a")})
	data = AppendRecord(data, Record{OffsetDelta: 1, Value: []byte("b")})
	stop := errors.New("stop")
	calls := 0
	err := ReadRecords(data, 2, func(Record) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the callback's own error after 1", err, calls)
	}
}

func TestZigzagVarints(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		b := appendZigzag64(nil, v)
		got, n, err := readZigzag64(b, 0)
		if err != nil || got != v || n != len(b) || zigzag64Len(v) != len(b) {
			t.Errorf("varlong %d: read %d, %d bytes of %d, len %d, err %v", v, got, n, len(b), zigzag64Len(v), err)
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			continue
		}
		b32 := appendZigzag32(nil, int32(v))
		got32, n, err := readZigzag32(b32, 0)
		if err != nil || int64(got32) != v || n != len(b32) || !bytes.Equal(b32, b) {
			t.Errorf("varint %d: read %d, %d bytes, err %v, bytes % x vs % x", v, got32, n, err, b32, b)
		}
	}
	// Every value of one, two and three bytes, alone and with bytes after
	// it (readZigzag32's short paths need one byte beyond the first).
	for v := int32(-300000); v <= 300000; v++ {
		b := appendZigzag32(nil, v)
		for _, buf := range [][]byte{b, append(b, 0xff, 0x01)} {
			got, n, err := readZigzag32(buf, 0)
			if err != nil || got != v || n != len(b) {
				t.Fatalf("varint %d (% x in % x): read %d, %d bytes, err %v", v, b, buf, got, n, err)
			}
		}
		if _, _, err := readZigzag32(b[:len(b)-1], 0); err != errVarintTruncated {
			t.Fatalf("varint %d cut short: err %v", v, err)
		}
	}
	// Kafka accepts over-long encodings; so do we.
	if v, _, err := readZigzag32([]byte{0x82, 0x80, 0x00}, 0); err != nil || v != 1 {
		t.Errorf("over-long varint: %d, %v", v, err)
	}
}
