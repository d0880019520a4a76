package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestFaultLink: a link forwards both ways; cut closes open connections
// and refuses new ones; a blackholed direction delivers nothing until it
// heals and then delivers everything held, in order; delay holds each
// chunk back.
func TestFaultLink(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	l, err := newFaultLink("test", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", l.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, msg string, within time.Duration) error {
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(within))
		got, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got != msg+"\n" {
			t.Fatalf("echo of %q came back as %q", msg, got)
		}
		return nil
	}

	c, r := dial()
	if err := roundTrip(c, r, "hello", 2*time.Second); err != nil {
		t.Fatalf("healthy link: %v", err)
	}

	l.setBlackhole(true, false)
	err = roundTrip(c, r, "held", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blackholed link: got %v, want a read timeout", err)
	}
	l.heal()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after healing the blackhole: %q, %v; want the held bytes", got, err)
	}

	l.setBlackhole(false, true)
	if err := roundTrip(c, r, "down", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("down direction blackholed: got %v, want a read timeout", err)
	}
	l.heal()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "down\n" {
		t.Fatalf("after healing the down direction: %q, %v", got, err)
	}

	l.setDelay(300 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c, r, "slow", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("a round trip over a link delayed 300 ms each way took %v", d)
	}
	l.heal()

	l.setCut(true)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("open connection over a cut link: %v, want it closed", err)
	}
	// A refused connection may fail in the dial already (the reset can
	// beat the handshake's end) or at its first read.
	if c2, err := net.Dial("tcp", l.addr()); err == nil {
		defer c2.Close()
		if err := roundTrip(c2, bufio.NewReader(c2), "refused", 2*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("new connection over a cut link: %v, want it reset", err)
		}
	}
	l.heal()
	c3, r3 := dial()
	if err := roundTrip(c3, r3, "again", 2*time.Second); err != nil {
		t.Fatalf("healed link: %v", err)
	}
	if acc, ref := l.accepted.Load(), l.refused.Load(); acc != 2 || ref != 1 {
		t.Fatalf("accepted %d, refused %d; want 2 and 1", acc, ref)
	}
}
