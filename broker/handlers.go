package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// request is one decoded request and the connection it came on.
type request struct {
	hdr  protocol.RequestHeader
	req  kmsg.Request
	conn *conn
}

// result is what the first phase of a handler hands back: either the
// response, or a function that waits in the background (for the high
// watermark, or for data in a long poll) and then builds it. A result with
// neither writes nothing (acks=0).
type result struct {
	resp kmsg.Response
	wait func() kmsg.Response
}

// handler is the first phase of a request, run in connection order. An
// error closes the connection.
type handler func(s *Server, r *request) (result, error)

// handlers and supportedVersions are filled by each API file's init: one
// registration per key, read by both ApiVersions and the version check.
var (
	handlers          [kmsg.MaxKey + 1]handler
	supportedVersions protocol.Versions
)

// register serves key for versions min to max with h.
func register(key, min, max int16, h handler) {
	supportedVersions.Register(key, min, max)
	handlers[key] = h
}

// respond wraps a ready response.
func respond(resp kmsg.Response) (result, error) { return result{resp: resp}, nil }

// Kafka error codes used across handlers.
var (
	errUnsupportedVersion = kerr.UnsupportedVersion.Code
)

const apiKeyApiVersions = 18

// errCode is the Kafka error code of err, or UNKNOWN_SERVER_ERROR for an
// error that carries none.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
