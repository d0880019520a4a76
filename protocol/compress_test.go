package protocol

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// testPayload returns n bytes that compress somewhat, like real records:
// words from a small vocabulary with random numbers between them.
func testPayload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	words := []string{"order", "customer", "id", "amount", "currency", "EUR", "status", "shipped", "{", "}", ":", ","}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
		b = binary.AppendUvarint(b, r.Uint64N(1e6))
	}
	return b[:n]
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCompressRoundTrip(t *testing.T) {
	inputs := map[string][]byte{
		"empty":        {},
		"one byte":     {42},
		"text 1KiB":    testPayload(1<<10, 1),
		"text 300KiB":  testPayload(300<<10, 2), // several snappy, lz4 and zstd blocks
		"random 70KiB": randomBytes(70<<10, 3),
	}
	for _, c := range allCodecs {
		for name, in := range inputs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				out, err := Compress(c, bytes.Clone(prefix), in)
				if err != nil {
					t.Fatalf("Compress: %v", err)
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("Compress did not keep dst: %q", out[:min(len(out), 10)])
				}
				enc := out[len(prefix):]
				got, err := Decompress(c, enc, len(in))
				if err != nil {
					t.Fatalf("Decompress with exact limit: %v", err)
				}
				if !bytes.Equal(got, in) {
					t.Fatalf("round trip changed %d bytes into %d", len(in), len(got))
				}
				if len(in) > 0 {
					if _, err := Decompress(c, enc, len(in)-1); !errors.Is(err, ErrUncompressedTooLarge) {
						t.Fatalf("Decompress with limit one short: err = %v, want ErrUncompressedTooLarge", err)
					}
				}
			})
		}
	}
}

// TestCodecInterop checks both directions against franz-go, whose
// compressor and decompressor are what a franz-go producer and consumer use.
func TestCodecInterop(t *testing.T) {
	kcodecs := map[Codec]kgo.CompressionCodec{
		CodecGzip:   kgo.GzipCompression(),
		CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4:    kgo.Lz4Compression(),
		CodecZstd:   kgo.ZstdCompression(),
	}
	in := testPayload(200<<10, 7)
	dec := kgo.DefaultDecompressor()
	for c, kc := range kcodecs {
		t.Run(c.String(), func(t *testing.T) {
			comp, err := kgo.DefaultCompressor(kc)
			if err != nil {
				t.Fatal(err)
			}
			theirs, used := comp.Compress(new(bytes.Buffer), in)
			if int8(used) != int8(c) {
				t.Fatalf("franz-go used codec %d", used)
			}
			got, err := Decompress(c, theirs, len(in))
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("decompress franz-go output: err %v, equal %v", err, bytes.Equal(got, in))
			}
			ours, err := Compress(c, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			got, err = dec.Decompress(ours, kgo.CompressionCodecType(c))
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("franz-go decompress of ours: err %v, equal %v", err, bytes.Equal(got, in))
			}
		})
	}
}

// TestDecompressOtherEncoders reads streams written with settings other than
// ours: Go's standard gzip, several concatenated gzip members, lz4 with
// block checksums and a 4 MiB block size, zstd written as a stream (no
// content size in the frame header, as Java's zstd-jni writes) and zstd
// as two frames.
func TestDecompressOtherEncoders(t *testing.T) {
	in := testPayload(100<<10, 11)
	half := len(in) / 2

	var gz bytes.Buffer
	for _, part := range [][]byte{in[:half], in[half:]} {
		w := stdgzip.NewWriter(&gz)
		w.Write(part)
		w.Close()
	}

	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	if err := lw.Apply(lz4.BlockChecksumOption(true), lz4.BlockSizeOption(lz4.Block4Mb)); err != nil {
		t.Fatal(err)
	}
	lw.Write(in)
	lw.Close()

	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zw.Write(in)
	zw.Close()

	enc, _ := zstd.NewWriter(nil)
	twoFrames := enc.EncodeAll(in[half:], enc.EncodeAll(in[:half], nil))

	tests := []struct {
		name string
		c    Codec
		src  []byte
	}{
		{"gzip two members", CodecGzip, gz.Bytes()},
		{"lz4 block checksums 4MiB blocks", CodecLZ4, lz.Bytes()},
		{"zstd stream", CodecZstd, zs.Bytes()},
		{"zstd two frames", CodecZstd, twoFrames},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decompress(tt.c, tt.src, len(in))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, in) {
				t.Fatalf("got %d bytes, want %d", len(got), len(in))
			}
		})
	}
}

// xerialFrame builds snappy-java's framing by hand: the magic, version 1,
// minimum compatible version 1, then each chunk as a big-endian length and
// a raw snappy block.
func xerialFrame(chunks ...[]byte) []byte {
	b := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for _, c := range chunks {
		enc := snappy.Encode(nil, c)
		b = binary.BigEndian.AppendUint32(b, uint32(len(enc)))
		b = append(b, enc...)
	}
	return b
}

