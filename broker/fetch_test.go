package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
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

// timedFetch sends req on cl and returns the answer and how long it took.
func timedFetch(t *testing.T, cl *kgo.Client, req *kmsg.FetchRequest) (*kmsg.FetchResponse, time.Duration) {
	t.Helper()
	start := time.Now()
	resp := doFetch(t, cl, req)
	return resp, time.Since(start)
}

// TestFetchSessionInUseAnsweredPromptly: while one connection long-polls
// on session S, a second connection's fetch naming S is answered at once
// — INVALID_FETCH_SESSION_EPOCH for the epoch the first one used, a
// normal answer for the next epoch — and the long poll that lost the
// session then ends with INVALID_FETCH_SESSION_EPOCH, as in Kafka's
// FetchManager. Before the fix the second fetch waited for the long poll
// to end, on a lock taken on one goroutine and released on another.
func TestFetchSessionInUseAnsweredPromptly(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "inuse", 1, nil)
	clA := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	clB := ts.client(t)
	produceN(t, clA, "inuse", 0, 3)
	id := topicID(t, ts, "inuse")

	full := doFetch(t, clA, fetchReq("inuse", id, []int64{0}, 0, 0))
	sid := full.SessionID
	if full.ErrorCode != 0 || sid == 0 {
		t.Fatalf("full fetch: code %d session %d", full.ErrorCode, sid)
	}

	// A: incremental fetch at epoch 1, at the log end: it long-polls.
	poll := fetchReq("inuse", id, []int64{3}, sid, 1)
	poll.MinBytes, poll.MaxWaitMillis = 1, 8000
	polled := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, err := poll.RequestWith(context.Background(), clA)
		if err != nil {
			t.Error(err)
		}
		polled <- resp
	}()
	time.Sleep(300 * time.Millisecond)

	// B: the same epoch again is a duplicate.
	dup := fetchReq("inuse", id, nil, sid, 1)
	r, took := timedFetch(t, clB, dup)
	if r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("duplicate epoch while S is in use: code %d, want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode)
	}
	if took > 2*time.Second {
		t.Fatalf("duplicate epoch answered after %v: it waited for the long poll", took)
	}
	// B: the next epoch takes the session over.
	r, took = timedFetch(t, clB, fetchReq("inuse", id, nil, sid, 2))
	if r.ErrorCode != 0 || r.SessionID != sid || took > 2*time.Second {
		t.Fatalf("next epoch while S is in use: code %d session %d after %v", r.ErrorCode, r.SessionID, took)
	}
	select {
	case resp := <-polled:
		t.Fatalf("long poll ended early: %+v", resp)
	default:
	}

	// An append wakes A, whose session moved on without it.
	produceN(t, clA, "inuse", 0, 1)
	select {
	case resp := <-polled:
		if resp == nil || resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || resp.SessionID != sid || len(resp.Topics) != 0 {
			t.Fatalf("superseded long poll: %+v, want INVALID_FETCH_SESSION_EPOCH for session %d", resp, sid)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("the append did not end the long poll")
	}
	// The session goes on from B's epoch: the record appended is news.
	r = doFetch(t, clB, fetchReq("inuse", id, nil, sid, 3))
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].HighWatermark != 4 {
		t.Fatalf("fetch at epoch 3: code %d %+v", r.ErrorCode, r.Topics)
	}
}

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestFetchSessionCacheSlots: max.incremental.fetch.session.cache.slots
// bounds the sessions, with Kafka's eviction: a full cache gives a new
// client no session (id 0) while the cached ones are young; a session
// idle past the eviction time goes first; then the smallest session past
// its protected youth, but only for a new session at least as large.
func TestFetchSessionCacheSlots(t *testing.T) {
	clock := &testClock{now: time.Now()}
	cfg := testConfig(t, t.TempDir())
	cfg.MaxIncrementalFetchSessionCacheSlots = 2
	s, err := New(cfg, Options{Logger: testLogger(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := &testServer{Server: s, addr: s.Addr().String()}
	createTopic(t, ts.admin(t), "slots", 3, nil)
	cl := ts.client(t)
	id := topicID(t, ts, "slots")
	open := func(parts int) int32 {
		t.Helper()
		r := doFetch(t, cl, fetchReq("slots", id, make([]int64, parts), 0, 0))
		if r.ErrorCode != 0 {
			t.Fatalf("full fetch: code %d", r.ErrorCode)
		}
		return r.SessionID
	}
	alive := func(sid, epoch int32) bool {
		t.Helper()
		r := doFetch(t, cl, fetchReq("slots", id, nil, sid, epoch))
		switch r.ErrorCode {
		case 0:
			return true
		case kerr.FetchSessionIDNotFound.Code:
			return false
		}
		t.Fatalf("session %d epoch %d: code %d", sid, epoch, r.ErrorCode)
		return false
	}

	a, b := open(1), open(2)
	if a == 0 || b == 0 {
		t.Fatalf("sessions %d, %d: want two", a, b)
	}
	if c := open(3); c != 0 {
		t.Fatalf("a third session in a full cache of young sessions got id %d", c)
	}
	if n := s.sessions.Len(); n != 2 {
		t.Fatalf("%d sessions cached, want 2", n)
	}

	// Three minutes on, b is used and a is not: a is stale and goes.
	clock.advance(3 * time.Minute)
	if !alive(b, 1) {
		t.Fatal("session b evicted")
	}
	c := open(1)
	if c == 0 || alive(a, 1) {
		t.Fatalf("new session %d; stale session a still alive or no room made", c)
	}
	// b (2 partitions) is past its youth, c is young: a smaller new
	// session cannot evict b, a larger one can.
	if d := open(1); d != 0 {
		t.Fatalf("a 1-partition session evicted a 2-partition one (id %d)", d)
	}
	e := open(3)
	if e == 0 || alive(b, 2) {
		t.Fatalf("3-partition session %d; b still alive or no room made", e)
	}
	if !alive(c, 1) || !alive(e, 1) {
		t.Fatal("sessions c and e should both be cached")
	}
}

// TestFetchSessionCacheZeroSlots: with no slots a full fetch gets no
// session, as Kafka's cache of size 0.
func TestFetchSessionCacheZeroSlots(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.MaxIncrementalFetchSessionCacheSlots = 0 })
	createTopic(t, ts.admin(t), "noslots", 1, nil)
	r := doFetch(t, ts.client(t), fetchReq("noslots", topicID(t, ts, "noslots"), []int64{0}, 0, 0))
	if r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("full fetch with no slots: code %d session %d", r.ErrorCode, r.SessionID)
	}
}

