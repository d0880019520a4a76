package compat

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/gregorbroker/gregor/broker/brokertest"
)

// TestSaramaProduceConsume uses sarama as a Kafka program would: an admin
// creates a topic, a sync producer writes keyed records with headers, and
// a partition consumer reads them back.
func TestSaramaProduceConsume(t *testing.T) {
	addr := brokertest.Start(t)
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		t.Run(codec.String(), func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V3_6_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Compression = codec
			cfg.Producer.Partitioner = sarama.NewHashPartitioner
			topic := "sarama-" + codec.String()

			adm, err := sarama.NewClusterAdmin([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
				t.Fatalf("create topic: %v", err)
			}

			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			const n = 500
			type at struct {
				p int32
				o int64
			}
			sent := make(map[at]string)
			for i := 0; i < n; i++ {
				v := fmt.Sprintf("value-%d", i)
				p, o, err := prod.SendMessage(&sarama.ProducerMessage{
					Topic:   topic,
					Key:     sarama.StringEncoder(fmt.Sprintf("key-%d", i%13)),
					Value:   sarama.StringEncoder(v),
					Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}},
				})
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				sent[at{p, o}] = v
			}

			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			got := 0
			for _, part := range []int32{0, 1} {
				pc, err := cons.ConsumePartition(topic, part, sarama.OffsetOldest)
				if err != nil {
					t.Fatal(err)
				}
				next := int64(0)
				want := 0
				for k := range sent {
					if k.p == part {
						want++
					}
				}
				timeout := time.After(30 * time.Second)
				for int(next) < want {
					select {
					case m := <-pc.Messages():
						if m.Offset != next {
							t.Fatalf("partition %d: offset %d, want %d", part, m.Offset, next)
						}
						if string(m.Value) != sent[at{part, m.Offset}] || len(m.Headers) != 1 {
							t.Fatalf("partition %d offset %d: %q headers %d", part, m.Offset, m.Value, len(m.Headers))
						}
						next++
						got++
					case err := <-pc.Errors():
						t.Fatalf("consume: %v", err)
					case <-timeout:
						t.Fatalf("partition %d: read %d of %d", part, next, want)
					}
				}
				pc.Close()
			}
			if got != n {
				t.Fatalf("read %d records, sent %d", got, n)
			}
		})
	}
}
