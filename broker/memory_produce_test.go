package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/protocol"
)

// TestRecompressedBatchOverMaxMessageBytes: a zstd batch of 40 KiB that
// holds 8 MiB of zeros is within max.message.bytes as sent, but a topic
// with compression.type=uncompressed would store it at 8 MiB: the broker
// answers MESSAGE_TOO_LARGE, as Kafka does, having streamed the records
// instead of holding them, and a gzip topic stores it recompressed.
func TestRecompressedBatchOverMaxMessageBytes(t *testing.T) {
	ts := startServer(t, "")
	uncompressed, gzip := "uncompressed", "gzip"
	createTopic(t, ts.admin(t), "plain-topic", 1, map[string]*string{"compression.type": &uncompressed})
	createTopic(t, ts.admin(t), "gzip-topic", 1, map[string]*string{"compression.type": &gzip})
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(16<<20),
		kgo.RecordRetries(1), kgo.ProduceRequestTimeout(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := make([]byte, 8<<20)

	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "plain-topic", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("produce to an uncompressed topic: err = %v, want MESSAGE_TOO_LARGE", err)
	}
	if end := ts.parts.get("plain-topic", 0).Log.LogEndOffset(); end != 0 {
		t.Fatalf("log end offset %d after a refused produce", end)
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "gzip-topic", Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce to a gzip topic: %v", err)
	}
	p := ts.parts.get("gzip-topic", 0)
	rr, err := p.Log.Read(0, 1<<20, p.HighWatermark(), true)
	if err != nil {
		t.Fatal(err)
	}
	batch, _, h, err := protocol.NextBatch(rr.Data)
	if err != nil || h.Codec() != protocol.CodecGzip {
		t.Fatalf("stored batch codec %v (err %v), want gzip", h.Codec(), err)
	}
	info, err := protocol.ValidateBatch(batch, 16<<20)
	if err != nil || info.UncompressedBytes < 8<<20 {
		t.Fatalf("stored batch: %+v, %v", info, err)
	}
}
