package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/gregorbroker/gregor/broker/brokertest"
)

// TestKafkaGoProduceConsume writes and reads with segmentio/kafka-go's
// Writer and Reader, as its users do.
func TestKafkaGoProduceConsume(t *testing.T) {
	addr := brokertest.Start(t)
	for _, codec := range []compress.Compression{0, compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd} {
		name := "none"
		if codec != 0 {
			name = codec.String()
		}
		t.Run(name, func(t *testing.T) {
			topic := "kafkago-" + name
			conn, err := kafka.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
				t.Fatalf("create topic: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// A transport per writer: kafka-go's shared default caches metadata for
			// seconds, so it would not see the topic just created (on Kafka too).
			w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Transport: &kafka.Transport{}, Compression: codec, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
			defer w.Close()
			const n = 500
			var msgs []kafka.Message
			for i := 0; i < n; i++ {
				msgs = append(msgs, kafka.Message{
					Key:     []byte(fmt.Sprintf("key-%d", i)),
					Value:   []byte(fmt.Sprintf("value-%d", i)),
					Headers: []kafka.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}},
				})
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("write: %v", err)
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
			defer r.Close()
			for i := 0; i < n; i++ {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if m.Offset != int64(i) || string(m.Key) != fmt.Sprintf("key-%d", i) || string(m.Value) != fmt.Sprintf("value-%d", i) ||
					len(m.Headers) != 1 || string(m.Headers[0].Value) != fmt.Sprint(i) {
					t.Fatalf("message %d: offset %d key %q value %q headers %v", i, m.Offset, m.Key, m.Value, m.Headers)
				}
			}
		})
	}
}
