package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/fetch"
	"github.com/gregorbroker/gregor/protocol"
)

// startServerOpts is startServer with Options.
func startServerOpts(t testing.TB, opts Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	opts.Logger = testLogger()
	s, err := New(testConfig(t, dir), opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, dir: dir, addr: s.Addr().String()}
}

// frameConn is a client that writes request frames and reads response
// frames itself, so a test sees the exact bytes the broker sends.
type frameConn struct {
	nc   net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func dialFrames(t testing.TB, addr string) *frameConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &frameConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// send writes one request at its own version.
func (c *frameConn) send(req kmsg.Request) error {
	c.corr++
	c.buf = c.fmt.AppendRequest(c.buf[:0], req, c.corr)
	_, err := c.nc.Write(c.buf)
	return err
}

// frame reads one response frame into c.buf and returns its body after
// the correlation id (and the tagged fields of a flexible header).
func (c *frameConn) frame(flexible bool) ([]byte, int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, 0, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	b := c.buf[:n]
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, 0, err
	}
	if n < 4 {
		return nil, 0, fmt.Errorf("frame of %d bytes", n)
	}
	corr := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if flexible {
		if len(b) == 0 || b[0] != 0 {
			return nil, 0, fmt.Errorf("response header tags %v", b[:min(len(b), 1)])
		}
		b = b[1:]
	}
	return b, corr, nil
}

// fetch sends req and decodes the answer.
func (c *frameConn) fetch(t testing.TB, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	if err := c.send(req); err != nil {
		t.Fatal(err)
	}
	body, corr, err := c.frame(req.IsFlexible())
	if err != nil {
		t.Fatal(err)
	}
	if corr != c.corr {
		t.Fatalf("correlation id %d, want %d", corr, c.corr)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v%d response does not decode: %v", req.Version, err)
	}
	return resp
}

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

// produceBatches appends count copies of batch to a partition.
func produceBatches(t testing.TB, ts *testServer, topic string, partition int32, batch []byte, count int) {
	t.Helper()
	p := ts.leaderPartition(topic, partition)
	if p == nil {
		t.Fatalf("no partition %s-%d", topic, partition)
	}
	cl := dialFrames(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for range count {
		if err := cl.send(req); err != nil {
			t.Fatal(err)
		}
		body, _, err := cl.frame(true)
		if err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		if err := resp.ReadFrom(body); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: %v %+v", err, resp.Topics)
		}
	}
}

// TestFetchZeroCopyFrames fetches several partitions of two topics at every
// kind of Fetch version (plain, with sessions, flexible, by topic id),
// with limits that leave some partitions empty: every frame decodes, and
// every partition's records are exactly what the log holds for it, sent
// with sendfile.
func TestFetchZeroCopyFrames(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "zc-a", 3, nil)
	createTopic(t, adm, "zc-b", 2, nil)
	for p, n := range []int{40, 0, 7} {
		produceBatches(t, ts, "zc-a", int32(p), recordBatch(t, 4, 300), n)
	}
	for p, n := range []int{3, 25} {
		produceBatches(t, ts, "zc-b", int32(p), recordBatch(t, 16, 1024), n)
	}
	ids := map[string][16]byte{"zc-a": topicID(t, ts, "zc-a"), "zc-b": topicID(t, ts, "zc-b")}
	parts := map[string]int{"zc-a": 3, "zc-b": 2}
	// Some offsets fall inside a batch; the empty partition reads at 0.
	offsets := map[string][]int64{"zc-a": {0, 0, 5}, "zc-b": {0, 4}}
	cl := dialFrames(t, ts.addr)
	before := fetch.SendfileBytes()
	var records, responses int64
	for _, v := range []int16{4, 6, 7, 11, 12, 13, 15, 16, 17, 18} {
		for _, lim := range []struct{ total, part int32 }{{50 << 20, 1 << 20}, {20000, 9000}, {1, 1}} {
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			req.ReplicaID = -1
			req.ReplicaState.ID = -1
			req.MaxBytes = lim.total
			req.SessionEpoch = -1
			for _, topic := range []string{"zc-a", "zc-b"} {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = topic, ids[topic]
				for p := range parts[topic] {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition = int32(p)
					rp.FetchOffset = offsets[topic][p]
					rp.PartitionMaxBytes = lim.part
					rp.CurrentLeaderEpoch = -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			resp := cl.fetch(t, req)
			responses++
			if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
				t.Fatalf("v%d: error %d, %d topics", v, resp.ErrorCode, len(resp.Topics))
			}
			remaining := int(lim.total)
			minOne := true
			for i, rt := range resp.Topics {
				topic := []string{"zc-a", "zc-b"}[i]
				if (v < 13 && rt.Topic != topic) || (v >= 13 && rt.TopicID != ids[topic]) || len(rt.Partitions) != parts[topic] {
					t.Fatalf("v%d: topic %d is %q %x with %d partitions", v, i, rt.Topic, rt.TopicID, len(rt.Partitions))
				}
				for _, rp := range rt.Partitions {
					lg := ts.leaderPartition(topic, rp.Partition).Log
					offset := offsets[topic][rp.Partition]
					limit := min(int(lim.part), remaining)
					want, err := lg.Read(offset, int32(max(limit, 0)), lg.LogEndOffset(), minOne)
					if err != nil {
						t.Fatal(err)
					}
					if rp.ErrorCode != 0 || rp.HighWatermark != lg.LogEndOffset() || !bytes.Equal(rp.RecordBatches, want.Data) {
						t.Fatalf("v%d %s-%d limits %v: error %d, hw %d, %d bytes of records, want %d", v, topic, rp.Partition, lim, rp.ErrorCode, rp.HighWatermark, len(rp.RecordBatches), len(want.Data))
					}
					if len(want.Data) > 0 {
						minOne = false
						remaining -= len(want.Data)
						records += int64(len(want.Data))
					}
				}
			}
		}
	}
	// A frame's last byte goes after the check that the log was not
	// truncated: from memory, not with sendfile.
	if sent := fetch.SendfileBytes() - before; sent > records || sent < records-responses {
		t.Fatalf("sendfile sent %d bytes, the %d responses held %d", sent, responses, records)
	}
}

