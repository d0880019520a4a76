//go:build !linux

package fetch

import (
	"errors"
	"os"
	"syscall"
)

// HaveSendfile says whether sendfile below works on this system: the
// zero-copy fetch path is Linux's; elsewhere records are copied.
const HaveSendfile = false

func sendfile(conn syscall.RawConn, f *os.File, pos, n int64) (sent, calls int64, err error) {
	return 0, 0, errors.New("sendfile: not supported on this system")
}

func cork(conn syscall.RawConn, on bool) error { return nil }
