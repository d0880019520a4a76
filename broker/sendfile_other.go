//go:build !linux

package broker

import (
	"errors"
	"os"
	"syscall"
)

// haveSendfile says whether sendfile below works on this system: the
// zero-copy fetch path is Linux's; elsewhere records are copied.
const haveSendfile = false

func sendfile(conn syscall.RawConn, f *os.File, pos, n int64) (int64, error) {
	return 0, errors.New("sendfile: not supported on this system")
}