// TestFetchCopyOption: with Options.CopyFetch the records are the same and
// none goes through sendfile.
func TestFetchCopyOption(t *testing.T) {
	ts := startServerOpts(t, Options{CopyFetch: true})
	createTopic(t, ts.admin(t), "zc-copy", 1, nil)
	batch := recordBatch(t, 16, 1024)
	produceBatches(t, ts, "zc-copy", 0, batch, 5)
	before := fetch.SendfileBytes()
	cl := dialFrames(t, ts.addr)
	req := fetchReq("zc-copy", topicID(t, ts, "zc-copy"), []int64{0}, 0, -1)
	req.Version = 11
	resp := cl.fetch(t, req)
	got := resp.Topics[0].Partitions[0].RecordBatches
	if len(got) != 5*len(batch) || fetch.SendfileBytes() != before {
		t.Fatalf("%d bytes of records, %d through sendfile", len(got), fetch.SendfileBytes()-before)
	}
}

// openFilesNamed lists this process's open files whose path has name in it.
func openFilesNamed(t testing.TB, name string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(target, name) {
			out = append(out, target)
		}
	}
	return out
}

// TestFetchZeroCopyAbandoned: a client that sends many large fetches and
// goes away without reading the answers leaves nothing pinned: once the
// topic is deleted, no file of it stays open.
func TestFetchZeroCopyAbandoned(t *testing.T) {
	// The garbage collector would close a leaked file in the end (os.File
	// has a finalizer) and hide the leak.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "zc-gone", 1, nil)
	produceBatches(t, ts, "zc-gone", 0, recordBatch(t, 16, 1024), 128) // 2 MiB
	id := topicID(t, ts, "zc-gone")
	cl := dialFrames(t, ts.addr)
	for i := range 32 {
		req := fetchReq("zc-gone", id, []int64{int64(i * 16)}, 0, -1)
		req.Version = 12
		if err := cl.send(req); err != nil {
			t.Fatal(err)
		}
	}
	// Read part of the first answer, so the writer is mid-stream, then go.
	if _, err := io.ReadFull(cl.r, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	cl.nc.Close()
	if _, err := ts.admin(t).DeleteTopics(testContext(t), "zc-gone"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		open := openFilesNamed(t, "zc-gone")
		_, exists := ts.meta.Image().Topic("zc-gone")
		if len(open) == 0 && !exists && ts.leaderPartition("zc-gone", 0) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files of the topic still open after its deletion: %q", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startBenchFetch starts a server with one partition holding 32 MiB in
// 16 KiB batches, and a raw connection to it.
func startBenchFetch(b *testing.B, opts Options) (*testServer, *frameConn, [16]byte, int64) {
	ts := startServerOpts(b, opts)
	createTopic(b, ts.admin(b), "bench", 1, nil)
	const batches = 2048
	produceBatches(b, ts, "bench", 0, recordBatch(b, 16, 1024), batches)
	return ts, dialFrames(b, ts.addr), topicID(b, ts, "bench"), batches * 16
}

// benchFetch1MiB fetches 1 MiB at a time round the log over a real
// loopback socket, reading each frame whole (the client decodes only the
// first, to check it).
func benchFetch1MiB(b *testing.B, opts Options) {
	_, cl, id, end := startBenchFetch(b, opts)
	req := fetchReq("bench", id, []int64{0}, 0, -1)
	req.Version = 12
	resp := cl.fetch(b, req)
	first := resp.Topics[0].Partitions[0].RecordBatches
	batch := len(recordBatch(b, 16, 1024))
	if len(first) < 1<<20-batch || len(first)%batch != 0 {
		b.Fatalf("fetched %d bytes", len(first))
	}
	step := int64(len(first) / batch * 16)
	var total int64
	offset := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if offset += step; offset+step > end {
			offset = 0
		}
		req.Topics[0].Partitions[0].FetchOffset = offset
		if err := cl.send(req); err != nil {
			b.Fatal(err)
		}
		body, _, err := cl.frame(true)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(body))
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkFetchZeroCopy fetches with sendfile; BenchmarkFetchCopy the
// same through a buffer (Options.CopyFetch).
func BenchmarkFetchZeroCopy(b *testing.B) { benchFetch1MiB(b, Options{}) }

// BenchmarkFetchCopy is BenchmarkFetchZeroCopy on the copying path.
func BenchmarkFetchCopy(b *testing.B) { benchFetch1MiB(b, Options{CopyFetch: true}) }