// TestFetchMaxBytesCapsResponse: fetch.max.bytes caps a response whatever
// MaxBytes the request asks for (Kafka's KafkaApis takes the smaller), and
// MinBytes above the cap is satisfied by a full capped answer instead of
// waiting out MaxWait.
func TestFetchMaxBytesCapsResponse(t *testing.T) {
	const limit = 64 << 10
	ts := startServer(t, "", func(c *config.Broker) { c.FetchMaxBytes = limit })
	createTopic(t, ts.admin(t), "capped", 4, nil)
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 4<<10)
	for p := range int32(4) {
		for range 40 {
			// One record per produce: batches of about 4 KiB.
			if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "capped", Partition: p, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := fetchReq("capped", topicID(t, ts, "capped"), []int64{0, 0, 0, 0}, 0, -1)
	req.MaxBytes = 1<<31 - 1
	req.MinBytes = 10 << 20
	req.MaxWaitMillis = 10000
	r, took := timedFetch(t, cl, req)
	total := 0
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
			}
			total += len(p.RecordBatches)
		}
	}
	if total < limit/2 || total > limit {
		t.Fatalf("a 2 GiB fetch got %d bytes of records, want %d..%d (fetch.max.bytes)", total, limit/2, limit)
	}
	if took > 5*time.Second {
		t.Fatalf("MinBytes above fetch.max.bytes waited %v for more than the cap allows", took)
	}
}
