package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// What decompressing one batch as a stream may hold, whatever the batch
// expands to. A zstd frame must keep its window of history (a
// single-segment frame: its whole content), and a raw snappy block is
// decoded whole; neither may pass maxStreamWindow, which is the window
// zstd's format asks every decoder to support (RFC 8878 §3.1.1.1.2) and
// what zstd-jni streams declare up to level 19. Kafka's own decoder allows
// 128 MiB; a frame declaring more than 8 MiB (levels 20-22 of the Java
// client, or a bomb) is refused as too large. gzip keeps 32 KiB and lz4 a
// block of at most 4 MiB, bounds of their formats.
const maxStreamWindow = 8 << 20

// maxPooledWindow is the largest zstd window or snappy block whose buffers
// go back to a pool after use; larger ones are kept in a free list of
// bigStreams entries at most, so a burst leaves at most that many behind.
const (
	maxPooledWindow = 1 << 20
	bigStreams      = 2
)

// streamValidator is what validating one compressed batch needs: the
// window its records pass through and a reader for its codec. It is
// pooled; its window is small and fixed.
type streamValidator struct {
	window [streamWindow]byte
	br     bytes.Reader
	rs     recordStream
	gz     *gzipDecoder
	lz     *lz4Decoder
	zs     *zstdStream
	sn     snappyStream
}

var streamValidators = sync.Pool{New: func() any { return new(streamValidator) }}

// open starts reading the records of src, compressed with c, at most limit
// bytes of them, through the first window bytes of v's window.
func (v *streamValidator) open(c Codec, src []byte, limit, window int) (*recordStream, error) {
	if len(src) == 0 {
		// Every codec encodes even empty input as a few bytes.
		return nil, fmt.Errorf("decompress %s: %w: empty input", c, ErrCorrupt)
	}
	v.br.Reset(src)
	v.rs = recordStream{buf: v.window[:min(max(window, minStreamWindow), streamWindow)], limit: limit}
	switch c {
	case CodecGzip:
		v.gz = gzipDecoders.Get().(*gzipDecoder)
		if err := v.gz.zr.Reset(&v.br); err != nil {
			return nil, fmt.Errorf("decompress %s: %w: %w", c, ErrCorrupt, err)
		}
		v.rs.src = &v.gz.zr
	case CodecLZ4:
		v.lz = lz4Decoders.Get().(*lz4Decoder)
		v.lz.zr.Reset(&v.br)
		v.rs.src = v.lz.zr
	case CodecZstd:
		if size, ok := zstdContentSize(src); ok && size <= uint64(len(v.rs.buf)) {
			// Small enough for the window, as most batches are: decoded
			// at once, the quickest way, into the window itself.
			out, err := unzstdAppend(v.rs.buf[:0], src, min(limit, len(v.rs.buf)))
			if err != nil {
				if !errors.Is(err, ErrUncompressedTooLarge) {
					err = fmt.Errorf("%w: %w", ErrCorrupt, err)
				}
				return nil, fmt.Errorf("decompress %s: %w", c, err)
			}
			v.rs = recordStream{buf: out, w: len(out), eof: true, read: len(out), limit: limit}
			return &v.rs, nil
		}
		zs, err := getZstdStream(src)
		if err != nil {
			return nil, fmt.Errorf("decompress %s: %w", c, err)
		}
		v.zs = zs
		if err := zs.dec.Reset(&v.br); err != nil {
			return nil, fmt.Errorf("decompress %s: %w: %w", c, ErrCorrupt, err)
		}
		v.rs.src = zs
	case CodecSnappy:
		if !bytes.HasPrefix(src, xerialMagic) {
			// A raw block (franz-go, librdkafka) is decoded whole, at most
			// maxStreamWindow bytes, and its records read in place.
			block, err := v.sn.decodeBlock(src, min(limit, maxStreamWindow))
			if err != nil {
				return nil, fmt.Errorf("decompress %s: %w", c, err)
			}
			v.rs = recordStream{buf: block, w: len(block), eof: true, read: len(block), limit: limit}
			return &v.rs, nil
		}
		v.sn.reset(src)
		v.rs.src = &v.sn
	default:
		return nil, fmt.Errorf("decompress %s: %w", c, ErrUnsupportedCodec)
	}
	return &v.rs, nil
}

