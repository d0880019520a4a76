package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// batchOf builds a batch of n records around an already compressed
// records section, with the header fields of a valid produce.
func batchOf(t testing.TB, c Codec, n int32, body []byte) []byte {
	t.Helper()
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(body))
	b = append(b, body...)
	h := BatchHeader{BatchLength: int32(len(b) - 12), Magic: 2, Attributes: int16(c), LastOffsetDelta: n - 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: n}
	putBatchHeader(b, &h)
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	return b
}

// xerialChunks is snappy-java's framing of raw in chunks of 32 KiB, as
// Kafka's Java producer writes it.
func xerialChunks(raw []byte) []byte {
	var chunks [][]byte
	for len(raw) > 32<<10 {
		chunks = append(chunks, raw[:32<<10])
		raw = raw[32<<10:]
	}
	return xerialFrame(append(chunks, raw)...)
}

// encodings are the records section raw compressed every way a producer
// may: each codec through Compress, plus snappy-java's xerial framing and
// zstd with franz-go's 64 KiB window.
func encodings(t testing.TB, raw []byte) map[string]struct {
	c    Codec
	body []byte
} {
	t.Helper()
	out := map[string]struct {
		c    Codec
		body []byte
	}{}
	for _, c := range allCodecs[1:] {
		body, err := Compress(c, nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		out[c.String()] = struct {
			c    Codec
			body []byte
		}{c, body}
	}
	out["snappy-xerial"] = struct {
		c    Codec
		body []byte
	}{CodecSnappy, xerialChunks(raw)}
	zw, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	out["zstd-64k-window"] = struct {
		c    Codec
		body []byte
	}{CodecZstd, zw.EncodeAll(raw, nil)}
	return out
}

// streamRecords is a records section that crosses every path of the
// streaming parser: small records, records larger than small windows,
// null keys and values, and headers with large keys and values.
func streamRecords() ([]Record, []byte) {
	recs := []Record{
		{Key: []byte("k"), Value: []byte("v")},
		{TimestampDelta: 7, Value: testPayload(200<<10, 1)},
		{TimestampDelta: -3, Key: testPayload(70<<10, 2), Value: nil},
		{TimestampDelta: 1 << 40, Key: []byte{}, Value: []byte{}, Headers: []Header{
			{Key: string(testPayload(5000, 3)), Value: testPayload(90<<10, 4)},
			{Key: "h", Value: nil},
		}},
		{TimestampDelta: 2, Key: []byte("last"), Value: testPayload(300, 5)},
	}
	var raw []byte
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		raw = AppendRecord(raw, recs[i])
	}
	return recs, raw
}

