package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestListOffsetsByTimestamp(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "times", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("times"), kgo.ProducerLinger(0))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// Ten batches of ten records, one second apart; record j of batch i has
	// timestamp base + i s + j ms.
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 10; j++ {
			recs = append(recs, &kgo.Record{Value: []byte{byte(i), byte(j)}, Timestamp: base.Add(time.Duration(i)*time.Second + time.Duration(j)*time.Millisecond)})
		}
		if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t)
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{base.Add(-time.Minute), 0},
		{base, 0},
		{base.Add(3 * time.Second), 30},
		{base.Add(3*time.Second + 4*time.Millisecond), 34}, // inside a batch
		{base.Add(3*time.Second + 500*time.Millisecond), 40},
		{base.Add(9*time.Second + 9*time.Millisecond), 99},
		{base.Add(10 * time.Second), 100}, // none: kadm asks again for the end offset
	} {
		res, err := adm.ListOffsetsAfterMilli(ctx, tc.at.UnixMilli(), "times")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := res.Lookup("times", 0)
		if !ok || o.Err != nil {
			t.Fatalf("lookup %v: %v", tc.at, o.Err)
		}
		if o.Offset != tc.want {
			t.Errorf("offset after %v: %d, want %d", tc.at.Sub(base), o.Offset, tc.want)
		}
	}
	start, _ := adm.ListStartOffsets(ctx, "times")
	end, _ := adm.ListEndOffsets(ctx, "times")
	if o, _ := start.Lookup("times", 0); o.Offset != 0 {
		t.Errorf("start offset %d", o.Offset)
	}
	if o, _ := end.Lookup("times", 0); o.Offset != 100 {
		t.Errorf("end offset %d", o.Offset)
	}
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := maxTS.Lookup("times", 0); o.Offset != 99 || o.Timestamp != base.Add(9*time.Second+9*time.Millisecond).UnixMilli() {
		t.Errorf("max timestamp offset %d ts %d", o.Offset, o.Timestamp)
	}
}

// TestListOffsetsMaxTimestampRecord: MAX_TIMESTAMP (-3) answers the first
// record holding the largest timestamp, not the last record of its batch
// (Kafka 3.8+), before and after a restart. Under LogAppendTime every
// record carries the batch's time, so the answer is the batch's first
// record.
func TestListOffsetsMaxTimestampRecord(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir)
	adm := ts.admin(t)
	// Two partitions: a record to partition 1 first loads the topic into
	// the client, so that the six records of partition 0 go out as one
	// batch (a client that learns a topic's partitions while it flushes
	// sends the records it has moved so far on their own).
	createTopic(t, adm, "maxts", 2, nil)
	appendTime := "LogAppendTime"
	createTopic(t, adm, "maxts-append", 2, map[string]*string{"message.timestamp.type": &appendTime})
	cl := ts.client(t, kgo.ManualFlushing(), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for _, topic := range []string{"maxts", "maxts-append"} {
		cl.Produce(testContext(t), &kgo.Record{Topic: topic, Partition: 1, Value: []byte("load")}, nil)
		if err := cl.Flush(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"maxts", "maxts-append"} {
		// One batch: Produce buffers all six, Flush sends them together.
		for _, s := range []int{1, 3, 2, 9, 4, 5} {
			cl.Produce(testContext(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte{byte(s)}, Timestamp: base.Add(time.Duration(s) * time.Second)}, nil)
		}
		if err := cl.Flush(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(ts *testServer, when string) {
		t.Helper()
		cl := ts.client(t)
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		req.ReplicaID = -1
		for _, topic := range []string{"maxts", "maxts-append"} {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -3, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatalf("%s: list offsets: %v", when, err)
		}
		got := make(map[string]kmsg.ListOffsetsResponseTopicPartition)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got[rt.Topic] = rp
			}
		}
		if p := got["maxts"]; p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != base.Add(9*time.Second).UnixMilli() {
			t.Errorf("%s: create time: error %d offset %d timestamp %d, want offset 3 timestamp %d", when, p.ErrorCode, p.Offset, p.Timestamp, base.Add(9*time.Second).UnixMilli())
		}
		if p := got["maxts-append"]; p.ErrorCode != 0 || p.Offset != 0 || p.Timestamp < base.Add(time.Hour-time.Minute).UnixMilli() {
			t.Errorf("%s: log append time: error %d offset %d timestamp %d, want offset 0 at the append time", when, p.ErrorCode, p.Offset, p.Timestamp)
		}
	}
	check(ts, "live")
	cl.Close()
	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	check(startServer(t, dir), "restarted")
}
