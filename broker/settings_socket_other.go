//go:build !unix

package broker

import (
	"errors"
	"net"
)

// errSocketSetting is returned where this system's sockets cannot take a
// setting: start-up stops rather than run without it.
var errSocketSetting = errors.New("not supported on this system")

func setRecvBuffer(fd uintptr, n int) error { return errSocketSetting }

func setBacklog(ln net.Listener, backlog int) error { return errSocketSetting }