// TestValidateBatchStreamsLikeInMemory validates the same records
// uncompressed (parsed in memory) and compressed every way through
// windows from 10 bytes to the default: the streamed validation must find
// exactly what the in-memory one finds.
func TestValidateBatchStreamsLikeInMemory(t *testing.T) {
	recs, raw := streamRecords()
	n := int32(len(recs))
	want, err := ValidateBatch(batchOf(t, CodecNone, n, raw), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want.Records != n || want.NullKeys != 1 || want.UncompressedBytes != len(raw) {
		t.Fatalf("in memory: %+v", want)
	}
	for name, enc := range encodings(t, raw) {
		b := batchOf(t, enc.c, n, enc.body)
		for _, window := range []int{minStreamWindow, 64, 4096, streamWindow} {
			got, err := validateBatch(b, 1<<20, window, batchCRC{}, nil)
			if err != nil {
				t.Fatalf("%s, window %d: %v", name, window, err)
			}
			want.Header = got.Header
			if got != want {
				t.Fatalf("%s, window %d: got %+v, want %+v", name, window, got, want)
			}
		}
	}
}

// TestValidateBatchStreamRejectsLikeInMemory cuts and corrupts valid
// records at every byte and checks that the streamed validation, whatever
// the codec and window, refuses exactly what the in-memory one refuses,
// as INVALID_RECORD.
func TestValidateBatchStreamRejectsLikeInMemory(t *testing.T) {
	var raw []byte
	for i, r := range []Record{
		{Key: []byte("key"), Value: []byte("value")},
		{Value: bytes.Repeat([]byte("x"), 300), Headers: []Header{{Key: "hk", Value: []byte("hv")}}},
		{Key: nil, Value: nil},
	} {
		r.OffsetDelta = int32(i)
		raw = AppendRecord(raw, r)
	}
	check := func(t *testing.T, what string, data []byte, n int32) {
		_, memErr := ValidateBatch(batchOf(t, CodecNone, n, data), 1<<20)
		if memErr != nil && !errors.Is(memErr, ErrInvalidRecord) {
			t.Fatalf("%s: in memory: %v", what, memErr)
		}
		for _, c := range []Codec{CodecGzip, CodecZstd} {
			body, err := Compress(c, nil, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, window := range []int{minStreamWindow, 64, streamWindow} {
				_, err := validateBatch(batchOf(t, c, n, body), 1<<20, window, batchCRC{}, nil)
				if (err == nil) != (memErr == nil) || (err != nil && !errors.Is(err, ErrInvalidRecord)) {
					t.Fatalf("%s, %s, window %d: streamed %v, in memory %v", what, c, window, err, memErr)
				}
			}
		}
	}
	for cut := range len(raw) {
		check(t, "cut", raw[:cut], 3)
	}
	for i := range raw {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(raw)
			bad[i] ^= x
			check(t, "flip", bad, 3)
		}
	}
	check(t, "count low", raw, 2)
	check(t, "count high", raw, 4)
	check(t, "trailing byte", append(bytes.Clone(raw), 0), 3)
}

// TestValidateBatchBombs validates batches that expand to a 90 MiB record
// of zeros (the attack) and checks what each costs: the ones a
// decoder can stream are accepted with a few MiB allocated at most; the
// ones that would need the whole 90 MiB at once (a raw snappy block, a
// single-segment zstd frame) are refused before it is allocated.
func TestValidateBatchBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 90 MiB several times")
	}
	const limit = 100 << 20
	raw := AppendRecord(nil, Record{Key: []byte("k"), Value: make([]byte, bombSize)})
	single, err := zstd.NewWriter(nil, zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	snappyBlock := snappy.Encode(nil, raw)
	tests := []struct {
		name     string
		c        Codec
		body     []byte
		refused  bool
		maxAlloc uint64
	}{
		{"zstd single segment", CodecZstd, single.EncodeAll(raw, nil), true, 1 << 20},
		{"snappy raw block", CodecSnappy, snappyBlock, true, 1 << 20},
	}
	for name, enc := range encodings(t, raw) {
		if name == "snappy" {
			continue // a raw block: the case above
		}
		// An 8 MiB zstd window or a 4 MiB lz4 block, plus the window.
		tests = append(tests, struct {
			name     string
			c        Codec
			body     []byte
			refused  bool
			maxAlloc uint64
		}{name, enc.c, enc.body, false, 12 << 20})
	}
	raw, snappyBlock = nil, nil
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := batchOf(t, tt.c, 1, tt.body)
			t.Logf("%d byte batch", len(b))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			info, err := ValidateBatch(b, limit)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d bytes, err %v", alloc, err)
			if tt.refused {
				if !errors.Is(err, ErrUncompressedTooLarge) {
					t.Fatalf("err = %v, want ErrUncompressedTooLarge", err)
				}
			} else if err != nil || info.Records != 1 || info.UncompressedBytes < bombSize {
				t.Fatalf("info %+v, err %v", info, err)
			}
			if !raceEnabled && alloc > tt.maxAlloc {
				t.Fatalf("allocated %d bytes, want at most %d", alloc, tt.maxAlloc)
			}
		})
	}
	t.Run("over the limit", func(t *testing.T) {
		body, err := Compress(CodecZstd, nil, AppendRecord(nil, Record{Value: make([]byte, 2<<20)}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ValidateBatch(batchOf(t, CodecZstd, 1, body), 1<<20); !errors.Is(err, ErrUncompressedTooLarge) {
			t.Fatalf("err = %v, want ErrUncompressedTooLarge", err)
		}
	})
}

// TestZstdMaxWindow checks the frame walk that picks a decoder: it finds
// the largest window among concatenated and skippable frames.
func TestZstdMaxWindow(t *testing.T) {
	small, _ := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1))
	big, _ := zstd.NewWriter(nil, zstd.WithWindowSize(4<<20), zstd.WithEncoderConcurrency(1), zstd.WithSingleSegment(false))
	payload := testPayload(3<<20, 9)
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3}
	src := small.EncodeAll(payload, nil)
	src = append(src, skippable...)
	second := len(src)
	src = big.EncodeAll(payload, src)
	var h1, h2 zstd.Header
	if h1.Decode(src) != nil || h2.Decode(src[second:]) != nil || h2.WindowSize <= h1.WindowSize {
		t.Fatalf("test frames: windows %d and %d", h1.WindowSize, h2.WindowSize)
	}
	w, ok := zstdMaxWindow(src)
	if !ok || w != h2.WindowSize {
		t.Fatalf("window %d, ok %v; want %d", w, ok, h2.WindowSize)
	}
	if w, ok := zstdMaxWindow(src[:len(src)-1]); ok {
		t.Fatalf("truncated input walked cleanly, window %d", w)
	}
	// Both frames decode through one stream.
	recsRaw := AppendRecord(nil, Record{Value: payload})
	body := small.EncodeAll(recsRaw[:1000], nil)
	body = big.EncodeAll(recsRaw[1000:], body)
	if _, err := ValidateBatch(batchOf(t, CodecZstd, 1, body), 4<<20); err != nil {
		t.Fatal(err)
	}
}

