package broker

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

type sentRecord struct {
	key, value []byte
	headers    []kgo.RecordHeader
}

// produceAll produces recs and returns them by partition and offset, as
// acknowledged.
func produceAll(t *testing.T, cl *kgo.Client, recs []*kgo.Record) map[int32]map[int64]sentRecord {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[int32]map[int64]sentRecord)
	var wg sync.WaitGroup
	var firstErr error
	ctx := testContext(t)
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			m := acked[r.Partition]
			if m == nil {
				m = make(map[int64]sentRecord)
				acked[r.Partition] = m
			}
			if _, dup := m[r.Offset]; dup {
				t.Errorf("offset %d of partition %d acknowledged twice", r.Offset, r.Partition)
			}
			m[r.Offset] = sentRecord{r.Key, r.Value, r.Headers}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return acked
}

// consumeExactly reads partitions from the start until it has n records.
func consumeExactly(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// checkConsumed asserts every acknowledged record is read back at its
// offset, byte-exact, and that each partition's offsets run 0..n-1 in order.
func checkConsumed(t *testing.T, acked map[int32]map[int64]sentRecord, got []*kgo.Record) {
	t.Helper()
	next := make(map[int32]int64)
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d (order or gap)", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		want, ok := acked[r.Partition][r.Offset]
		if !ok {
			t.Fatalf("partition %d offset %d was never acknowledged", r.Partition, r.Offset)
		}
		if !bytes.Equal(r.Key, want.key) || !bytes.Equal(r.Value, want.value) {
			t.Fatalf("partition %d offset %d: key %q value %q, want %q %q", r.Partition, r.Offset, r.Key, r.Value, want.key, want.value)
		}
		if len(r.Headers) != len(want.headers) {
			t.Fatalf("partition %d offset %d: %d headers, want %d", r.Partition, r.Offset, len(r.Headers), len(want.headers))
		}
		for i, h := range r.Headers {
			if h.Key != want.headers[i].Key || !bytes.Equal(h.Value, want.headers[i].Value) {
				t.Fatalf("header %d: %q=%q, want %q=%q", i, h.Key, h.Value, want.headers[i].Key, want.headers[i].Value)
			}
		}
	}
	for p, m := range acked {
		if next[p] != int64(len(m)) {
			t.Fatalf("partition %d: read %d records, %d acknowledged", p, next[p], len(m))
		}
	}
}

func keyedRecords(topic string, n int, tag string) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: topic,
			Key:   []byte(fmt.Sprintf("key-%d", i%97)),
			Value: []byte(fmt.Sprintf("%s value %d %s", tag, i, bytes.Repeat([]byte{'v'}, i%50))),
			Headers: []kgo.RecordHeader{
				{Key: "h1", Value: []byte(fmt.Sprint(i))},
				{Key: "codec", Value: []byte(tag)},
			},
		}
	}
	return recs
}

func TestProduceConsumeEachCodec(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			createTopic(t, adm, topic, 3, nil)
			cl := ts.client(t, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			acked := produceAll(t, cl, keyedRecords(topic, 10000, name))
			if len(acked) != 3 {
				t.Fatalf("records landed in %d partitions, want 3", len(acked))
			}
			checkConsumed(t, acked, consumeExactly(t, ts.addr, topic, 10000))
		})
	}
}

// TestDefaultFranzClient uses franz-go as a Kafka program would, with
// only the options such a program sets: auto-creation of the topic (which
// franz-go asks for only when told to), idempotence as the client chooses.
func TestDefaultFranzClient(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t, kgo.DefaultProduceTopic("auto-created"), kgo.AllowAutoTopicCreation())
	res := cl.ProduceSync(testContext(t), &kgo.Record{Key: []byte("k"), Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeExactly(t, ts.addr, "auto-created", 1)
	if string(got[0].Value) != "v" || got[0].Offset != 0 {
		t.Fatalf("got %+v", got[0])
	}
}

// TestAcksZero: records sent with acks=0 get no answer but land in the log;
// an acks=0 produce that fails closes the connection, as Kafka does.
func TestAcksZero(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "fire", 1, nil)
	cl := ts.client(t, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("fire"))
	// With acks=0 the client never learns the offsets (franz-go numbers
	// each batch from 0), so the records are checked by content and
	// order: one producer, one partition, appended in the order sent.
	sent := keyedRecords("fire", 1000, "acks0")
	want := make([]sentRecord, len(sent))
	for i, r := range sent {
		want[i] = sentRecord{r.Key, r.Value, r.Headers}
		cl.Produce(testContext(t), r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce with acks=0: %v", err)
			}
		})
	}
	if err := cl.Flush(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for i, r := range consumeExactly(t, ts.addr, "fire", len(want)) {
		if string(r.Key) != string(want[i].key) || string(r.Value) != string(want[i].value) || r.Offset != int64(i) {
			t.Fatalf("offset %d holds %q=%q at offset %d, want %q=%q", i, r.Key, r.Value, r.Offset, want[i].key, want[i].value)
		}
	}

	c := dialRaw(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testBatch(t, "x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.write(encodeRequest(req, 1))
	c.expectClosed()
}

// TestTopicCompressionType: a topic with compression.type=zstd stores
// what producers send uncompressed as zstd batches, and consumers read the
// same records.
func TestTopicCompressionType(t *testing.T) {
	ts := startServer(t, "")
	zstd := "zstd"
	createTopic(t, ts.admin(t), "zstd-topic", 1, map[string]*string{"compression.type": &zstd})
	cl := ts.client(t, kgo.DefaultProduceTopic("zstd-topic"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	acked := produceAll(t, cl, keyedRecords("zstd-topic", 500, "recompressed"))
	checkConsumed(t, acked, consumeExactly(t, ts.addr, "zstd-topic", 500))
	p := ts.parts.get("zstd-topic", 0)
	rr, err := p.Log.Read(0, 1<<20, p.HighWatermark(), true)
	if err != nil {
		t.Fatal(err)
	}
	_, _, h, err := protocol.NextBatch(rr.Data)
	if err != nil || h.Codec() != protocol.CodecZstd {
		t.Fatalf("stored batch codec %v (err %v), want zstd", h.Codec(), err)
	}
}
