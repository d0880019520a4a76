package protocol

import (
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

// ErrBatchTooLarge is a batch that would pass its size limit once
// re-encoded; the broker answers MESSAGE_TOO_LARGE, as Kafka does when a
// recompressed batch passes max.message.bytes.
var ErrBatchTooLarge = errors.New("record batch exceeds the size limit")

// RecompressBatch returns batch, one batch that ValidateBatch accepted,
// with its records section re-encoded with codec c, as Kafka's broker does
// when a topic's compression.type differs from the producer's. A record's
// bytes are the same in every codec, so they go from the decoder to the
// encoder through the streaming window and never exist whole: the cost is
// the codecs' state and the output, which may not pass maxSize bytes (the
// whole batch), or it fails with ErrBatchTooLarge. At most maxUncompressed
// bytes are decompressed. The header keeps everything but the codec, the
// length and the CRC.
func RecompressBatch(batch []byte, c Codec, maxUncompressed, maxSize int) ([]byte, error) {
	return RecompressBatchLevel(batch, c, DefaultLevel(c), maxUncompressed, maxSize)
}

// RecompressBatchLevel is RecompressBatch at Kafka's compression level
// for c (the topic's compression.gzip.level, .lz4.level or .zstd.level,
// KIP-390); snappy and none have no levels.
func RecompressBatchLevel(batch []byte, c Codec, level, maxUncompressed, maxSize int) ([]byte, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return nil, fmt.Errorf("recompress batch: %w", err)
	}
	if len(batch) != h.Size() {
		return nil, fmt.Errorf("recompress batch: %w: %d bytes after the batch", ErrCorrupt, len(batch)-h.Size())
	}
	if c < CodecNone || c > CodecZstd || h.Codec() > CodecZstd {
		return nil, fmt.Errorf("recompress batch: %w: from %s to %s", ErrUnsupportedCodec, h.Codec(), c)
	}
	out := &cappedWriter{b: make([]byte, BatchHeaderSize, min(maxSize, 2*len(batch)+BatchHeaderSize)), max: maxSize}
	enc := newStreamEncoderLevel(c, level, out)
	defer enc.release()
	if err := pipeRecords(enc, batch[BatchHeaderSize:], h.Codec(), maxUncompressed); err != nil {
		return nil, fmt.Errorf("recompress batch to %s: %w", c, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("recompress batch to %s: %w", c, err)
	}
	h.Attributes = h.Attributes&^AttrCompressionMask | int16(c)
	h.BatchLength = int32(len(out.b) - 12)
	putBatchHeader(out.b, &h)
	binary.BigEndian.PutUint32(out.b[offCRC:], BatchCRC(out.b))
	return out.b, nil
}

// pipeRecords writes the records section src, compressed with from,
// decompressed to w through the streaming window.
func pipeRecords(w io.Writer, src []byte, from Codec, maxUncompressed int) error {
	if from == CodecNone {
		if len(src) > maxUncompressed {
			return ErrUncompressedTooLarge
		}
		_, err := w.Write(src)
		return err
	}
	sv := streamValidators.Get().(*streamValidator)
	defer sv.release()
	rs, err := sv.open(from, src, max(maxUncompressed, 0), streamWindow)
	if err != nil {
		return err
	}
	for {
		if err := rs.fill(len(rs.buf)); err != nil {
			return fmt.Errorf("decompress %s: %w", from, err)
		}
		if rs.w == rs.r {
			return nil
		}
		if _, err := w.Write(rs.buf[rs.r:rs.w]); err != nil {
			return err
		}
		rs.r = rs.w
	}
}

// cappedWriter appends to b and fails with ErrBatchTooLarge past max.
type cappedWriter struct {
	b   []byte
	max int
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > w.max {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrBatchTooLarge, w.max)
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// streamEncoder is a pooled streaming compressor writing to one writer.
type streamEncoder struct {
	c  Codec
	w  io.Writer // the destination, for CodecNone
	gz *gzip.Writer
	lz *lz4.Writer
	zs *zstd.Encoder
	sn *xerialWriter
	// pool is where the encoder came from, at the default level or at
	// the topic's (compress_level.go), and goes back to.
	pool *sync.Pool
}

// The streaming encoders' pools. The zstd encoder's window is 256 KiB, so
// one costs about a MiB however large the batch; its output is a frame
// every consumer reads.
var (
	gzipStreams = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Streams  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			panic(fmt.Sprintf("lz4 options: %v", err)) // constant options: cannot fail
		}
		return w
	}}
	zstdStreams = sync.Pool{New: func() any {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(256<<10),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("zstd stream encoder: %v", err)) // constant options: cannot fail
		}
		return enc
	}}
	xerialStreams = sync.Pool{New: func() any { return new(xerialWriter) }}
)