// TestValidateBatchStreamCodecErrors checks that a codec failure met
// while streaming is CORRUPT_MESSAGE, not INVALID_RECORD: a zstd frame
// with a wrong content checksum at its very end, found only by reading
// past the last record.
func TestValidateBatchStreamCodecErrors(t *testing.T) {
	raw := AppendRecord(nil, Record{Value: testPayload(100<<10, 3)})
	body, err := Compress(CodecZstd, nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	body[len(body)-1] ^= 0xff // the frame's xxhash checksum
	_, err = ValidateBatch(batchOf(t, CodecZstd, 1, body), 1<<20)
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("err = %v, want ErrCorrupt only", err)
	}
}

// BenchmarkValidateBatchLarge validates a 1 MiB batch (256 records of
// 4 KiB), larger than the streaming window, for each codec.
func BenchmarkValidateBatchLarge(b *testing.B) {
	var recs []Record
	for i := range 256 {
		recs = append(recs, Record{OffsetDelta: int32(i), TimestampDelta: int64(i),
			Key: []byte("user-12345"), Value: testPayload(4096, uint64(i))})
	}
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch, err := BuildBatch(BatchHeader{FirstTimestamp: 1, MaxTimestamp: 256, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, c)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(256 * 4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatch(batch, 8<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeCost checks what a batch's decoder is charged against the
// broker-wide decode budget, per codec and framing.
func TestDecodeCost(t *testing.T) {
	payload := testPayload(600<<10, 11)
	lz4Big := func(p []byte) []byte {
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block4Mb)); err != nil {
			t.Fatal(err)
		}
		zw.Write(p)
		zw.Close()
		return buf.Bytes()
	}
	lz4Small, err := Compress(CodecLZ4, nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	zstdSmall, err := Compress(CodecZstd, nil, payload[:1000])
	if err != nil {
		t.Fatal(err)
	}
	zstdBig, err := Compress(CodecZstd, nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(zstdBig); err != nil {
		t.Fatal(err)
	}
	bigWindow := int64(h.WindowSize)
	if h.SingleSegment {
		bigWindow = int64(h.FrameContentSize)
	}
	for _, tt := range []struct {
		name string
		c    Codec
		src  []byte
		want int64
	}{
		{"gzip", CodecGzip, []byte{1}, 0},
		{"lz4 64 KiB blocks", CodecLZ4, lz4Small, 2 * 64 << 10},
		{"lz4 4 MiB blocks", CodecLZ4, lz4Big(payload), 2 * 4 << 20},
		{"lz4 small then big frame", CodecLZ4, append(bytes.Clone(lz4Small), lz4Big(payload[:100])...), 2 * 4 << 20},
		{"lz4 garbage", CodecLZ4, []byte("not lz4 at all"), 2 * 4 << 20},
		{"snappy raw block", CodecSnappy, snappy.Encode(nil, payload), int64(len(payload))},
		{"snappy xerial", CodecSnappy, xerialChunks(payload), 32 << 10},
		{"zstd small content", CodecZstd, zstdSmall, 0},
		{"zstd window", CodecZstd, zstdBig, bigWindow},
		{"zstd garbage", CodecZstd, []byte("not zstd"), maxStreamWindow},
	} {
		if got := decodeCost(tt.c, tt.src); got != tt.want {
			t.Errorf("%s: cost %d, want %d", tt.name, got, tt.want)
		}
	}
}
