package replica

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// loopbackPair is a connected TCP pair over loopback: SO_RCVLOWAT is a
// TCP socket's, which net.Pipe has not.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// frame is a response of body with its size in front.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// A response of megabytes that arrives in pieces, with pauses between
// (a leader's sendfile into a socket the follower drains), is read whole
// into the buffer, byte for byte; the small response after it, whose size
// and body are all that arrive, is read at once, not held back by the low
// mark the large one set; and the large one's buffer is reused.
func TestReadResponseLargeThenSmall(t *testing.T) {
	client, server := loopbackPair(t)
	c := &leaderConn{nc: client}
	large := make([]byte, 3<<20+12345)
	for i := range large {
		large[i] = byte(i * 7)
	}
	sent := make(chan error, 1)
	go func() {
		// Pieces, the last of 100 KiB: the fetcher waits for it with
		// the low mark at its size.
		f := frame(large)
		for len(f) > 0 {
			n := min(len(f), 256<<10)
			if len(f)-n < 100<<10 {
				n = len(f) - 100<<10
			}
			if n <= 0 {
				n = len(f)
			}
			if _, err := server.Write(f[:n]); err != nil {
				sent <- err
				return
			}
			f = f[n:]
			time.Sleep(5 * time.Millisecond)
		}
		sent <- nil
	}()
	client.SetDeadline(time.Now().Add(20 * time.Second))
	got, err := c.readResponse(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, large) {
		t.Fatalf("read %d bytes that differ from the %d sent", len(got), len(large))
	}

	// The small response comes while the fetcher waits for it.
	small := []byte{0, 0, 0, 9, 1, 2, 3, 4}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, err := server.Write(frame(small))
		sent <- err
	}()
	start := time.Now()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	got, err = c.readResponse(client)
	if err != nil {
		t.Fatalf("the small response after a large one: %v after %v", err, time.Since(start))
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, small) {
		t.Fatalf("read %x, want %x", got, small)
	}
	if cap(c.rbuf) < len(large)+4 {
		t.Fatalf("read buffer of %d bytes kept, want the large response's %d", cap(c.rbuf), len(large)+4)
	}
}

// A response whose size is out of bounds, or that bytes follow while one
// request is in flight, is an error, with no allocation of its size.
func TestReadResponseRefusesBadFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 1}},
		{"too short", []byte{0, 0, 0, 2, 0, 1}},
		{"huge", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1}},
		{"bytes after", append(frame([]byte{0, 0, 0, 1}), 9, 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := loopbackPair(t)
			c := &leaderConn{nc: client}
			if _, err := server.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // all of it there for the first read
			client.SetDeadline(time.Now().Add(5 * time.Second))
			if got, err := c.readResponse(client); err == nil {
				t.Fatalf("read %x, want an error", got)
			}
			if cap(c.rbuf) > minReadBuf {
				t.Fatalf("read buffer grew to %d bytes", cap(c.rbuf))
			}
		})
	}
}
