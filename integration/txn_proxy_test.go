package integration

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every byte it reads with the same byte and counts
// what it received per connection.
func echoServer(t *testing.T) (addr string, received chan int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	received = make(chan int64, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(c, c)
				received <- n
			}()
		}
	}()
	return ln.Addr().String(), received
}

// TestTxnProxy: the fault proxy forwards both ways untouched without
// cuts, cuts a connection after its budget in either direction (the far
// side gets no more than 2*mean bytes and both sides see the connection
// end), and cutAll drops open connections.
func TestTxnProxy(t *testing.T) {
	const payload = 1 << 20
	for _, tc := range []struct {
		name           string
		meanUp, meanDn int64
		cutAll         bool
		wantIntact     bool
		maxReceived    int64 // by the echo server; -1: no bound
	}{
		{name: "no cuts", wantIntact: true, maxReceived: -1},
		{name: "cut upstream", meanUp: 100, maxReceived: 200},
		{name: "cut downstream", meanDn: 100, maxReceived: -1},
		{name: "cut all", cutAll: true, maxReceived: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, received := echoServer(t)
			px := startProxy(t, target, 7)
			px.setRandomCuts(tc.meanUp, tc.meanDn)
			conn, err := net.Dial("tcp", px.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			if tc.cutAll {
				// Wait until the proxy holds the connection, then drop it.
				deadline := time.Now().Add(5 * time.Second)
				for px.cutAll() == 0 {
					if time.Now().After(deadline) {
						t.Fatal("the proxy never held the connection")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			sent := bytes.Repeat([]byte("0123456789abcdef"), payload/16)
			go conn.Write(sent)
			got, err := io.ReadAll(io.LimitReader(conn, payload))
			if tc.wantIntact {
				if err != nil || !bytes.Equal(got, sent) {
					t.Fatalf("read %d of %d bytes back (err %v), want them intact", len(got), payload, err)
				}
				if _, cuts := px.stats(); cuts != 0 {
					t.Fatalf("%d cuts without cuts enabled", cuts)
				}
				return
			}
			if len(got) >= payload {
				t.Fatalf("read all %d bytes through a connection that should have been cut", len(got))
			}
			if !bytes.Equal(got, sent[:len(got)]) {
				t.Fatal("the bytes before the cut differ from those sent")
			}
			if err != nil && !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("reading a cut connection: %v", err)
			}
			if tc.meanDn > 0 && int64(len(got)) > 2*tc.meanDn {
				t.Fatalf("read %d bytes, the downstream budget is at most %d", len(got), 2*tc.meanDn)
			}
			select {
			case n := <-received:
				if tc.maxReceived >= 0 && n > tc.maxReceived {
					t.Fatalf("the server received %d bytes, the upstream budget is at most %d", n, tc.maxReceived)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server side of a cut connection stayed open")
			}
			if _, cuts := px.stats(); !tc.cutAll && cuts != 1 {
				t.Fatalf("%d random cuts counted, want 1", cuts)
			}
		})
	}
}

// isReset reports a connection reset, which a read may see instead of EOF
// when the proxy closes with unread data.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
