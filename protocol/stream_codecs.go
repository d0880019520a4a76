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

// maxPooledWindow is the largest zstd window or snappy block whose
// buffers go back to a pool after use (2 MiB: what zstd-jni writes at
// Kafka's default level 3); larger ones are made for the batch and
// dropped after it, so a burst of them leaves nothing behind.
const maxPooledWindow = 2 << 20

// decodeBudget bounds what the large decoders of all batches being
// decompressed at once may hold: a zstd window, a raw snappy block or an
// xerial chunk, an lz4 block, each above maxPooledWindow, takes its size
// from here first and waits while the rest is taken. A client sending
// many bombs at once thus costs the broker decodeBudgetBytes, not 8 MiB a
// request; the common small batch takes nothing and never waits.
const decodeBudgetBytes = 32 << 20

var decodeBudget = newDecodeSem(decodeBudgetBytes)

// decodeSem is a counting semaphore of bytes.
type decodeSem struct {
	mu    sync.Mutex
	avail int64
	freed chan struct{} // closed and replaced at each release
}

func newDecodeSem(n int64) *decodeSem { return &decodeSem{avail: n, freed: make(chan struct{})} }

func (d *decodeSem) acquire(n int64) {
	for {
		d.mu.Lock()
		if d.avail >= n {
			d.avail -= n
			d.mu.Unlock()
			return
		}
		freed := d.freed
		d.mu.Unlock()
		<-freed
	}
}

func (d *decodeSem) release(n int64) {
	d.mu.Lock()
	d.avail += n
	close(d.freed)
	d.freed = make(chan struct{})
	d.mu.Unlock()
}

// decodeCost is the most a streaming decoder of src holds at once beyond
// its small fixed state: the largest zstd window, raw snappy block or
// xerial chunk, or twice the largest lz4 block (its compressed and
// decoded buffers). Input it cannot walk costs the most any could.
func decodeCost(c Codec, src []byte) int64 {
	switch c {
	case CodecZstd:
		if size, ok := zstdContentSize(src); ok && size <= streamWindow {
			return 0 // decoded at once into the window: no history kept
		}
		if w, ok := zstdMaxWindow(src); ok {
			return int64(min(w, maxStreamWindow))
		}
		return maxStreamWindow
	case CodecSnappy:
		return snappyMaxBlock(src)
	case CodecLZ4:
		return 2 * lz4MaxBlock(src)
	}
	return 0 // gzip: a 32 KiB window
}

// snappyMaxBlock is the largest decoded size of src's raw block or of any
// of its xerial chunks.
func snappyMaxBlock(src []byte) int64 {
	if !bytes.HasPrefix(src, xerialMagic) {
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return 0 // refused before anything is allocated
		}
		return int64(min(n, maxStreamWindow))
	}
	var most int64
	for len(src) > 0 {
		if bytes.HasPrefix(src, xerialMagic) {
			if len(src) < xerialHeaderSize {
				break
			}
			src = src[xerialHeaderSize:]
			continue
		}
		if len(src) < 4 {
			break
		}
		n := int32(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || int(n) > len(src) {
			break
		}
		if d, err := snappy.DecodedLen(src[:n]); err == nil {
			most = max(most, int64(min(d, maxStreamWindow)))
		}
		src = src[n:]
	}
	return most
}

// lz4MaxBlock is the largest block size any lz4 frame of src declares,
// walking frame descriptors and block sizes; 4 MiB, the most the format
// allows, if the walk fails.
func lz4MaxBlock(src []byte) int64 {
	const maxBlock = 4 << 20
	var most int64
	for len(src) > 0 {
		if len(src) < 8 {
			return maxBlock
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&0xfffffff0 == 0x184d2a50 { // skippable frame
			n := 8 + int(binary.LittleEndian.Uint32(src[4:]))
			if n < 8 || n > len(src) {
				return maxBlock
			}
			src = src[n:]
			continue
		}
		if magic != 0x184d2204 {
			return maxBlock
		}
		flg, bd := src[4], src[5]
		p := 7 // magic, FLG, BD, header checksum
		if flg&0x08 != 0 {
			p += 8 // content size
		}
		if flg&0x01 != 0 {
			p += 4 // dictionary id
		}
		most = max(most, int64(64<<10)<<(2*max(int((bd>>4)&7)-4, 0)))
		for {
			if p+4 > len(src) {
				return maxBlock
			}
			size := int(binary.LittleEndian.Uint32(src[p:]) & 0x7fffffff)
			p += 4
			if size == 0 {
				break // the end mark
			}
			p += size
			if flg&0x10 != 0 {
				p += 4 // block checksum
			}
		}
		if flg&0x04 != 0 {
			p += 4 // content checksum
		}
		if p > len(src) {
			return maxBlock
		}
		src = src[p:]
	}
	return most
}

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
	cost   int64 // taken from decodeBudget
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
	if cost := decodeCost(c, src); cost > maxPooledWindow {
		decodeBudget.acquire(cost)
		v.cost = cost
	}
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
	if v.cost > 0 {
		decodeBudget.release(v.cost)
		v.cost = 0
	}
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

var zstdSmallStreams = sync.Pool{New: func() any { return newZstdStream(maxPooledWindow) }}

// getZstdStream returns a decoder for src: from the pool when no frame of
// src declares a window over maxPooledWindow, else a new one. A frame
// declaring more than maxStreamWindow is refused before anything is
// allocated for it.
func getZstdStream(src []byte) (*zstdStream, error) {
	w, ok := zstdMaxWindow(src)
	if w > maxStreamWindow {
		return nil, fmt.Errorf("%w: a zstd frame declares a window of %d bytes, over %d", ErrUncompressedTooLarge, w, maxStreamWindow)
	}
	if ok && w <= maxPooledWindow {
		return zstdSmallStreams.Get().(*zstdStream), nil
	}
	return newZstdStream(maxStreamWindow), nil
}

func putZstdStream(z *zstdStream) {
	z.dec.Reset(nil) // drop the reference to the input
	if z.big {
		z.dec.Close()
		return
	}
	zstdSmallStreams.Put(z)
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

func (s *snappyStream) release() {
	s.src, s.block = nil, nil
	if cap(s.buf) > maxPooledWindow {
		s.buf = nil
	}
}

// decodeBlock decodes one raw block of at most limit bytes into s.buf.
func (s *snappyStream) decodeBlock(src []byte, limit int) ([]byte, error) {
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
