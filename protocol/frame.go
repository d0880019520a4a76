package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxRequestSize is Kafka's socket.request.max.bytes default.
const DefaultMaxRequestSize = 100 << 20

// ErrFrameTooLarge is returned for a frame whose size prefix exceeds the
// limit; the connection must be closed without reading the body.
var ErrFrameTooLarge = errors.New("frame exceeds socket.request.max.bytes")

// ErrFrameSize is returned for a negative or too small size prefix.
var ErrFrameSize = errors.New("invalid frame size")

// ReadFrame reads one size-prefixed frame from r. The size is checked
// against max before anything is allocated. buf is reused when it is large
// enough; the returned slice aliases it.
func ReadFrame(r io.Reader, max int32, buf []byte) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d", ErrFrameSize, n)
	case n > max:
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
