package broker

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// servedConn dials the server and proves the connection is being served:
// an ApiVersions request gets its answer.
func servedConn(t *testing.T, addr string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	c.request(kmsg.NewPtrApiVersionsRequest(), 1)
	return c
}

// answeredWithin reports whether an ApiVersions request on c is answered
// within d.
func answeredWithin(t *testing.T, c *rawConn, d time.Duration) bool {
	t.Helper()
	c.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 2))
	c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := protocol.ReadFrame(c.nc, 1<<20, nil)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return true
}

// TestMaxConnectionsPerIP: connections from one address over
// max.connections.per.ip are closed at once; closing one makes room; an
// override for the address replaces the limit.
func TestMaxConnectionsPerIP(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.MaxConnectionsPerIP = 3 })
	var held []*rawConn
	for range 3 {
		held = append(held, servedConn(t, ts.addr))
	}
	extra := dialRaw(t, ts.addr)
	extra.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	extra.expectClosed()

	held[0].nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialRaw(t, ts.addr)
		c.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		if _, err := protocol.ReadFrame(c.nc, 1<<20, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room after closing a connection")
		}
		time.Sleep(20 * time.Millisecond)
	}

	ov := startServer(t, "", func(c *config.Broker) {
		c.MaxConnectionsPerIP = 1
		c.MaxConnectionsPerIPOverrides = map[string]int32{"127.0.0.1": 4}
	})
	for range 4 {
		servedConn(t, ov.addr)
	}
	extra = dialRaw(t, ov.addr)
	extra.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	extra.expectClosed()
}

// TestMaxConnectionsBlocksAccept: at max.connections the broker accepts
// nothing more — a new connection waits, unanswered, in the listen queue
// — until one of its connections closes.
func TestMaxConnectionsBlocksAccept(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.MaxConnections = 2 })
	first := servedConn(t, ts.addr)
	servedConn(t, ts.addr)
	waiting := dialRaw(t, ts.addr)
	if answeredWithin(t, waiting, 500*time.Millisecond) {
		t.Fatal("a connection over max.connections was served")
	}
	first.nc.Close()
	waiting.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := protocol.ReadFrame(waiting.nc, 1<<20, nil); err != nil {
		t.Fatalf("the waiting connection was not served once a slot freed: %v", err)
	}
}

// TestMaxConnectionsCloseWakesAcceptor: Close returns while an acceptor
// waits for a connection slot.
func TestMaxConnectionsCloseWakesAcceptor(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxConnections = 1
	s, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	addr := s.Addr().String()
	servedConn(t, addr)
	dialRaw(t, addr)
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung with an acceptor waiting for a slot")
	}
}

// TestConnLimitConfigRefused: bad overrides stop the server.
func TestConnLimitConfigRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxConnectionsPerIPOverrides = map[string]int32{"no-such-host.invalid": 3}
	if s, err := New(cfg, Options{Logger: testLogger()}); err == nil {
		s.Close()
		t.Fatal("an override naming an unknown host was accepted")
	}
}
