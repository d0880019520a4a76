package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// rawConn is a bare TCP connection for sending hand-made frames.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t, nc}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// request sends req with a header of its version and returns the raw
// response frame after the size.
func (c *rawConn) request(req kmsg.Request, corr int32) []byte {
	c.t.Helper()
	c.write(encodeRequest(req, corr))
	frame, err := protocol.ReadFrame(c.nc, 1<<30, nil)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	return frame[4:]
}

// expectClosed asserts that the server closes the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	buf := make([]byte, 1)
	_, err := c.nc.Read(buf)
	if !errors.Is(err, io.EOF) && !isReset(err) {
		c.t.Fatalf("connection still open: %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func encodeRequest(req kmsg.Request, corr int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// goodClientWorks proves the server still serves after bad input.
func goodClientWorks(t *testing.T, ts *testServer) {
	t.Helper()
	if _, err := ts.admin(t).ListBrokers(testContext(t)); err != nil {
		t.Fatalf("good client after bad input: %v", err)
	}
}

func TestBadFramesCloseConnection(t *testing.T) {
	ts := startServer(t, "")
	for name, frame := range map[string][]byte{
		"over the size limit": {0x06, 0x40, 0x00, 0x01},                                // 100 MiB + 1
		"negative size":       {0xff, 0xff, 0xff, 0xf0},                                // -16
		"truncated header":    {0, 0, 0, 3, 0, 3, 0},                                   // 3 bytes: no version or correlation id
		"unknown api key":     {0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, // key 999
		"garbage":             {0, 0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8},
		"unsupported version": {0, 0, 0, 10, 0, 3, 0x7f, 0, 0, 0, 0, 1, 0xff, 0xff}, // Metadata v32512
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, ts.addr)
			c.write(frame)
			c.expectClosed()
			goodClientWorks(t, ts)
		})
	}
}

func TestMalformedBodyClosesConnection(t *testing.T) {
	ts := startServer(t, "")
	c := dialRaw(t, ts.addr)
	// A Metadata v1 request whose topic array claims a million entries.
	b := []byte{0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff, 0x00, 0x0f, 0x42, 0x40}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.write(b)
	c.expectClosed()
	goodClientWorks(t, ts)
}

func TestApiVersionsUnknownVersionAnswersV0(t *testing.T) {
	ts := startServer(t, "")
	c := dialRaw(t, ts.addr)
	// ApiVersions v99 with a flexible header: the body is not read.
	c.write([]byte{0, 0, 0, 11, 0, 18, 0, 99, 0, 0, 0, 42, 0xff, 0xff, 0})
	frame, err := protocol.ReadFrame(c.nc, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if corr := binary.BigEndian.Uint32(frame); corr != 42 {
		t.Fatalf("correlation %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
	// KIP-511: only ApiVersions' own range, for the client's retry.
	if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("v0 answer's keys: %+v, want ApiVersions 0-4 alone", resp.ApiKeys)
	}
}

// produceRaw sends one produce request with records for topic/0 and
// returns the partition's answer.
func produceRaw(t *testing.T, c *rawConn, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(c.request(req, 3)[1:]); err != nil { // [1:] skips the flexible header's tags
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func testBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	var recs []protocol.Record
	for i, v := range values {
		recs = append(recs, protocol.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadBatches(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "batches", 1, nil)
	c := dialRaw(t, ts.addr)

	good := testBatch(t, "a", "b", "c")
	if p := produceRaw(t, c, "batches", good); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}

	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	if p := produceRaw(t, c, "batches", badCRC); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("bad crc: code %d", p.ErrorCode)
	}

	lying := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(lying[57:], 4) // four records declared, three present
	binary.BigEndian.PutUint32(lying[17:], protocol.BatchCRC(lying))
	if p := produceRaw(t, c, "batches", lying); p.ErrorCode != kerr.CorruptMessage.Code && p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("lying record count: code %d", p.ErrorCode)
	}

	big := testBatch(t, string(make([]byte, 2<<20)))
	if p := produceRaw(t, c, "batches", big); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("2 MiB batch: code %d", p.ErrorCode)
	}

	if p := produceRaw(t, c, "no-such-topic", good); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", p.ErrorCode)
	}

	// After all that the log holds exactly the good batch, and the next
	// good batch continues at offset 3.
	if p := produceRaw(t, c, "batches", testBatch(t, "d")); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("good batch after bad ones: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	got := consumeExactly(t, ts.addr, "batches", 4)
	for i, want := range []string{"a", "b", "c", "d"} {
		if string(got[i].Value) != want || got[i].Offset != int64(i) {
			t.Fatalf("record %d: %q at %d", i, got[i].Value, got[i].Offset)
		}
	}
}
