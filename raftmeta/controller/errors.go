package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a Kafka error code together with the message Kafka sends with it
// (the ErrorMessage field of most responses). errors.Is(err, kerr.X) works
// on it.
type Error struct {
	Code    *kerr.Error
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.Error()
	}
	return e.Code.Message + ": " + e.Message
}

// Unwrap returns the Kafka error code.
func (e *Error) Unwrap() error { return e.Code }

func apiError(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Kafka error code for err: 0 for nil, the code of a
// *kerr.Error in its chain, else UNKNOWN_SERVER_ERROR.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// ErrorMessage returns the message to send with err's code, or nil when err
// is nil or carries no message of its own.
func ErrorMessage(err error) *string {
	if e, ok := errors.AsType[*Error](err); ok && e.Message != "" {
		m := e.Message
		return &m
	}
	return nil
}
