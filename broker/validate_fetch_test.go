package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// TestValidateFetch: a partition named twice is fetched once, from the
// later entry's offset; an unknown isolation level fails the request with
// UNKNOWN_SERVER_ERROR, as Kafka's FetchRequest and KafkaApis do.
func TestValidateFetch(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "vf", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("vf"))
	for _, r := range keyedRecords("vf", 5, "v") {
		// One batch per record, so where a fetch starts shows.
		if err := cl.ProduceSync(testContext(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	fetch := func(isolation int8, offsets ...int64) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.IsolationLevel = isolation
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "vf"
		for _, o := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = o, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	resps := pipeline(t, ts.addr, []kmsg.Request{fetch(0, 0, 3), fetch(2, 0)})

	dup := resps[0].(*kmsg.FetchResponse)
	if len(dup.Topics) != 1 || len(dup.Topics[0].Partitions) != 1 {
		t.Fatalf("a partition named twice answered %+v, want one topic with one partition", dup.Topics)
	}
	p := dup.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("partition answered error %d with %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	_, _, h, err := protocol.NextBatch(p.RecordBatches)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 3 {
		t.Fatalf("first batch holds offsets %d..%d, want the later entry's offset 3", h.BaseOffset, h.LastOffset())
	}

	bad := resps[1].(*kmsg.FetchResponse)
	unknown := kerr.UnknownServerError.Code
	if bad.ErrorCode != unknown || len(bad.Topics) != 1 || bad.Topics[0].Partitions[0].ErrorCode != unknown || len(bad.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("isolation level 2 answered %d / %+v, want UNKNOWN_SERVER_ERROR everywhere", bad.ErrorCode, bad.Topics)
	}
}
