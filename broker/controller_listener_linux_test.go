package broker

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

func sockopt(t *testing.T, c syscall.Conn, opt int) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// TestControllerListenerSocketSettings: the controller listener's
// accepted sockets have socket.send.buffer.bytes and
// socket.receive.buffer.bytes (Linux reports twice the size set) and no
// Nagle delay, as the broker's listeners do.
func TestControllerListenerSocketSettings(t *testing.T) {
	const snd, rcv = 48 << 10, 40 << 10
	ln := newControllerListener(t, func(c *config.Broker) {
		c.SocketSendBufferBytes, c.SocketReceiveBufferBytes = snd, rcv
	})
	dialCtrl(t, ln)
	var accepted net.Conn
	select {
	case accepted = <-acceptAsync(ln):
	case <-time.After(5 * time.Second):
	}
	if accepted == nil {
		t.Fatal("not accepted")
	}
	defer accepted.Close()
	tc, ok := accepted.(*quotaConn).Conn.(*net.TCPConn)
	if !ok {
		t.Fatalf("accepted %T", accepted)
	}
	if got := sockopt(t, tc, syscall.SO_SNDBUF); got != 2*snd {
		t.Errorf("SO_SNDBUF = %d, want %d", got, 2*snd)
	}
	if got := sockopt(t, tc, syscall.SO_RCVBUF); got != 2*rcv {
		t.Errorf("SO_RCVBUF = %d, want %d", got, 2*rcv)
	}
	rc, _ := tc.SyscallConn()
	var nodelay int
	rc.Control(func(fd uintptr) {
		nodelay, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	})
	if nodelay == 0 {
		t.Error("TCP_NODELAY not set")
	}
}
