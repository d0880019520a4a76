package protocol

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The client side of the wire, for the connections a node opens itself
// (a follower's to its leader, the SASL exchange before the metadata
// quorum's frames): a request frame out, its response frame back.

// AppendRequest appends a whole request frame to dst: the size, the
// request header (v1, or v2 with an empty tag section for a flexible
// request) and req at its version.
func AppendRequest(dst []byte, correlationID int32, clientID string, req kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // the size, set below
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ReadResponse reads the response to req, sent with correlationID, from
// r: a frame of at most max bytes, read into buf when it is large enough.
// It returns the frame (to reuse as the next buf) and the response
// decoded from it, which may alias the frame.
func ReadResponse(r io.Reader, max int32, buf []byte, correlationID int32, req kmsg.Request) ([]byte, kmsg.Response, error) {
	frame, err := ReadFrame(r, max, buf)
	if err != nil {
		return buf, nil, err
	}
	resp, err := DecodeResponse(frame, correlationID, req)
	return frame, resp, err
}

// DecodeResponse decodes the response to req, sent with correlationID,
// from frame (a response frame without its size). The response may alias
// the frame.
func DecodeResponse(frame []byte, correlationID int32, req kmsg.Request) (kmsg.Response, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: response of %d bytes", ErrFrameSize, len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != correlationID {
		return nil, fmt.Errorf("response to correlation id %d, want %d", got, correlationID)
	}
	body := frame[4:]
	// ApiVersions answers with header v0 whatever its version, so that a
	// client that asked too new a version can read the error.
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
