package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// goldenBatch is a two-record uncompressed batch written out by hand from
// Kafka's RecordBatch spec. The CRC-32C was computed with a bitwise
// implementation of the Castagnoli polynomial, independent of hash/crc32.
const goldenBatch = `
00 00 00 00 00 00 00 00   base offset 0
00 00 00 46               batch length 70 (82 bytes in all, less 12)
ff ff ff ff               partition leader epoch -1
02                        magic 2
1b d6 c5 7f               crc-32c of everything from the attributes on
00 00                     attributes: no codec, create time
00 00 00 01               last offset delta 1
00 00 01 8b cf e5 68 00   first timestamp 1700000000000
00 00 01 8b cf e5 68 05   max timestamp 1700000000005
ff ff ff ff ff ff ff ff   producer id -1
ff ff                     producer epoch -1
ff ff ff ff               base sequence -1
00 00 00 02               2 records
14 00 00 00 02 61 06 78 79 7a 00   {key "a", value "xyz"}
12 00 0a 02 01 00 02 02 68 01      {ts +5, offset +1, null key, value "", header "h": null}
`

// goldenHex drops the comments from goldenBatch: on each line, the hex
// pairs before the first word that is not one.
func goldenHex(t testing.TB) []byte {
	var hexed []byte
	for _, line := range bytes.Split([]byte(goldenBatch), []byte("\n")) {
		for _, f := range bytes.Fields(line) {
			if len(f) != 2 || !isHex(f[0]) || !isHex(f[1]) {
				break
			}
			hexed = append(hexed, f...)
		}
	}
	return unhex(t, string(hexed))
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func goldenHeader() BatchHeader {
	return BatchHeader{
		PartitionLeaderEpoch: -1,
		FirstTimestamp:       1700000000000,
		MaxTimestamp:         1700000000005,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
}

func goldenRecords() []Record {
	return []Record{
		{Key: []byte("a"), Value: []byte("xyz")},
		{TimestampDelta: 5, OffsetDelta: 1, Value: []byte{}, Headers: []Header{{Key: "h"}}},
	}
}

func TestBatchGolden(t *testing.T) {
	want := goldenHex(t)
	if len(want) != 82 {
		t.Fatalf("golden batch is %d bytes, want 82", len(want))
	}
	got, err := BuildBatch(goldenHeader(), goldenRecords(), CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("BuildBatch\n got % x\nwant % x", got, want)
	}

	// franz-go's kmsg, given the same fields, writes the same bytes.
	var recs []byte
	for _, r := range goldenRecords() {
		recs = AppendRecord(recs, r)
	}
	kb := kmsg.RecordBatch{
		Length: 70, PartitionLeaderEpoch: -1, Magic: 2, CRC: 0x1bd6c57f, LastOffsetDelta: 1,
		FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000005, ProducerID: -1,
		ProducerEpoch: -1, FirstSequence: -1, NumRecords: 2, Records: recs,
	}
	if k := kb.AppendTo(nil); !bytes.Equal(k, want) {
		t.Fatalf("kmsg\n got % x\nwant % x", k, want)
	}

	info, err := ValidateBatch(want, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := goldenHeader()
	wantHeader.BatchLength, wantHeader.Magic, wantHeader.CRC = 70, 2, 0x1bd6c57f
	wantHeader.LastOffsetDelta, wantHeader.NumRecords = 1, 2
	wantInfo := BatchInfo{Header: wantHeader, Records: 2, MaxTimestamp: 1700000000005,
		MinTimestamp: 1700000000000, NullKeys: 1, UncompressedBytes: 21}
	if info != wantInfo {
		t.Fatalf("ValidateBatch\n got %+v\nwant %+v", info, wantInfo)
	}

	var decoded []Record
	err = DecodeBatch(want, 1<<20, func(h *BatchHeader, r Record) error {
		if *h != wantHeader {
			t.Errorf("DecodeBatch header %+v", *h)
		}
		decoded = append(decoded, r)
		return nil
	})
	if err != nil || !reflect.DeepEqual(decoded, goldenRecords()) {
		t.Fatalf("DecodeBatch: err %v\n got %+v\nwant %+v", err, decoded, goldenRecords())
	}
}

func TestBatchRoundTrip(t *testing.T) {
	h := BatchHeader{
		BaseOffset: 0, PartitionLeaderEpoch: 7, Attributes: AttrTransactional,
		FirstTimestamp: 1000, MaxTimestamp: 2000, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 100,
	}
	var recs []Record
	for i := range 50 {
		recs = append(recs, Record{
			TimestampDelta: int64(i * 20),
			OffsetDelta:    int32(i),
			Key:            []byte{byte(i)},
			Value:          testPayload(100+i*37, uint64(i)),
			Headers:        []Header{{Key: "i", Value: []byte{byte(i)}}},
		})
	}
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b, err := BuildBatch(h, recs, c)
			if err != nil {
				t.Fatal(err)
			}
			info, err := ValidateBatch(b, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got := info.Header
			if got.Codec() != c || got.NumRecords != 50 || got.LastOffsetDelta != 49 || !got.IsTransactional() ||
				got.ProducerID != 42 || got.ProducerEpoch != 3 || got.BaseSequence != 100 || got.PartitionLeaderEpoch != 7 ||
				got.Size() != len(b) {
				t.Fatalf("header %+v", got)
			}
			if info.Records != 50 || info.MinTimestamp != 1000 || info.MaxTimestamp != 1000+49*20 || info.NullKeys != 0 {
				t.Fatalf("info %+v", info)
			}
			var back []Record
			if err := DecodeBatch(b, 1<<20, func(_ *BatchHeader, r Record) error { back = append(back, r); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, recs) {
				t.Fatal("records changed in the round trip")
			}
			if c != CodecNone {
				if _, err := ValidateBatch(b, info.UncompressedBytes-1); !errors.Is(err, ErrUncompressedTooLarge) {
					t.Fatalf("limit one short: err = %v", err)
				}
			}
		})
	}
}

// resign rewrites a batch's header with mutate and recomputes its CRC, so a
// test reaches the checks after the CRC.
func resign(t testing.TB, b []byte, mutate func(h *BatchHeader)) []byte {
	t.Helper()
	b = bytes.Clone(b)
	h, err := ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	mutate(&h)
	putBatchHeader(b, &h)
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	return b
}

// withRecords builds a batch around raw records bytes, compressed with c,
// with the header fields of a valid produce.
func withRecords(t testing.TB, c Codec, n int32, raw []byte) []byte {
	t.Helper()
	body, err := Compress(c, nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(body))
	b = append(b, body...)
	h := BatchHeader{BatchLength: int32(len(b) - 12), Magic: 2, Attributes: int16(c), LastOffsetDelta: n - 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: n}
	putBatchHeader(b, &h)
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	return b
}

func TestValidateBatchRejects(t *testing.T) {
	good, err := BuildBatch(goldenHeader(), goldenRecords(), CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ValidateBatch(good, 1<<20); err != nil {
		t.Fatalf("base batch: %v", err)
	}
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-2] ^= 1
	gapped, _ := BuildBatch(goldenHeader(), []Record{{}, {OffsetDelta: 0}, {OffsetDelta: 2}}, CodecNone)
	twoRecs := good[BatchHeaderSize:]
	zeros := make([]byte, 2<<20)
	bomb := AppendRecord(nil, Record{Value: zeros})
	// A gzip batch whose payload is plain records, not gzip.
	garbageGzip := resign(t, withRecords(t, CodecNone, 2, twoRecs), func(h *BatchHeader) { h.Attributes |= int16(CodecGzip) })

	tests := []struct {
		name  string
		batch []byte
		want  []error
	}{
		{"crc mismatch", badCRC, []error{ErrCorrupt}},
		{"count higher than records", resign(t, good, func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 3, 2 }), []error{ErrInvalidRecord}},
		{"count lower than records", resign(t, good, func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 1, 0 }), []error{ErrInvalidRecord}},
		{"count disagrees with last offset delta", resign(t, good, func(h *BatchHeader) { h.LastOffsetDelta = 5 }), []error{ErrInvalidRecord}},
		{"zero records", resign(t, good, func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 0, -1 }), []error{ErrInvalidRecord}},
		{"negative last offset delta", resign(t, good, func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = -5, -6 }), []error{ErrInvalidRecord}},
		{"control batch", resign(t, good, func(h *BatchHeader) { h.Attributes |= AttrControl }), []error{ErrInvalidRecord}},
		{"producer id without sequence", resign(t, good, func(h *BatchHeader) { h.ProducerID = 9 }), []error{ErrInvalidRecord}},
		{"base offset not zero", resign(t, good, func(h *BatchHeader) { h.BaseOffset = 10 }), []error{ErrInvalidRecord}},
		{"codec 5", resign(t, good, func(h *BatchHeader) { h.Attributes |= 5 }), []error{ErrUnsupportedCodec}},
		{"codec 7", resign(t, good, func(h *BatchHeader) { h.Attributes |= 7 }), []error{ErrUnsupportedCodec}},
		{"magic 1", resign(t, good, func(h *BatchHeader) { h.Magic = 1 }), []error{ErrMagic, ErrInvalidRecord}},
		{"magic 3", resign(t, good, func(h *BatchHeader) { h.Magic = 3 }), []error{ErrMagic, ErrCorrupt}},
		{"batch length below header", resign(t, good, func(h *BatchHeader) { h.BatchLength = 48 })[:61], []error{ErrCorrupt}},
		{"second batch after", append(bytes.Clone(good), good...), []error{ErrInvalidRecord}},
		{"offset deltas with a gap", gapped, []error{ErrInvalidRecord}},
		{"record length past end", withRecords(t, CodecNone, 2, append(bytes.Clone(twoRecs[:len(twoRecs)-10]), 0x7e, 0)), []error{ErrInvalidRecord}},
		{"gzip of garbage", garbageGzip, []error{ErrCorrupt}},
		{"gzip count too high", withRecords(t, CodecGzip, 3, twoRecs), []error{ErrInvalidRecord}},
		{"zstd bad record", withRecords(t, CodecZstd, 1, []byte{0x02, 0}), []error{ErrInvalidRecord}},
		// Zeros are an empty record first: streaming stops there.
		{"lz4 of zeros", withRecords(t, CodecLZ4, 1, zeros), []error{ErrInvalidRecord}},
		// One well-formed record of 2 MiB: past the 1 MiB limit.
		{"lz4 bomb", withRecords(t, CodecLZ4, 1, bomb), []error{ErrUncompressedTooLarge}},
		{"snappy bomb", withRecords(t, CodecSnappy, 1, bomb), []error{ErrUncompressedTooLarge}},
		{"gzip bomb", withRecords(t, CodecGzip, 1, bomb), []error{ErrUncompressedTooLarge}},
		{"zstd bomb", withRecords(t, CodecZstd, 1, bomb), []error{ErrUncompressedTooLarge}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateBatch(tt.batch, 1<<20)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Fatalf("err = %v, want it to wrap %v", err, want)
				}
			}
		})
	}

	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			if _, err := ValidateBatch(good[:n], 1<<20); !errors.Is(err, ErrTruncated) {
				t.Fatalf("%d of %d bytes: err = %v, want ErrTruncated", n, len(good), err)
			}
		}
	})
}

