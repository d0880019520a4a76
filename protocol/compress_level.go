package protocol

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultLevel is Kafka's default compression level for a codec (KIP-390:
// compression.gzip.level -1, compression.lz4.level 9,
// compression.zstd.level 3); 0 for codecs without levels.
func DefaultLevel(c Codec) int {
	switch c {
	case CodecGzip:
		return gzip.DefaultCompression
	case CodecLZ4:
		return 9
	case CodecZstd:
		return 3
	}
	return 0
}

// levelKey names one pool of streaming encoders at a non-default level.
type levelKey struct {
	c     Codec
	level int // the encoder's own level: gzip's, lz4.CompressionLevel or zstd.EncoderLevel
}

// levelStreams holds a *sync.Pool per levelKey, made on first use; the
// keys are bounded by the codecs' level ranges.
var levelStreams sync.Map

// encoderLevel maps Kafka's level for codec c onto the encoder's own: gzip
// takes it as is (1-9, -1 for the default); lz4's default 9 is Kafka's
// fast mode, other levels its high-compression levels, of which the
// encoder has 1-9; zstd's levels fall onto the encoder's four speeds. ok
// is false when the level is the codec's default, whose pools already
// exist.
func encoderLevel(c Codec, level int) (key levelKey, ok bool) {
	if level == DefaultLevel(c) {
		return levelKey{}, false
	}
	switch c {
	case CodecGzip:
		return levelKey{c, min(max(level, gzip.BestSpeed), gzip.BestCompression)}, true
	case CodecLZ4:
		n := min(max(level, 1), 9)
		return levelKey{c, int(lz4.Level1) << (n - 1)}, true
	case CodecZstd:
		speed := zstd.EncoderLevelFromZstd(level)
		if speed == zstd.SpeedDefault {
			return levelKey{}, false
		}
		return levelKey{c, int(speed)}, true
	}
	return levelKey{}, false
}

// newLevelPool makes the pool of streaming encoders for one key.
func newLevelPool(k levelKey) *sync.Pool {
	switch k.c {
	case CodecGzip:
		return &sync.Pool{New: func() any {
			w, err := gzip.NewWriterLevel(nil, k.level)
			if err != nil {
				panic(fmt.Sprintf("gzip level %d: %v", k.level, err)) // clamped by encoderLevel
			}
			return w
		}}
	case CodecLZ4:
		return &sync.Pool{New: func() any {
			w := lz4.NewWriter(nil)
			err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(lz4.CompressionLevel(k.level)))
			if err != nil {
				panic(fmt.Sprintf("lz4 level %d: %v", k.level, err)) // one of Level1-Level9
			}
			return w
		}}
	default:
		return &sync.Pool{New: func() any {
			enc, err := zstd.NewWriter(nil,
				zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(256<<10),
				zstd.WithEncoderLevel(zstd.EncoderLevel(k.level)),
				zstd.WithZeroFrames(true))
			if err != nil {
				panic(fmt.Sprintf("zstd level %d: %v", k.level, err)) // one of the four speeds
			}
			return enc
		}}
	}
}

// newStreamEncoderLevel is newStreamEncoder at Kafka's level for c; the
// default level takes the default pools.
func newStreamEncoderLevel(c Codec, level int, w io.Writer) *streamEncoder {
	key, ok := encoderLevel(c, level)
	if !ok {
		return newStreamEncoder(c, w)
	}
	p, _ := levelStreams.Load(key)
	if p == nil {
		p, _ = levelStreams.LoadOrStore(key, newLevelPool(key))
	}
	return newPooledEncoder(c, w, p.(*sync.Pool))
}
