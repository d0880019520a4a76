package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// recordBatch is a batch of n records of size bytes each, uncompressed.
func recordBatch(t testing.TB, n, size int) []byte {
	t.Helper()
	recs := make([]protocol.Record, n)
	for i := range recs {
		recs[i] = protocol.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte('a' + i)}, size)}
	}
	batch, err := protocol.BuildBatch(protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// TestZeroCopyWriterTruncated: a truncation between the read of a slice
// and its send (the log cut below it, and new batches written where it
// was) ends the connection with the frame incomplete, never a frame of
// mixed bytes.
func TestZeroCopyWriterTruncated(t *testing.T) {
	m, err := storage.OpenManager(storage.ManagerConfig{FS: vfs.Default, Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lg, err := m.GetOrCreateLog("t", 0, [16]byte{1}, storage.DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, refill := range []bool{false, true} {
		for range 8 {
			if _, err := lg.Append(recordBatch(t, 16, 1024), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		start := lg.LogEndOffset() - 8*16
		rr, err := lg.ReadSlice(start, 1<<20, lg.LogEndOffset(), true)
		if err != nil || rr.Slice == nil {
			t.Fatalf("read slice: %v", err)
		}
		if err := lg.TruncateTo(start); err != nil {
			t.Fatal(err)
		}
		if refill {
			// More bytes than were cut, so the whole slice reads back.
			for range 9 {
				if _, err := lg.Append(recordBatch(t, 16, 1000), 0, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchResponseTopicPartition())
		resp.Topics = append(resp.Topics, rt)
		z := &ZeroCopyResponse{FetchResponse: resp, Records: []FileRecords{{Slice: rr.Slice}}}

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- nil
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			got <- b
		}()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		raw, err := nc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		zw := &Writer{raw: raw}
		w := bufio.NewWriter(nc)
		err = zw.Write(w, 1, z)
		w.Flush()
		nc.Close()
		z.Release()
		ln.Close()
		if !errors.Is(err, ErrRecordsChanged) {
			t.Fatalf("refill %v: write after a truncation: %v", refill, err)
		}
		b := <-got
		if len(b) >= 4 && int(binary.BigEndian.Uint32(b))+4 <= len(b) {
			t.Fatalf("refill %v: a whole frame of %d bytes went out", refill, len(b))
		}
	}
}

// TestZeroCopyWriterPaths: the pieces path with sendfile, the same through
// a buffer (a connection without a RawConn), and the fallback that reads
// the records into the response all write the frame kmsg writes for the
// response with the records inline, at a plain and a flexible version.
func TestZeroCopyWriterPaths(t *testing.T) {
	m, err := storage.OpenManager(storage.ManagerConfig{FS: vfs.Default, Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs []*storage.Log
	for p, n := range []int{3, 40} { // a one-byte and a multi-byte length
		lg, err := m.GetOrCreateLog("t", int32(p), [16]byte{1}, storage.DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lg.Append(recordBatch(t, n, 1+n), 0, 0); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, lg)
	}
	for _, v := range []int16{11, 12} {
		build := func() (*kmsg.FetchResponse, *ZeroCopyResponse) {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			z := &ZeroCopyResponse{FetchResponse: resp}
			for i, lg := range logs {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = fmt.Sprintf("t%d", i)
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.HighWatermark = lg.LogEndOffset()
				rt.Partitions = append(rt.Partitions, rp, kmsg.NewFetchResponseTopicPartition())
				resp.Topics = append(resp.Topics, rt)
				rr, err := lg.ReadSlice(0, 1<<20, lg.LogEndOffset(), true)
				if err != nil || rr.Slice == nil {
					t.Fatalf("read slice: %v", err)
				}
				z.Records = append(z.Records, FileRecords{Topic: i, Partition: 0, Slice: rr.Slice})
			}
			return resp, z
		}
		// The frame with the records inline.
		inline, z := build()
		for _, r := range z.Records {
			b := make([]byte, r.Slice.Len())
			if _, err := r.Slice.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			inline.Topics[r.Topic].Partitions[r.Partition].RecordBatches = b
		}
		want := protocol.AppendResponse(nil, 7, inline)
		z.Release()

		for _, path := range []string{"sendfile", "buffer", "fallback"} {
			_, z := build()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan []byte, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				b, _ := io.ReadAll(c)
				c.Close()
				got <- b
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			zw := &Writer{}
			if path == "sendfile" {
				if zw.raw, err = nc.(*net.TCPConn).SyscallConn(); err != nil {
					t.Fatal(err)
				}
			}
			before := SendfileBytes()
			w := bufio.NewWriter(nc)
			if path == "fallback" {
				err = zw.writeCopied(w, 7, z)
			} else {
				err = zw.Write(w, 7, z)
			}
			if err == nil {
				err = w.Flush()
			}
			nc.Close()
			ln.Close()
			z.Release()
			if err != nil {
				t.Fatalf("v%d %s: %v", v, path, err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("v%d %s: wrote %d bytes, want the %d of the inline frame", v, path, len(b), len(want))
			}
			if sent := SendfileBytes() - before; (path == "sendfile") != (sent > 0) {
				t.Fatalf("v%d %s: %d bytes through sendfile", v, path, sent)
			}
		}
	}
}