func TestDecodeBatchRejects(t *testing.T) {
	good, _ := BuildBatch(goldenHeader(), goldenRecords(), CodecGzip)
	badCRC := bytes.Clone(good)
	badCRC[BatchHeaderSize+3] ^= 0x40
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"crc mismatch", badCRC, ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrTruncated},
		{"trailing bytes", append(bytes.Clone(good), 0), ErrCorrupt},
		{"count too high", resign(t, good, func(h *BatchHeader) { h.NumRecords = 3 }), ErrCorrupt},
		{"codec 6", resign(t, good, func(h *BatchHeader) { h.Attributes |= 6 }), ErrUnsupportedCodec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := DecodeBatch(tt.batch, 1<<20, func(*BatchHeader, Record) error { calls++; return nil })
			if !errors.Is(err, tt.want) || calls != 0 {
				t.Fatalf("err = %v after %d calls, want %v after none", err, calls, tt.want)
			}
		})
	}
	stop := errors.New("stop")
	if err := DecodeBatch(good, 1<<20, func(*BatchHeader, Record) error { return stop }); err != stop {
		t.Fatalf("callback error came back as %v", err)
	}
}

func TestValidateBatchTimestampsAndKeys(t *testing.T) {
	h := BatchHeader{FirstTimestamp: 5000, MaxTimestamp: 5000, ProducerID: -1, BaseSequence: -1}
	recs := []Record{
		{OffsetDelta: 0, TimestampDelta: 300, Key: []byte("k")},
		{OffsetDelta: 1, TimestampDelta: -5001}, // timestamp -1: none
		{OffsetDelta: 2, TimestampDelta: -200, Key: []byte{}},
		{OffsetDelta: 3, TimestampDelta: 100},
	}
	b, err := BuildBatch(h, recs, CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ValidateBatch(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if info.MinTimestamp != 4800 || info.MaxTimestamp != 5300 || info.NullKeys != 2 || info.Records != 4 {
		t.Fatalf("info %+v", info)
	}

	b, _ = BuildBatch(BatchHeader{FirstTimestamp: NoTimestamp, ProducerID: -1, BaseSequence: -1}, []Record{{}}, CodecNone)
	if info, err = ValidateBatch(b, 1<<20); err != nil || info.MinTimestamp != NoTimestamp || info.MaxTimestamp != NoTimestamp {
		t.Fatalf("no timestamps: %+v, %v", info, err)
	}
}

func TestNextBatch(t *testing.T) {
	var all []byte
	var want [][]byte
	for i, c := range allCodecs {
		h := goldenHeader()
		h.BaseOffset = int64(i * 10)
		b, err := BuildBatch(h, goldenRecords(), c)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
		all = append(all, b...)
	}
	rest := append(all, want[0][:30]...) // a partial batch, as a fetch response may end with
	for i, w := range want {
		batch, r, h, err := NextBatch(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if !bytes.Equal(batch, w) || h.BaseOffset != int64(i*10) || cap(batch) != len(batch) {
			t.Fatalf("batch %d: %d bytes, base offset %d, cap %d", i, len(batch), h.BaseOffset, cap(batch))
		}
		rest = r
	}
	if len(rest) != 30 {
		t.Fatalf("%d bytes left, want 30", len(rest))
	}
	if _, r, _, err := NextBatch(rest); !errors.Is(err, ErrTruncated) || len(r) != 30 {
		t.Fatalf("partial batch: err %v, rest %d", err, len(r))
	}
	if _, _, _, err := NextBatch(nil); !errors.Is(err, ErrTruncated) {
		t.Fatalf("empty: err %v", err)
	}
}

// TestBatchInteropFranzGo builds batches the way a franz-go producer does
// (kmsg records and batch, kgo's compressor) and checks that they validate
// and decode; then reads our batches with kmsg and kgo's decompressor, as a
// franz-go consumer does.
func TestBatchInteropFranzGo(t *testing.T) {
	kcodecs := map[Codec]kgo.CompressionCodec{
		CodecNone: kgo.NoCompression(), CodecGzip: kgo.GzipCompression(), CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4: kgo.Lz4Compression(), CodecZstd: kgo.ZstdCompression(),
	}
	recs := testRecords()[:4] // offset deltas 0..3
	dec := kgo.DefaultDecompressor()
	for c, kc := range kcodecs {
		t.Run(c.String(), func(t *testing.T) {
			var raw []byte
			for _, r := range recs {
				kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta,
					OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
				for _, h := range r.Headers {
					kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
				}
				kr.Length = int32(len(kr.AppendTo(nil)) - 1) // every body here is under 64 bytes
				raw = kr.AppendTo(raw)
			}
			body := raw
			if c != CodecNone {
				comp, err := kgo.DefaultCompressor(kc)
				if err != nil {
					t.Fatal(err)
				}
				var used kgo.CompressionCodecType
				body, used = comp.Compress(new(bytes.Buffer), raw)
				if int8(used) != int8(c) {
					t.Fatalf("franz-go used codec %d", used)
				}
			}
			kb := kmsg.RecordBatch{Length: int32(49 + len(body)), PartitionLeaderEpoch: -1, Magic: 2,
				Attributes: int16(c), LastOffsetDelta: 3, FirstTimestamp: 99, MaxTimestamp: 99,
				ProducerID: 5, ProducerEpoch: 1, FirstSequence: 0, NumRecords: 4, Records: body}
			theirs := kb.AppendTo(nil)
			binary.BigEndian.PutUint32(theirs[offCRC:], BatchCRC(theirs))

			if _, err := ValidateBatch(theirs, 1<<20); err != nil {
				t.Fatalf("ValidateBatch: %v", err)
			}
			var got []Record
			if err := DecodeBatch(theirs, 1<<20, func(_ *BatchHeader, r Record) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, recs) {
				t.Fatalf("decoded\n got %+v\nwant %+v", got, recs)
			}

			ours, err := BuildBatch(BatchHeader{ProducerID: 5, ProducerEpoch: 1}, recs, c)
			if err != nil {
				t.Fatal(err)
			}
			var kback kmsg.RecordBatch
			if err := kback.ReadFrom(ours); err != nil {
				t.Fatal(err)
			}
			if uint32(kback.CRC) != BatchCRC(ours) || kback.NumRecords != 4 || kback.Length != int32(len(ours)-12) {
				t.Fatalf("kmsg reads %+v", kback)
			}
			plain, err := dec.Decompress(kback.Records, kgo.CompressionCodecType(c))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(plain, raw) {
				t.Fatal("franz-go decompresses other record bytes than franz-go encodes")
			}
		})
	}
}

func TestValidateBatchAllocs(t *testing.T) {
	b := benchBatch(t, CodecNone)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ValidateBatch(b, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations validating an uncompressed batch", allocs)
	}
}

// benchBatch is 16 records of 1 KiB values, as a busy producer sends.
func benchBatch(t testing.TB, c Codec) []byte {
	var recs []Record
	for i := range 16 {
		recs = append(recs, Record{OffsetDelta: int32(i), TimestampDelta: int64(i),
			Key: []byte("user-12345"), Value: testPayload(1024, uint64(i))})
	}
	b, err := BuildBatch(BatchHeader{FirstTimestamp: 1, MaxTimestamp: 16, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkValidateBatch(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := benchBatch(b, c)
			b.SetBytes(16 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatch(batch, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerifyCRC(b *testing.B) {
	batch := benchBatch(b, CodecNone)
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := VerifyCRC(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	for _, c := range []Codec{CodecNone, CodecZstd} {
		b.Run(c.String(), func(b *testing.B) {
			batch := benchBatch(b, c)
			b.SetBytes(16 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if err := DecodeBatch(batch, 1<<20, func(*BatchHeader, Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzValidateBatch(f *testing.F) {
	for _, c := range allCodecs {
		b, err := BuildBatch(goldenHeader(), goldenRecords(), c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(false, b)
	}
	f.Add(false, goldenHex(f))
	_, raw := streamRecords()
	for _, enc := range encodings(f, raw) {
		f.Add(false, batchOf(f, enc.c, 5, enc.body))
	}
	f.Fuzz(func(t *testing.T, fixCRC bool, b []byte) {
		const limit = 64 << 10
		// A mutated batch almost never keeps a valid CRC; fixing it up
		// lets the fuzzer reach the codecs and the record parser.
		if fixCRC && len(b) >= BatchHeaderSize {
			binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
		}
		info, err := ValidateBatch(b, limit)
		// Streaming through the smallest window takes the field-by-field
		// path for every record; it must reach the same verdict. (Not
		// always the same error: a codec's checksum at the end of a
		// stream is read only after the records before it, so a smaller
		// window may meet a record the corruption broke first.)
		small, smallErr := validateBatch(b, limit, minStreamWindow, batchCRC{}, nil)
		if (err == nil) != (smallErr == nil) || (err == nil && small != info) {
			t.Fatalf("default window: %+v, %v; smallest: %+v, %v", info, err, small, smallErr)
		}
		if err != nil {
			for _, sentinel := range []error{ErrCorrupt, ErrTruncated, ErrInvalidRecord, ErrUnsupportedCodec, ErrUncompressedTooLarge} {
				if errors.Is(err, sentinel) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		// A batch that validates decodes to the records it claims, and
		// re-encoding them reproduces its records section.
		var recs []Record
		err = DecodeBatch(b, limit, func(_ *BatchHeader, r Record) error { recs = append(recs, r); return nil })
		if err != nil {
			t.Fatalf("validated but does not decode: %v", err)
		}
		if int32(len(recs)) != info.Records || info.Records != info.Header.NumRecords {
			t.Fatalf("%d records decoded, %d validated, header says %d", len(recs), info.Records, info.Header.NumRecords)
		}
		if info.Header.Codec() == CodecNone {
			var raw []byte
			for _, r := range recs {
				raw = AppendRecord(raw, r)
			}
			if len(raw) > len(b)-BatchHeaderSize {
				t.Fatalf("re-encoded records are %d bytes, batch holds %d", len(raw), len(b)-BatchHeaderSize)
			}
		}
	})
}

// TestValidateBatchCRC checks that a CRC-32C computed piece by piece
// (UpdateBatchCRC) is BatchCRC's, that ValidateBatchCRC given it answers
// exactly as ValidateBatch, and that given a CRC other than the header's
// it refuses the batch as corrupt.
func TestValidateBatchCRC(t *testing.T) {
	good, err := BuildBatch(goldenHeader(), goldenRecords(), CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-2] ^= 1
	lz4, err := BuildBatch(goldenHeader(), goldenRecords(), CodecLZ4)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"good":            good,
		"crc mismatch":    badCRC,
		"lz4":             lz4,
		"base offset":     resign(t, good, func(h *BatchHeader) { h.BaseOffset = 10 }),
		"count too high":  resign(t, good, func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 3, 2 }),
		"control batch":   resign(t, good, func(h *BatchHeader) { h.Attributes |= AttrControl }),
		"trailing extras": append(bytes.Clone(good), 0, 0, 0),
	} {
		var crc uint32
		for rest := b[BatchCRCStart:]; len(rest) > 0; {
			n := min(len(rest), 7)
			crc = UpdateBatchCRC(crc, rest[:n])
			rest = rest[n:]
		}
		if want := BatchCRC(b); crc != want {
			t.Fatalf("%s: crc in pieces %08x, BatchCRC %08x", name, crc, want)
		}
		wantInfo, wantErr := ValidateBatch(b, 1<<20)
		gotInfo, gotErr := ValidateBatchCRC(b, 1<<20, crc)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !reflect.DeepEqual(wantInfo, gotInfo) {
			t.Fatalf("%s: ValidateBatchCRC %+v, %v; ValidateBatch %+v, %v", name, gotInfo, gotErr, wantInfo, wantErr)
		}
	}
	if _, err := ValidateBatchCRC(good, 1<<20, BatchCRC(good)+1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a crc other than the header's: %v, want ErrCorrupt", err)
	}
}
