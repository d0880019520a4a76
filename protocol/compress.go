package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Errors returned by the codecs. The broker answers
// UNSUPPORTED_COMPRESSION_TYPE for ErrUnsupportedCodec. A compressed stream
// that does not decode is reported as ErrCorrupt.
var (
	ErrUnsupportedCodec     = errors.New("unsupported compression codec")
	ErrUncompressedTooLarge = errors.New("uncompressed size exceeds limit")
)

// Decompress returns src decompressed with codec c. The output never grows
// past limit bytes: input that would decompress to more fails with
// ErrUncompressedTooLarge, so a decompression bomb costs memory in
// proportion to limit, not to what it would expand to. (For zstd the bound
// is the larger of limit and the window the frame declares, itself at most
// 128 MiB, and doubles for input made of several frames.) Malformed input
// fails with an error wrapping ErrCorrupt. For CodecNone the result is src
// itself.
//
// Snappy input may be a raw snappy block (as franz-go and librdkafka write)
// or the xerial framing Kafka's Java producer writes.
func Decompress(c Codec, src []byte, limit int) ([]byte, error) {
	if c == CodecNone {
		if len(src) > max(limit, 0) {
			return nil, fmt.Errorf("decompress %s: %w: %d bytes, limit %d", c, ErrUncompressedTooLarge, len(src), limit)
		}
		return src, nil
	}
	return decompressAppend(c, nil, src, limit)
}

// decompressAppend appends src decompressed to dst, adding at most limit
// bytes. Reusing dst lets batch validation decompress into a pooled buffer.
func decompressAppend(c Codec, dst, src []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	var (
		out []byte
		err error
	)
	switch c {
	case CodecNone:
		if len(src) > limit {
			err = ErrUncompressedTooLarge
			break
		}
		out = append(dst, src...)
	case CodecGzip, CodecSnappy, CodecLZ4, CodecZstd:
		if len(src) == 0 {
			// Every codec encodes even empty input as a few bytes.
			return nil, fmt.Errorf("decompress %s: %w: empty input", c, ErrCorrupt)
		}
	default:
		return nil, fmt.Errorf("decompress %s: %w", c, ErrUnsupportedCodec)
	}
	switch c {
	case CodecGzip:
		out, err = gunzipAppend(dst, src, limit)
	case CodecSnappy:
		out, err = unsnappyAppend(dst, src, limit)
	case CodecLZ4:
		out, err = unlz4Append(dst, src, limit)
	case CodecZstd:
		out, err = unzstdAppend(dst, src, limit)
	}
	if err != nil {
		if errors.Is(err, ErrUncompressedTooLarge) {
			return nil, fmt.Errorf("decompress %s: %w (limit %d)", c, ErrUncompressedTooLarge, limit)
		}
		return nil, fmt.Errorf("decompress %s: %w: %w", c, ErrCorrupt, err)
	}
	return out, nil
}

// Compress appends src compressed with codec c to dst. Snappy output is a
// raw snappy block, as franz-go writes; Kafka's Java consumer reads it as
// well as its own xerial framing.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	var err error
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		dst, err = gzipAppend(dst, src)
	case CodecSnappy:
		dst, err = snappyAppend(dst, src)
	case CodecLZ4:
		dst, err = lz4Append(dst, src)
	case CodecZstd:
		dst, err = zstdAppend(dst, src)
	default:
		return nil, fmt.Errorf("compress %s: %w", c, ErrUnsupportedCodec)
	}
	if err != nil {
		return nil, fmt.Errorf("compress %s: %w", c, err)
	}
	return dst, nil
}

