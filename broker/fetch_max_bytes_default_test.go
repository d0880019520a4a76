package broker

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchMaxBytesDefaultMeasured: with fetch.max.bytes at Kafka's
// default (57671680, 55 MiB), a Fetch asking MaxBytes 2 GiB, with no
// per-partition limit to speak of, of a topic holding 80 MiB (4
// partitions of 20 records of 1 MiB) gets a response frame no larger than
// the cap plus framing, and one that carries records up to near the cap.
func TestFetchMaxBytesDefaultMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 80 MiB")
	}
	const (
		capBytes   = 57671680
		framing    = 4 << 10 // headers of the response, topic and partitions
		recordSize = 1 << 20
	)
	ts := startServer(t, "")
	if ts.cfg.FetchMaxBytes != capBytes {
		t.Fatalf("fetch.max.bytes default %d, want Kafka's %d", ts.cfg.FetchMaxBytes, capBytes)
	}
	s := func(v string) *string { return &v }
	createTopic(t, ts.admin(t), "big", 4, map[string]*string{"max.message.bytes": s("2097152")})
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(2<<20))
	value := make([]byte, recordSize)
	for p := range int32(4) {
		for range 20 {
			if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "big", Partition: p, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	req := fetchReq("big", topicID(t, ts, "big"), []int64{0, 0, 0, 0}, 0, -1)
	req.Version = 12 // topic names: the raw request below carries no id lookup
	req.MaxBytes = 1<<31 - 1
	req.MaxWaitMillis = 500
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i].PartitionMaxBytes = 1<<31 - 1
	}
	c := dialRaw(t, ts.addr)
	c.nc.SetDeadline(time.Now().Add(60 * time.Second))
	c.write(encodeRequest(req, 7))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		t.Fatal(err)
	}
	frameLen := int(binary.BigEndian.Uint32(size[:]))
	frame := make([]byte, frameLen)
	if _, err := io.ReadFull(c.nc, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(frame[4+1:]); err != nil { // correlation id, empty tagged header
		t.Fatal(err)
	}
	records, parts := 0, 0
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
			}
			if len(p.RecordBatches) > 0 {
				parts++
			}
			records += len(p.RecordBatches)
			t.Logf("partition %d: %d bytes of records", p.Partition, len(p.RecordBatches))
		}
	}
	t.Logf("response frame %d bytes (+4 size), %d bytes of records from %d partitions; cap %d", frameLen, records, parts, capBytes)
	if frameLen > capBytes+framing {
		t.Fatalf("a 2 GiB fetch got a %d-byte response, over fetch.max.bytes %d plus framing", frameLen, capBytes)
	}
	if records < capBytes-2*recordSize {
		t.Fatalf("only %d bytes of records for a cap of %d and 80 MiB on disk", records, capBytes)
	}
}
