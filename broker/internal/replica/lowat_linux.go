//go:build linux

package replica

import (
	"net"
	"syscall"
)

// setRecvLowat sets the connection's SO_RCVLOWAT: the kernel then wakes
// a reader waiting on the socket only once n bytes are there (or its
// receive buffer is full), instead of on every segment's arrival.
func setRecvLowat(nc net.Conn, n int) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
