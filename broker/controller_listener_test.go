package broker

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// newControllerListener opens a controller listener on a free local port
// for a server that is made but not started.
func newControllerListener(t *testing.T, tweak func(*config.Broker)) net.Listener {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	tweak(cfg)
	s, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ln, err := s.listenControllerSocket(config.Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// acceptAsync runs Accept in the background.
func acceptAsync(ln net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

func dialCtrl(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c within d.
func closedByServer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

// TestControllerListenerPerIPLimit: max.connections.per.ip applies to
// the controller listener, counted apart from the broker's listeners: a
// second connection from the address is closed at once, and a slot given
// back by a closed connection admits the next.
func TestControllerListenerPerIPLimit(t *testing.T) {
	ln := newControllerListener(t, func(c *config.Broker) { c.MaxConnectionsPerIP = 1 })
	first := dialCtrl(t, ln)
	accepted := <-acceptAsync(ln)
	if accepted == nil {
		t.Fatal("the first connection was not accepted")
	}
	next := acceptAsync(ln)
	second := dialCtrl(t, ln)
	if !closedByServer(second, 5*time.Second) {
		t.Fatal("a second connection from the address stayed open past max.connections.per.ip=1")
	}
	accepted.Close()
	first.Close()
	dialCtrl(t, ln)
	select {
	case c := <-next:
		if c == nil {
			t.Fatal("Accept failed")
		}
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after the slot was given back was not accepted")
	}
}

// TestControllerListenerMaxConnections: at max.connections the
// controller listener accepts nothing more until a connection closes.
func TestControllerListenerMaxConnections(t *testing.T) {
	ln := newControllerListener(t, func(c *config.Broker) { c.MaxConnections = 1 })
	dialCtrl(t, ln)
	accepted := <-acceptAsync(ln)
	if accepted == nil {
		t.Fatal("the first connection was not accepted")
	}
	next := acceptAsync(ln)
	dialCtrl(t, ln)
	select {
	case <-next:
		t.Fatal("a second connection was accepted at max.connections=1")
	case <-time.After(300 * time.Millisecond):
	}
	accepted.Close()
	select {
	case c := <-next:
		if c == nil {
			t.Fatal("Accept failed")
		}
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not accepted once a slot was free")
	}
}

// TestControllerListenerCloseWakesAcceptor: closing the listener ends an
// Accept waiting for a slot.
func TestControllerListenerCloseWakesAcceptor(t *testing.T) {
	ln := newControllerListener(t, func(c *config.Broker) { c.MaxConnections = 1 })
	dialCtrl(t, ln)
	if c := <-acceptAsync(ln); c == nil {
		t.Fatal("the first connection was not accepted")
	}
	next := acceptAsync(ln)
	dialCtrl(t, ln)
	time.Sleep(100 * time.Millisecond)
	ln.Close()
	select {
	case c := <-next:
		if c != nil {
			t.Fatal("a connection was accepted over the limit")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
}