// release returns the codec readers to their pools and v to its own.
func (v *streamValidator) release() {
	v.br.Reset(nil)
	if v.gz != nil {
		v.gz.br.Reset(nil)
		gzipDecoders.Put(v.gz)
		v.gz = nil
	}
	if v.lz != nil {
		v.lz.zr.Reset(nil) // returns the block buffer to lz4's own pool
		lz4Decoders.Put(v.lz)
		v.lz = nil
	}
	if v.zs != nil {
		putZstdStream(v.zs)
		v.zs = nil
	}
	v.sn.release()
	v.rs = recordStream{}
	streamValidators.Put(v)
}

// zstdStream is a streaming zstd decoder. With concurrency 1 it decodes on
// the caller's goroutine and owns no goroutines, so dropping one leaks
// nothing. Its history ring is the size of the largest window it decoded.
type zstdStream struct {
	dec *zstd.Decoder
	big bool // may decode windows up to maxStreamWindow
}

func (z *zstdStream) Read(p []byte) (int, error) {
	n, err := z.dec.Read(p)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		err = ErrUncompressedTooLarge
	}
	return n, err
}

func newZstdStream(maxWindow uint64) *zstdStream {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(maxWindow),
		// Never decode a whole in-memory input at once: that is what
		// streaming is here to avoid.
		zstd.WithDecodeBuffersBelow(0))
	if err != nil {
		panic(fmt.Sprintf("zstd stream decoder: %v", err)) // constant options: cannot fail
	}
	return &zstdStream{dec: dec, big: maxWindow > maxPooledWindow}
}

var (
	zstdSmallStreams = sync.Pool{New: func() any { return newZstdStream(maxPooledWindow) }}
	zstdBigStreams   = make(chan *zstdStream, bigStreams)
)

// getZstdStream returns a decoder for src: from the pool when no frame of
// src declares a window over maxPooledWindow, else from the bounded free
// list or new. A frame declaring more than maxStreamWindow is refused
// before anything is allocated for it.
func getZstdStream(src []byte) (*zstdStream, error) {
	w, ok := zstdMaxWindow(src)
	if w > maxStreamWindow {
		return nil, fmt.Errorf("%w: a zstd frame declares a window of %d bytes, over %d", ErrUncompressedTooLarge, w, maxStreamWindow)
	}
	if ok && w <= maxPooledWindow {
		return zstdSmallStreams.Get().(*zstdStream), nil
	}
	select {
	case z := <-zstdBigStreams:
		return z, nil
	default:
		return newZstdStream(maxStreamWindow), nil
	}
}

func putZstdStream(z *zstdStream) {
	z.dec.Reset(nil) // drop the reference to the input
	if !z.big {
		zstdSmallStreams.Put(z)
		return
	}
	select {
	case zstdBigStreams <- z:
	default:
		z.dec.Close()
	}
}

// zstdContentSize is the decompressed size of src when every frame of it
// states its content size; a malformed src reports false.
func zstdContentSize(src []byte) (uint64, bool) {
	var total uint64
	err := walkZstdFrames(src, func(h *zstd.Header) bool {
		if !h.HasFCS {
			return false
		}
		total += h.FrameContentSize
		return true
	})
	return total, err == nil
}

// zstdMaxWindow is the largest window a frame of src declares (for a
// single-segment frame, its content size), found by walking frame and
// block headers without decoding. ok is false if the walk did not reach
// the end cleanly; the decoder then reports what is wrong.
func zstdMaxWindow(src []byte) (w uint64, ok bool) {
	err := walkZstdFrames(src, func(h *zstd.Header) bool {
		if h.SingleSegment {
			w = max(w, h.FrameContentSize)
		} else {
			w = max(w, h.WindowSize)
		}
		return true
	})
	return w, err == nil
}

var errZstdWalk = errors.New("zstd frames do not walk to the end")

