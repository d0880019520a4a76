//go:build linux

package fetch

import (
	"os"
	"syscall"
)

// HaveSendfile says whether sendfile below works on this system.
const HaveSendfile = true

// sendfile sends n bytes of f from pos to the socket behind conn with
// sendfile(2) and an explicit offset, so that senders sharing f never
// touch its file offset. It waits in the poller while the socket is full.
// It returns fewer than n bytes without an error only when f ends first,
// and the number of sendfile calls made.
func sendfile(conn syscall.RawConn, f *os.File, pos, n int64) (sent, calls int64, err error) {
	fc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var serr error
	err = fc.Read(func(src uintptr) bool {
		off := pos
		werr := conn.Write(func(dst uintptr) bool {
			for sent < n {
				m, err := syscall.Sendfile(int(dst), int(src), &off, int(min(n-sent, 1<<30)))
				calls++
				if m > 0 {
					sent += int64(m)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket takes more
				case err == syscall.EINTR:
				case err != nil:
					serr = err
					return true
				case m == 0:
					return true // the file ended
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return sent, calls, err
}

// cork sets (on) or clears TCP_CORK on the socket behind conn. While it
// is set the kernel sends only full segments: the encoded bytes between
// two partitions' records share a segment with the records after them,
// and the end of one partition's records is not pushed as a short
// segment of its own, which TCP_NODELAY would do at the end of every
// sendfile call. Clearing it sends what is left.
func cork(conn syscall.RawConn, on bool) error {
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := conn.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	}); err != nil {
		return err
	}
	return serr
}
