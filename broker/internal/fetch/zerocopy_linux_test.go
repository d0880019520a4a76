package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// TestZeroCopyWriterUncorks: a response of many partitions, sent corked
// (Writer.Write), reaches a client that keeps the connection open whole
// and at once, with no flush by the caller, and the socket is left
// without TCP_CORK, so the next response (a small one written through
// the buffer) is not held back by the kernel either.
func TestZeroCopyWriterUncorks(t *testing.T) {
	m, err := storage.OpenManager(storage.ManagerConfig{FS: vfs.Default, Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	z := &ZeroCopyResponse{FetchResponse: resp}
	inline := kmsg.NewPtrFetchResponse()
	inline.Version = 12
	rt, it := kmsg.NewFetchResponseTopic(), kmsg.NewFetchResponseTopic()
	rt.Topic, it.Topic = "t", "t"
	for p := range 16 {
		lg, err := m.GetOrCreateLog("t", int32(p), [16]byte{1}, storage.DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		// Odd sizes, so no partition's records end on a segment's edge.
		if _, err := lg.Append(recordBatch(t, 7, 1000+p), 0, 0); err != nil {
			t.Fatal(err)
		}
		rr, err := lg.ReadSlice(0, 1<<20, lg.LogEndOffset(), true)
		if err != nil || rr.Slice == nil {
			t.Fatalf("read slice: %v", err)
		}
		defer rr.Slice.Release()
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark = int32(p), lg.LogEndOffset()
		rt.Partitions = append(rt.Partitions, rp)
		z.Records = append(z.Records, FileRecords{Topic: 0, Partition: p, Slice: rr.Slice})
		b := make([]byte, rr.Slice.Len())
		if _, err := rr.Slice.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		rp.RecordBatches = b
		it.Partitions = append(it.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	inline.Topics = append(inline.Topics, it)
	want := protocol.AppendResponse(nil, 7, inline)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer nc.Close()
	tc := nc.(*net.TCPConn)
	if err := tc.SetNoDelay(true); err != nil {
		t.Fatal(err)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	zw := NewWriter(raw)
	w := bufio.NewWriter(nc)
	if err := zw.Write(w, 7, z); err != nil {
		t.Fatalf("write: %v", err)
	}
	var corked int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		corked, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK)
	}); err != nil || gerr != nil {
		t.Fatalf("get TCP_CORK: %v %v", err, gerr)
	}
	if corked != 0 {
		t.Fatalf("TCP_CORK = %d after the response, want 0", corked)
	}
	// The kernel sends a corked partial segment after 200 ms: the frame's
	// end must come well before that.
	got, err := readFrameWithin(client, 150*time.Millisecond)
	if err != nil {
		t.Fatalf("read the frame: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want the %d of the inline frame", len(got), len(want))
	}
	// A small response after it goes out at once as well.
	if _, err := w.Write([]byte{0, 0, 0, 1, 9}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := readFrameWithin(client, 150*time.Millisecond); err != nil || !bytes.Equal(got, []byte{0, 0, 0, 1, 9}) {
		t.Fatalf("the next frame: %x, %v", got, err)
	}
}

// readFrameWithin reads one size-prefixed frame from c within d.
func readFrameWithin(c net.Conn, d time.Duration) ([]byte, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, fmt.Errorf("frame size: %w", err)
	}
	b := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(b, size[:])
	if _, err := io.ReadFull(c, b[4:]); err != nil {
		return b, fmt.Errorf("frame body: %w", err)
	}
	return b, nil
}