// readAppendLimited reads r to EOF, appending to dst, and fails with
// ErrUncompressedTooLarge once more than limit bytes arrive. The buffer grows
// by doubling but never past limit+1 bytes, the one extra byte being how an
// exact fit is told from an overflow.
func readAppendLimited(r io.Reader, dst []byte, limit, hint int) ([]byte, error) {
	maxLen := len(dst) + limit
	stalls := 0
	for {
		if len(dst) == cap(dst) {
			if len(dst) > maxLen {
				return nil, ErrUncompressedTooLarge
			}
			grow := min(max(cap(dst), hint, 512), maxLen+1-len(dst))
			next := make([]byte, len(dst), len(dst)+grow)
			copy(next, dst)
			dst = next
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > maxLen {
			return nil, ErrUncompressedTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			// A reader that makes no progress would otherwise spin forever.
			if stalls++; stalls > 100 {
				return nil, io.ErrNoProgress
			}
		} else {
			stalls = 0
		}
	}
}

// sizeHint guesses the decompressed size from the compressed size, so that
// the output buffer rarely needs to grow more than once or twice.
func sizeHint(src []byte) int { return 4*len(src) + 512 }

// sliceWriter is an io.Writer that appends to a byte slice, so stream
// compressors can write straight into the caller's dst.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// gzip

type gzipDecoder struct {
	zr gzip.Reader
	br bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

func gunzipAppend(dst, src []byte, limit int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.br.Reset(nil) // drop the reference to src before pooling
		gzipDecoders.Put(d)
	}()
	d.br.Reset(src)
	if err := d.zr.Reset(&d.br); err != nil {
		return nil, err
	}
	return readAppendLimited(&d.zr, dst, limit, sizeHint(src))
}

type gzipEncoder struct {
	zw  *gzip.Writer
	out sliceWriter
}

var gzipEncoders = sync.Pool{New: func() any {
	e := new(gzipEncoder)
	e.zw = gzip.NewWriter(&e.out)
	return e
}}

func gzipAppend(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	e.out.b = dst
	e.zw.Reset(&e.out)
	_, err := e.zw.Write(src)
	if cerr := e.zw.Close(); err == nil {
		err = cerr
	}
	out := e.out.b
	e.out.b = nil
	return out, err
}

// snappy

// xerialMagic opens the framing of Java's snappy-java SnappyOutputStream,
// which Kafka's Java producer uses. After it come two big-endian int32s
// (version and minimum compatible version), then chunks: a big-endian int32
// length and a raw snappy block of that length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func unsnappyAppend(dst, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return unsnappyBlockAppend(dst, src, limit)
	}
	budget := limit
	for len(src) > 0 {
		// snappy-java reads concatenated streams, each with its own header.
		// A chunk length never starts with 0x82 (it would be negative), so
		// the magic cannot be mistaken for a chunk.
		if bytes.HasPrefix(src, xerialMagic) {
			if len(src) < xerialHeaderSize {
				return nil, errors.New("xerial header truncated")
			}
			src = src[xerialHeaderSize:]
			continue
		}
		if len(src) < 4 {
			return nil, errors.New("xerial chunk length truncated")
		}
		n := int32(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || int(n) > len(src) {
			return nil, fmt.Errorf("xerial chunk of %d bytes, %d left", n, len(src))
		}
		before := len(dst)
		var err error
		dst, err = unsnappyBlockAppend(dst, src[:n], budget)
		if err != nil {
			return nil, err
		}
		budget -= len(dst) - before
		src = src[n:]
	}
	return dst, nil
}

// unsnappyBlockAppend decodes one raw snappy block. The block states its
// decoded length up front, so the limit is checked before allocating.
func unsnappyBlockAppend(dst, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, ErrUncompressedTooLarge
	}
	if cap(dst)-len(dst) < n {
		next := make([]byte, len(dst), len(dst)+n)
		copy(next, dst)
		dst = next
	}
	tail := dst[len(dst):cap(dst)]
	out, err := snappy.Decode(tail, src)
	if err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, fmt.Errorf("snappy block decoded to %d bytes, header says %d", len(out), n)
	}
	// Decode writes in place when the buffer it is given has room; copy
	// only if a future version stops doing so.
	if n > 0 && &out[0] != &tail[0] {
		copy(tail, out)
	}
	return dst[:len(dst)+n], nil
}

func snappyAppend(dst, src []byte) ([]byte, error) {
	n := snappy.MaxEncodedLen(len(src))
	if n < 0 {
		return nil, fmt.Errorf("%d bytes is too large for snappy", len(src))
	}
	if cap(dst)-len(dst) < n {
		next := make([]byte, len(dst), len(dst)+n)
		copy(next, dst)
		dst = next
	}
	tail := dst[len(dst):cap(dst)]
	out := snappy.Encode(tail, src)
	if len(out) > 0 && &out[0] != &tail[0] {
		return append(dst, out...), nil
	}
	return dst[:len(dst)+len(out)], nil
}

