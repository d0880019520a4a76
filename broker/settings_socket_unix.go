//go:build unix

package broker

import (
	"errors"
	"net"
	"syscall"
)

func setRecvBuffer(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}

// setBacklog listens again with the configured backlog: Go listens with
// the system's maximum, and a second listen on a listening socket only
// changes its accept queue's length (Linux and the BSDs), which the
// kernel still caps at its somaxconn.
func setBacklog(ln net.Listener, backlog int) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return errors.New("not a TCP listener")
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return err
	}
	return controlErr(rc, func(fd uintptr) error { return syscall.Listen(int(fd), backlog) })
}
