//go:build linux

package broker

import (
	"net"
	"syscall"
	"testing"
)

// A large fetch raises its connection's send buffer from
// socket.send.buffer.bytes to what its responses may hold (within the
// kernel's cap), once; a socket.send.buffer.bytes the operator set is
// kept.
func TestFetchSizesSendBuffer(t *testing.T) {
	ts := startServer(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := ts.configureConn(nc); err != nil {
		t.Fatal(err)
	}
	sndbuf := func() int {
		raw, err := nc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var gerr error
		if err := raw.Control(func(fd uintptr) { n, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil {
			t.Fatal(err)
		}
		if gerr != nil {
			t.Fatal(gerr)
		}
		return n
	}
	configured := sndbuf()
	c := &conn{s: ts.Server, nc: nc}
	ts.sizeFetchConn(c, 1000) // a fetch that fits the configured buffer
	if got := sndbuf(); got != configured {
		t.Fatalf("send buffer %d after a small fetch, want the configured %d", got, configured)
	}
	ts.sizeFetchConn(c, 4<<20)
	raised := sndbuf()
	if raised <= configured {
		t.Fatalf("send buffer %d after a 4 MiB fetch, configured %d", raised, configured)
	}
	if !c.fetchSendBuffer {
		t.Fatal("the connection is not marked as sized")
	}

	// An operator's socket.send.buffer.bytes is what every socket keeps.
	props := ts.cfg.Props
	ts.cfg.Props = map[string]string{"socket.send.buffer.bytes": "102400"}
	defer func() { ts.cfg.Props = props }()
	nc2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	acc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	if err := ts.configureConn(acc); err != nil {
		t.Fatal(err)
	}
	nc = acc
	set := sndbuf()
	c2 := &conn{s: ts.Server, nc: acc}
	ts.sizeFetchConn(c2, 4<<20)
	if got := sndbuf(); got != set || c2.fetchSendBuffer {
		t.Fatalf("send buffer %d after a fetch with socket.send.buffer.bytes set, want the configured %d", got, set)
	}
}
