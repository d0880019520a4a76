package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceFlushesEveryPartitionBeforeAnswer: with flush.messages=1, a
// Produce carrying batches for many partitions is answered only once each
// of them is on disk (their fsyncs run side by side, flushProduced), for
// plain and idempotent batches, acks=1 and acks=all.
func TestProduceFlushesEveryPartitionBeforeAnswer(t *testing.T) {
	const parts = 8
	ts := startServer(t, "")
	one := "1"
	createTopic(t, ts.admin(t), "durable", parts, map[string]*string{"flush.messages": &one})
	id := topicID(t, ts, "durable")
	cl := ts.client(t)
	ctx := testContext(t)
	checkFlushed := func(what string) {
		t.Helper()
		for i := range parts {
			p := ts.parts.get("durable", int32(i))
			if rp, leo := p.Log.RecoveryPoint(), p.Log.LogEndOffset(); leo == 0 || rp < leo {
				t.Errorf("%s: partition %d flushed to %d of %d", what, i, rp, leo)
			}
		}
	}
	for _, acks := range []int16{1, -1} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = acks
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "durable", id
		for i := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(i)
			rp.Records = benchBatch(t, 3, 100)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("acks %d: %v", acks, err)
		}
		for _, sp := range resp.Topics[0].Partitions {
			if sp.ErrorCode != 0 || sp.BaseOffset < 0 {
				t.Fatalf("acks %d: partition %d: %v, base offset %d", acks, sp.Partition, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
			}
		}
		checkFlushed("plain batches")
	}
	// The idempotent producer's batches take the producer-state path.
	prod := ts.client(t, kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for range 4 * parts {
		recs = append(recs, kgo.StringRecord("x"))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	checkFlushed("idempotent batches")
}
