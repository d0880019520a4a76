package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a fetch of topic partitions 0..n-1 at the given offsets.
func fetchReq(topic string, id [16]byte, offsets []int64, sessionID, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 50 << 20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for i, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(i)
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(offsets) > 0 {
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func doFetch(t *testing.T, cl *kgo.Client, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func produceN(t *testing.T, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("x")})
	}
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func topicID(t testing.TB, ts *testServer, topic string) [16]byte {
	tp, ok := ts.meta.Image().Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	return tp.ID
}

// TestFetchSessions walks KIP-227: a full fetch opens a session, an
// incremental fetch answers only partitions with news, a wrong epoch or an
// unknown id is refused, and epoch -1 closes the session.
func TestFetchSessions(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "sess", 3, nil)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, cl, "sess", 0, 5)
	produceN(t, cl, "sess", 1, 3)
	id := topicID(t, ts, "sess")

	full := doFetch(t, cl, fetchReq("sess", id, []int64{0, 0, 0}, 0, 0))
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: code %d session %d", full.ErrorCode, full.SessionID)
	}
	if n := len(full.Topics[0].Partitions); n != 3 {
		t.Fatalf("full fetch answered %d partitions", n)
	}
	sid := full.SessionID

	// The client moves its positions past what it read; nothing else
	// changed, so the incremental answer lists no partition.
	inc := fetchReq("sess", id, []int64{5, 3, 0}, sid, 1)
	inc.MaxWaitMillis = 0
	if r := doFetch(t, cl, inc); r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("idle incremental fetch: code %d topics %+v", r.ErrorCode, r.Topics)
	}
	// New data on partition 2 only: the answer holds partition 2 alone.
	produceN(t, cl, "sess", 2, 4)
	inc = fetchReq("sess", id, nil, sid, 2)
	r := doFetch(t, cl, inc)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("incremental fetch after produce: code %d %+v", r.ErrorCode, r.Topics)
	}
	if p := r.Topics[0].Partitions[0]; p.Partition != 2 || p.HighWatermark != 4 || len(p.RecordBatches) == 0 {
		t.Fatalf("partition 2: %+v", p)
	}
	// A stale epoch is refused; so is an unknown session.
	if r := doFetch(t, cl, fetchReq("sess", id, nil, sid, 2)); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("stale epoch: code %d", r.ErrorCode)
	}
	if r := doFetch(t, cl, fetchReq("sess", id, nil, sid+1, 1)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: code %d", r.ErrorCode)
	}
	// Epoch -1 closes it; it is gone afterwards.
	if r := doFetch(t, cl, fetchReq("sess", id, []int64{5, 3, 4}, sid, -1)); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("closing fetch: code %d session %d", r.ErrorCode, r.SessionID)
	}
	if r := doFetch(t, cl, fetchReq("sess", id, nil, sid, 3)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: code %d", r.ErrorCode)
	}
}

// TestFetchLongPoll checks that a fetch with MinBytes waits for an append
// and is woken by it, well before MaxWait, and that an idle one returns
// empty after MaxWait.
func TestFetchLongPoll(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "poll", 1, nil)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	id := topicID(t, ts, "poll")

	req := fetchReq("poll", id, []int64{0}, 0, -1)
	req.MinBytes = 1
	req.MaxWaitMillis = 500
	start := time.Now()
	r := doFetch(t, cl, req)
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("idle fetch returned after %v, before MaxWait", waited)
	}
	if len(r.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatal("idle fetch returned data")
	}

	req.MaxWaitMillis = 10000
	done := make(chan *kmsg.FetchResponse, 1)
	start = time.Now()
	go func() {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	time.Sleep(200 * time.Millisecond)
	produceN(t, cl, "poll", 0, 1)
	select {
	case r := <-done:
		if r == nil || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Fatal("woken fetch has no data")
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("fetch woke after %v", waited)
		}
	case <-time.After(9 * time.Second):
		t.Fatal("append did not wake the long poll")
	}
}

func TestFetchOffsetOutOfRangeAndLimits(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "limits", 1, nil)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	id := topicID(t, ts, "limits")
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "limits", Value: make([]byte, 100<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := doFetch(t, cl, fetchReq("limits", id, []int64{10}, 0, -1))
	if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("offset past the end: code %d", code)
	}
	// A partition limit smaller than one batch still returns exactly one
	// whole batch (KIP-74), and the total limit is honoured after it.
	req := fetchReq("limits", id, []int64{0}, 0, -1)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1000
	p := doFetch(t, cl, req).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) < 100<<10 || len(p.RecordBatches) > 101<<10 {
		t.Fatalf("one-batch rule: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	req = fetchReq("limits", id, []int64{0}, 0, -1)
	req.MaxBytes = 250 << 10
	p = doFetch(t, cl, req).Topics[0].Partitions[0]
	if n := len(p.RecordBatches); n < 200<<10 || n > 250<<10 {
		t.Fatalf("MaxBytes 250 KiB returned %d bytes, want two whole batches", n)
	}
}
