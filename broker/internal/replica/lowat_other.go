//go:build !linux

package replica

import "net"

// setRecvLowat does nothing where TCP's SO_RCVLOWAT does not hold back
// poll's readiness (Linux's does): each segment's arrival wakes the
// reader, as without it.
func setRecvLowat(net.Conn, int) error { return nil }
