package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// benchBatch is a batch of n records of size bytes each, uncompressed.
func benchBatch(b testing.TB, n, size int) []byte {
	recs := make([]protocol.Record, n)
	for i := range recs {
		recs[i] = protocol.Record{OffsetDelta: int32(i), Value: make([]byte, size)}
	}
	batch, err := protocol.BuildBatch(protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, protocol.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// BenchmarkProduce measures the produce path over a real socket: one
// request of one 16 x 1 KiB batch at a time, acks=1.
func BenchmarkProduce(b *testing.B) {
	ts := startServer(b, "")
	createTopic(b, ts.admin(b), "bench", 1, nil)
	cl := ts.client(b)
	batch := benchBatch(b, 16, 1024)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "bench", topicID(b, ts, "bench")
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx := testContext(b)
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("produce error %d", code)
		}
	}
}

// BenchmarkFetch measures the fetch path over a real socket: reads of up
// to 1 MiB per partition from logs of 8 MiB in 16 KiB batches, round and
// round.
func BenchmarkFetch(b *testing.B) {
	for _, parts := range []int{1, 8} {
		b.Run(map[int]string{1: "1partition", 8: "8partitions"}[parts], func(b *testing.B) {
			ts := startServer(b, "")
			createTopic(b, ts.admin(b), "bench", int32(parts), nil)
			cl := ts.client(b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			batch := benchBatch(b, 16, 1024)
			ctx := testContext(b)
			const perPartition = (64 << 20) / (16 << 10) / 8 // 8 MiB of 16 KiB batches
			for p := 0; p < parts; p++ {
				req := kmsg.NewPtrProduceRequest()
				req.Acks = 1
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = "bench", topicID(b, ts, "bench")
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(p)
				rp.Records = batch
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				for i := 0; i < perPartition; i++ {
					if _, err := req.RequestWith(ctx, cl); err != nil {
						b.Fatal(err)
					}
				}
			}
			id := topicID(b, ts, "bench")
			offsets := make([]int64, parts)
			end := int64(perPartition * 16)
			b.ResetTimer()
			var bytes int64
			for i := 0; i < b.N; i++ {
				req := fetchReq("bench", id, offsets, 0, -1)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range resp.Topics[0].Partitions {
					bytes += int64(len(p.RecordBatches))
					offsets[p.Partition] += int64(len(p.RecordBatches) / len(batch) * 16)
					if offsets[p.Partition] >= end {
						offsets[p.Partition] = 0
					}
				}
			}
			b.SetBytes(bytes / int64(b.N))
		})
	}
}

// BenchmarkProduceManyPartitions measures the produce path as a client
// with many partitions drives it: each request carries one 4 x 1 KiB
// batch for each of 1,000 partitions (about 4 MiB), acks=1. Its bytes and
// allocations per request are the broker's per-partition costs.
func BenchmarkProduceManyPartitions(b *testing.B) {
	const partitions = 1000
	ts := startServer(b, "")
	createTopic(b, ts.admin(b), "bench", partitions, nil)
	cl := ts.client(b)
	batch := benchBatch(b, 4, 1024)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "bench", topicID(b, ts, "bench")
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx := testContext(b)
	req.TimeoutMillis = 60000 // the first appends create each partition's files
	if _, err := req.RequestWith(ctx, cl); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(partitions * len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				b.Fatalf("produce error %d on partition %d", p.ErrorCode, p.Partition)
			}
		}
	}
}
