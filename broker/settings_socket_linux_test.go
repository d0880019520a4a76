package broker

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// serverSockopt reads a socket option of the server's side of its one
// accepted connection.
func serverSockopt(t *testing.T, s *Server, opt int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		var tc *net.TCPConn
		for nc := range s.conns {
			tc, _ = nc.(*net.TCPConn)
		}
		s.mu.Unlock()
		if tc != nil {
			rc, err := tc.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var v int
			var gerr error
			rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) })
			if gerr != nil {
				t.Fatal(gerr)
			}
			return v
		}
		if time.Now().After(deadline) {
			t.Fatal("no accepted connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSocketBufferSizes: socket.send.buffer.bytes and
// socket.receive.buffer.bytes are the accepted sockets' SO_SNDBUF and
// SO_RCVBUF (Linux reports twice the size set, for its bookkeeping).
func TestSocketBufferSizes(t *testing.T) {
	const snd, rcv = 48 << 10, 40 << 10
	ts := startServer(t, "", func(c *config.Broker) {
		c.SocketSendBufferBytes, c.SocketReceiveBufferBytes = snd, rcv
	})
	servedConn(t, ts.addr)
	if got := serverSockopt(t, ts.Server, syscall.SO_SNDBUF); got != 2*snd {
		t.Errorf("SO_SNDBUF = %d, want %d", got, 2*snd)
	}
	if got := serverSockopt(t, ts.Server, syscall.SO_RCVBUF); got != 2*rcv {
		t.Errorf("SO_RCVBUF = %d, want %d", got, 2*rcv)
	}
}

// TestSocketListenBacklog: with the acceptor held at max.connections
// (one more connection accepted and waiting in it for a slot), the kernel
// completes only socket.listen.backlog.size (+1, as Linux counts) more
// handshakes; further connects time out. With Kafka's default of 50 they
// all complete.
func TestSocketListenBacklog(t *testing.T) {
	completed := func(backlog int32) int {
		ts := startServer(t, "", func(c *config.Broker) {
			c.MaxConnections = 1
			c.SocketListenBacklogSize = backlog
		})
		servedConn(t, ts.addr)
		n := 0
		for range 8 {
			nc, err := net.DialTimeout("tcp", ts.addr, 300*time.Millisecond)
			if err == nil {
				n++
				t.Cleanup(func() { nc.Close() })
			}
		}
		return n
	}
	if n := completed(1); n > 3 {
		t.Errorf("backlog 1: %d connections completed past the limit, want at most 3", n)
	}
	if n := completed(50); n != 8 {
		t.Errorf("backlog 50: %d of 8 queued connections completed", n)
	}
}
