package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrMalformedHeader is returned for a request header that cannot be read.
var ErrMalformedHeader = errors.New("malformed request header")

// RequestHeader is a parsed request header (versions 0 to 2).
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// PeekKey reads the API key, version and correlation id that every request
// header starts with, whatever its version.
func PeekKey(frame []byte) (key, version int16, correlationID int32, err error) {
	if len(frame) < 8 {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrMalformedHeader, len(frame))
	}
	key = int16(binary.BigEndian.Uint16(frame))
	version = int16(binary.BigEndian.Uint16(frame[2:]))
	correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	return key, version, correlationID, nil
}

// requestHeaderVersion is the header version a request of this key and
// version uses: 2 for flexible versions, 0 for ControlledShutdown v0, else 1.
func requestHeaderVersion(req kmsg.Request) int {
	switch {
	case req.IsFlexible():
		return 2
	case req.Key() == 7 && req.GetVersion() == 0:
		return 0
	}
	return 1
}

// ParseRequest reads the header of frame and decodes the body into a kmsg
// request of the header's key and version. It returns the header even when
// the body fails to decode. The caller must have checked that key and
// version are supported: kmsg cannot read versions it does not know.
func ParseRequest(frame []byte) (RequestHeader, kmsg.Request, error) {
	var h RequestHeader
	var err error
	h.Key, h.Version, h.CorrelationID, err = PeekKey(frame)
	if err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w: unknown api key %d", ErrMalformedHeader, h.Key)
	}
	req.SetVersion(h.Version)
	b := frame[8:]
	hv := requestHeaderVersion(req)
	if hv >= 1 {
		if len(b) < 2 {
			return h, nil, fmt.Errorf("%w: client id truncated", ErrMalformedHeader)
		}
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		switch {
		case n == -1:
		case n < -1 || int(n) > len(b):
			return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformedHeader, n)
		default:
			s := string(b[:n])
			h.ClientID = &s
			b = b[n:]
		}
	}
	if hv >= 2 {
		b, err = skipTags(b)
		if err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(b); err != nil {
		return h, nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section, which request headers carry but
// Kafka defines no tags for.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tag count", ErrMalformedHeader)
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		_, l := binary.Uvarint(b) // tag
		if l <= 0 {
			return nil, fmt.Errorf("%w: tag", ErrMalformedHeader)
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || size > uint64(len(b)-l) {
			return nil, fmt.Errorf("%w: tag size", ErrMalformedHeader)
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// AppendResponse appends a whole response frame to dst: the size, the
// response header of the version that matches the request (v1 with an empty
// tag section for flexible responses, except ApiVersions, whose response
// header is always v0 so that any client can read it) and the body.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