// lz4

type lz4Decoder struct {
	zr *lz4.Reader
	br bytes.Reader
}

var lz4Decoders = sync.Pool{New: func() any {
	// The default concurrency of 1 decodes synchronously, so a pooled
	// reader owns no goroutines.
	return &lz4Decoder{zr: lz4.NewReader(nil)}
}}

func unlz4Append(dst, src []byte, limit int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer func() {
		d.zr.Reset(nil) // returns the block buffer to lz4's own pool
		d.br.Reset(nil)
		lz4Decoders.Put(d)
	}()
	d.br.Reset(src)
	d.zr.Reset(&d.br)
	return readAppendLimited(d.zr, dst, limit, sizeHint(src))
}

type lz4Encoder struct {
	zw  *lz4.Writer
	out sliceWriter
}

var lz4Encoders = sync.Pool{New: func() any {
	e := new(lz4Encoder)
	e.zw = lz4.NewWriter(&e.out)
	// 64 KiB blocks, as Kafka's own KafkaLZ4BlockOutputStream writes, keep
	// the reader's buffers small on every client.
	if err := e.zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
		panic(fmt.Sprintf("lz4 options: %v", err)) // constant options: cannot fail
	}
	return e
}}

func lz4Append(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.b = dst
	e.zw.Reset(&e.out)
	_, err := e.zw.Write(src)
	if cerr := e.zw.Close(); err == nil {
		err = cerr
	}
	out := e.out.b
	e.out.b = nil
	return out, err
}

// zstd

// zstdDecoder is a pooled decoder and the limit it was last configured
// with. Decoders are created with concurrency 1, so DecodeAll runs on the
// calling goroutine and a decoder dropped by the pool leaks nothing.
type zstdDecoder struct {
	dec   *zstd.Decoder
	limit uint64
}

var zstdDecoders = sync.Pool{New: func() any {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		panic(fmt.Sprintf("zstd decoder: %v", err)) // constant options: cannot fail
	}
	return &zstdDecoder{dec: dec}
}}

// maxZstdWindow is the largest window a frame may declare, zstd-jni's
// default limit (window log 27), which bounds what Kafka's Java clients read.
const maxZstdWindow = 128 << 20

func unzstdAppend(dst, src []byte, limit int) ([]byte, error) {
	// DecodeAll stops a frame once its output passes the decoder's max
	// memory and rejects a frame declaring a larger content size before
	// allocating. It also rejects a frame whose declared window is larger,
	// though with DecodeAll the window costs nothing: the output is the
	// history. Java's zstd-jni streams declare a window of megabytes even
	// for a small batch, so the budget is raised to the first frame's
	// window when that is larger than limit, and the output checked against
	// limit afterwards. A bomb thus costs at most max(limit, window) plus a
	// block, and the window at most maxZstdWindow.
	budget := uint64(max(limit, zstd.MinWindowSize))
	var fh zstd.Header
	if fh.Decode(src) == nil && !fh.Skippable && fh.WindowSize > budget {
		if fh.WindowSize > maxZstdWindow {
			return nil, ErrUncompressedTooLarge
		}
		budget = fh.WindowSize
	}

	d := zstdDecoders.Get().(*zstdDecoder)
	defer zstdDecoders.Put(d)
	if d.limit != budget {
		if err := d.dec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(budget)); err != nil {
			return nil, err
		}
		d.limit = budget
	}
	start := len(dst)
	out, err := d.dec.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, ErrUncompressedTooLarge
	}
	if err != nil {
		return nil, err
	}
	if len(out)-start > limit {
		return nil, ErrUncompressedTooLarge
	}
	return out, nil
}

// zstdEncoder is shared: EncodeAll may be called concurrently and keeps
// its own pool of block encoders, so one Encoder serves every goroutine.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	// Zero frames: an empty input still encodes as a frame, which other
	// zstd implementations expect.
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithZeroFrames(true))
})

func zstdAppend(dst, src []byte) ([]byte, error) {
	enc, err := zstdEncoder()
	if err != nil {
		return nil, err
	}
	return enc.EncodeAll(src, dst), nil
}