func TestDecompressXerialSnappy(t *testing.T) {
	in := testPayload(80<<10, 5)
	a, b, c := in[:32<<10], in[32<<10:64<<10], in[64<<10:]
	valid := xerialFrame(a, b, c)
	// snappy-java reads a second stream, header and all, after the first.
	concatenated := append(xerialFrame(a, b), xerialFrame(c)...)

	for name, src := range map[string][]byte{"three chunks": valid, "concatenated streams": concatenated} {
		t.Run(name, func(t *testing.T) {
			got, err := Decompress(CodecSnappy, src, len(in))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, in) {
				t.Fatalf("got %d bytes, want %d", len(got), len(in))
			}
			if _, err := Decompress(CodecSnappy, src, len(in)-1); !errors.Is(err, ErrUncompressedTooLarge) {
				t.Fatalf("limit one short: err = %v", err)
			}
		})
	}

	empty := xerialFrame()
	if got, err := Decompress(CodecSnappy, empty, 10); err != nil || len(got) != 0 {
		t.Fatalf("header only: got %d bytes, err %v", len(got), err)
	}

	negative := append(xerialFrame(), 0xff, 0xff, 0xff, 0xfe, 0)
	pastEnd := append(xerialFrame(), 0, 0, 1, 0, 1, 2, 3)
	corrupt := bytes.Clone(valid)
	corrupt[16+4] ^= 0xff // the first chunk's decoded-length varint
	bad := map[string][]byte{
		"header truncated":     valid[:12],
		"chunk length partial": append(xerialFrame(), 0, 0),
		"negative chunk":       negative,
		"chunk past end":       pastEnd,
		"chunk truncated":      valid[:len(valid)-1],
		"corrupt chunk":        corrupt,
	}
	for name, src := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := Decompress(CodecSnappy, src, 1<<20); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestDecompressUnsupportedCodec(t *testing.T) {
	for _, c := range []Codec{5, 6, 7, -1} {
		if _, err := Decompress(c, []byte{1, 2, 3}, 100); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Decompress(%s): err = %v", c, err)
		}
		if _, err := Compress(c, nil, []byte{1, 2, 3}); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Compress(%s): err = %v", c, err)
		}
	}
}

func TestDecompressGarbage(t *testing.T) {
	inputs := [][]byte{nil, {0x80}, {0xff, 0xff, 0xff, 0xff, 0x0f, 0}, randomBytes(1000, 9), testPayload(1000, 10)}
	for _, c := range allCodecs[1:] {
		for i, in := range inputs {
			_, err := Decompress(c, in, 1<<20)
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUncompressedTooLarge) {
				t.Errorf("%s input %d: err = %v, want ErrCorrupt or ErrUncompressedTooLarge", c, i, err)
			}
		}
	}
	// A stream cut short is corrupt, not short output.
	in := testPayload(10<<10, 4)
	for _, c := range allCodecs[1:] {
		enc, _ := Compress(c, nil, in)
		if _, err := Decompress(c, enc[:len(enc)-3], len(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s truncated: err = %v, want ErrCorrupt", c, err)
		}
	}
}

// TestDecompressBomb decompresses inputs that expand 64 MiB of zeros,
// with a 1 MiB limit, and checks both the error and that the memory
// allocated stayed near the limit rather than near 64 MiB.
func TestDecompressBomb(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, 64<<20)

	// A frame with no content size: the decoder learns the size only by
	// decoding. Its window is the limit, which then bounds the cost.
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs, zstd.WithWindowSize(limit))
	zw.Write(zeros)
	zw.Close()

	bombs := map[string]struct {
		c   Codec
		src []byte
	}{
		"snappy claims 4GiB": {CodecSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		"xerial of zeros":    {CodecSnappy, xerialFrame(zeros[:8<<20], zeros[:8<<20])},
		"zstd stream":        {CodecZstd, zs.Bytes()},
		"none over limit":    {CodecNone, zeros[:limit+1]},
	}
	for _, c := range allCodecs[1:] {
		enc, err := Compress(c, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		bombs[c.String()] = struct {
			c   Codec
			src []byte
		}{c, enc}
	}
	zeros = nil

	for name, b := range bombs {
		t.Run(name, func(t *testing.T) {
			Decompress(b.c, b.src, limit) // warm pools so they do not count
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Decompress(b.c, b.src, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrUncompressedTooLarge) {
				t.Fatalf("err = %v, want ErrUncompressedTooLarge", err)
			}
			// Up to twice the limit for buffer doubling, plus an lz4 block.
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d bytes", alloc)
			if alloc > 3*limit+(4<<20) {
				t.Fatalf("allocated %d bytes for a %d byte limit", alloc, limit)
			}
		})
	}
}

func FuzzDecompress(f *testing.F) {
	in := testPayload(3000, 13)
	for _, c := range allCodecs {
		enc, err := Compress(c, nil, in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(c), enc)
	}
	f.Add(byte(CodecSnappy), xerialFrame(in[:1000], in[1000:]))
	f.Fuzz(func(t *testing.T, codec byte, src []byte) {
		// Small, so that inputs expanding to the limit stay cheap to run
		// and to minimise.
		const limit = 64 << 10
		c := Codec(codec % 8)
		out, err := Decompress(c, src, limit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUncompressedTooLarge) && !errors.Is(err, ErrUnsupportedCodec) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("output of %d bytes passes the limit", len(out))
		}
		// What decompresses must survive a round trip through our encoder.
		enc, err := Compress(c, nil, out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decompress(c, enc, limit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("round trip: err %v", err)
		}
	})
}