func newStreamEncoder(c Codec, w io.Writer) *streamEncoder {
	return newPooledEncoder(c, w, defaultStreams(c))
}

// defaultStreams is the pool of c's encoders at Kafka's default level.
func defaultStreams(c Codec) *sync.Pool {
	switch c {
	case CodecGzip:
		return &gzipStreams
	case CodecLZ4:
		return &lz4Streams
	case CodecZstd:
		return &zstdStreams
	case CodecSnappy:
		return &xerialStreams
	}
	return nil
}

// newPooledEncoder takes an encoder for c from pool (nil for no codec)
// and points it at w.
func newPooledEncoder(c Codec, w io.Writer, pool *sync.Pool) *streamEncoder {
	e := &streamEncoder{c: c, w: w, pool: pool}
	switch c {
	case CodecGzip:
		e.gz = pool.Get().(*gzip.Writer)
		e.gz.Reset(w)
	case CodecLZ4:
		e.lz = pool.Get().(*lz4.Writer)
		e.lz.Reset(w)
	case CodecZstd:
		e.zs = pool.Get().(*zstd.Encoder)
		e.zs.Reset(w)
	case CodecSnappy:
		e.sn = pool.Get().(*xerialWriter)
		e.sn.reset(w)
	}
	return e
}

func (e *streamEncoder) Write(p []byte) (int, error) {
	switch e.c {
	case CodecGzip:
		return e.gz.Write(p)
	case CodecLZ4:
		return e.lz.Write(p)
	case CodecZstd:
		return e.zs.Write(p)
	case CodecSnappy:
		return e.sn.Write(p)
	}
	return e.w.Write(p)
}

// Close flushes what the encoder holds and ends its stream.
func (e *streamEncoder) Close() error {
	switch e.c {
	case CodecGzip:
		return e.gz.Close()
	case CodecLZ4:
		return e.lz.Close()
	case CodecZstd:
		return e.zs.Close()
	case CodecSnappy:
		return e.sn.Close()
	}
	return nil
}

// release returns the encoder to its pool, holding no reference to the
// destination.
func (e *streamEncoder) release() {
	switch {
	case e.gz != nil:
		e.gz.Reset(io.Discard)
		e.pool.Put(e.gz)
	case e.lz != nil:
		e.lz.Reset(io.Discard)
		e.pool.Put(e.lz)
	case e.zs != nil:
		e.zs.Reset(io.Discard)
		e.pool.Put(e.zs)
	case e.sn != nil:
		e.sn.reset(nil)
		e.pool.Put(e.sn)
	}
	*e = streamEncoder{}
}

// xerialChunkSize is the chunk snappy-java's SnappyOutputStream writes by
// default, as Kafka's Java producer does.
const xerialChunkSize = 32 << 10

// xerialWriter writes snappy-java's xerial framing: the header, then each
// chunk of xerialChunkSize input bytes as a big-endian length and a raw
// snappy block. It is how snappy streams, where a single raw block would
// need the whole input at once; Kafka's clients, franz-go and librdkafka
// all read it.
type xerialWriter struct {
	w       io.Writer
	pending []byte // input not yet encoded, less than a chunk
	enc     []byte // the encoding buffer
	started bool
}

func (x *xerialWriter) reset(w io.Writer) {
	x.w, x.pending, x.started = w, x.pending[:0], false
}

func (x *xerialWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), xerialChunkSize-len(x.pending))
		x.pending = append(x.pending, p[:k]...)
		p = p[k:]
		if len(x.pending) == xerialChunkSize {
			if err := x.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (x *xerialWriter) flush() error {
	if !x.started {
		// Version 1, minimum compatible version 1, as snappy-java writes.
		hdr := append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
		if _, err := x.w.Write(hdr); err != nil {
			return err
		}
		x.started = true
	}
	if len(x.pending) == 0 {
		return nil
	}
	x.enc = snappy.Encode(x.enc[:cap(x.enc)], x.pending)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(x.enc)))
	if _, err := x.w.Write(size[:]); err != nil {
		return err
	}
	if _, err := x.w.Write(x.enc); err != nil {
		return err
	}
	x.pending = x.pending[:0]
	return nil
}

// Close writes the last chunk (and the header, for empty input).
func (x *xerialWriter) Close() error { return x.flush() }