// walkZstdFrames calls fn with the header of each frame of src other than
// skippable ones, walking block headers to find the next, until fn
// returns false or src ends. It fails if fn stopped or src is malformed.
func walkZstdFrames(src []byte, fn func(*zstd.Header) bool) error {
	for len(src) > 0 {
		var h zstd.Header
		if h.Decode(src) != nil {
			return errZstdWalk
		}
		if h.Skippable {
			n := h.HeaderSize + int(h.SkippableSize)
			if n > len(src) {
				return errZstdWalk
			}
			src = src[n:]
			continue
		}
		if !fn(&h) {
			return errZstdWalk
		}
		p := h.HeaderSize
		for last := false; !last; {
			if p+3 > len(src) {
				return errZstdWalk
			}
			bh := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
			p += 3
			last = bh&1 != 0
			size := int(bh >> 3)
			if (bh>>1)&3 == 1 { // an RLE block holds one byte
				size = 1
			}
			p += size
		}
		if h.HasCheckSum {
			p += 4
		}
		if p > len(src) {
			return errZstdWalk
		}
		src = src[p:]
	}
	return nil
}

// snappyStream reads snappy-java's xerial framing chunk by chunk, each
// chunk a raw block of at most maxStreamWindow bytes once decoded, and
// decodes franz-go's and librdkafka's raw blocks whole.
type snappyStream struct {
	src   []byte // the input left
	block []byte // decoded bytes not yet read
	buf   []byte // the decoding buffer
}

func (s *snappyStream) reset(src []byte) {
	s.src = src
	s.block = nil
}

// bigSnappyBufs keeps at most bigStreams decoding buffers larger than
// maxPooledWindow, so batches of a few MiB do not each allocate (and
// fault in) a fresh buffer, while a burst leaves at most that many behind.
var bigSnappyBufs = make(chan []byte, bigStreams)

func (s *snappyStream) release() {
	s.src, s.block = nil, nil
	if cap(s.buf) > maxPooledWindow {
		select {
		case bigSnappyBufs <- s.buf[:0]:
		default:
		}
		s.buf = nil
	}
}

// decodeBlock decodes one raw block of at most limit bytes into s.buf.
func (s *snappyStream) decodeBlock(src []byte, limit int) ([]byte, error) {
	if n, err := snappy.DecodedLen(src); err == nil && n > cap(s.buf) && n <= limit {
		select {
		case b := <-bigSnappyBufs:
			if cap(b) >= n {
				s.buf = b
			}
		default:
		}
	}
	out, err := unsnappyBlockAppend(s.buf[:0], src, limit)
	if err != nil {
		if errors.Is(err, ErrUncompressedTooLarge) {
			return nil, fmt.Errorf("%w: a snappy block over %d bytes", ErrUncompressedTooLarge, limit)
		}
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	s.buf = out
	return out, nil
}

func (s *snappyStream) Read(p []byte) (int, error) {
	for len(s.block) == 0 {
		if len(s.src) == 0 {
			return 0, io.EOF
		}
		if err := s.nextChunk(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.block)
	s.block = s.block[n:]
	return n, nil
}

// nextChunk decodes the next chunk of the xerial framing into s.block,
// passing over the headers of concatenated streams as snappy-java does.
func (s *snappyStream) nextChunk() error {
	if bytes.HasPrefix(s.src, xerialMagic) {
		if len(s.src) < xerialHeaderSize {
			return errors.New("xerial header truncated")
		}
		s.src = s.src[xerialHeaderSize:]
		return nil
	}
	if len(s.src) < 4 {
		return errors.New("xerial chunk length truncated")
	}
	n := int32(binary.BigEndian.Uint32(s.src))
	s.src = s.src[4:]
	if n < 0 || int(n) > len(s.src) {
		return fmt.Errorf("xerial chunk of %d bytes, %d left", n, len(s.src))
	}
	out, err := unsnappyBlockAppend(s.buf[:0], s.src[:n], maxStreamWindow)
	if err != nil {
		return err
	}
	s.buf, s.block = out, out
	s.src = s.src[n:]
	return nil
}
