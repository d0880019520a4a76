package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestControllerMutationQuota: a controller_mutation_rate of 10
// partitions/s (KIP-599) with 2 windows of 1 s, a bucket of 20
// partitions. Strict requests (CreateTopics v6+, CreatePartitions v3,
// DeleteTopics v5+) are refused with THROTTLING_QUOTA_EXCEEDED and the
// time until the bucket is back at zero once it is below zero, and are
// allowed after that time; an old-version request is let through with
// only the throttle time.
//
// The broker's clock is a test clock that moves only when the test moves
// it, so the throttle times are exact and "at once" means at once however
// loaded the machine is: with the wall clock, a slow commit of the first
// CreateTopics let the bucket refill before the retry was asked.
func TestControllerMutationQuota(t *testing.T) {
	clock := &testClock{now: time.Now()}
	ts := startMutationServer(t, clock)
	adm := ts.admin(t)
	setQuota(t, adm, "controller_mutation_rate", 10, "client-id", "mutator")
	cl := ts.client(t, kgo.ClientID("mutator"))
	ctx := testContext(t)
	// mutator is another connection of the client, speaking CreateTopics
	// at most at version v (kgo sends its highest otherwise).
	mutator := func(v int16) *kgo.Client {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(int16(kmsg.CreateTopics), v)
		return ts.client(t, kgo.ClientID("mutator"), kgo.MaxVersions(vs))
	}
	var createOn func(cl *kgo.Client, version int16, topics map[string]int32, order ...string) *kmsg.CreateTopicsResponse

	d, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: new("mutator"), MatchType: 0}})
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "controller_mutation_rate" || d[0].Values[0].Value != 10 {
		t.Fatalf("describe mutator's quota: %+v %v", d, err)
	}

	create := func(version int16, topics map[string]int32, order ...string) *kmsg.CreateTopicsResponse {
		return createOn(cl, version, topics, order...)
	}
	createOn = func(cl *kgo.Client, version int16, topics map[string]int32, order ...string) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = version, 10000
		for _, n := range order {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, topics[n], 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("create %v: %v", order, err)
		}
		return resp
	}
	codes := func(resp *kmsg.CreateTopicsResponse) string {
		var out []string
		for _, rt := range resp.Topics {
			e := "ok"
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				e = err.(*kerr.Error).Message
			}
			out = append(out, rt.Topic+"="+e)
		}
		return strings.Join(out, " ")
	}

	// 20 partitions empty the bucket, 5 more take it below zero (the
	// bucket was not below zero when they were asked for), and the last
	// topic is refused: 5 partitions at 10/s is 500 ms.
	// The connection for the retry below is opened now, so that the retry
	// is one request, well inside the 500 ms it must come in.
	retry := mutator(6)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, retry); err != nil {
		t.Fatalf("open the retry's connection: %v", err)
	}
	resp := create(7, map[string]int32{"m-a": 20, "m-b": 5, "m-c": 1}, "m-a", "m-b", "m-c")
	if got := codes(resp); got != "m-a=ok m-b=ok m-c=THROTTLING_QUOTA_EXCEEDED" {
		t.Fatalf("first create: %s", got)
	}
	if msg := resp.Topics[2].ErrorMessage; msg == nil || *msg != "The throttling quota has been exceeded." {
		t.Errorf("throttled topic's message %v", msg)
	}
	if resp.ThrottleMillis != 500 {
		t.Fatalf("throttle_time_ms %d, want 500", resp.ThrottleMillis)
	}

	// Asked again at once (on another connection: the client waits out
	// its own, which the broker has muted), it is still refused, with
	// the same throttle time; 1 ms short of it, still refused; at the
	// throttle time, it is created.
	if r := createOn(retry, 6, map[string]int32{"m-c": 1}, "m-c"); codes(r) != "m-c=THROTTLING_QUOTA_EXCEEDED" || r.ThrottleMillis != 500 {
		t.Fatalf("retry at once: %s throttle %d ms", codes(r), r.ThrottleMillis)
	}
	clock.advance(499 * time.Millisecond)
	if r := createOn(mutator(6), 6, map[string]int32{"m-c": 1}, "m-c"); codes(r) != "m-c=THROTTLING_QUOTA_EXCEEDED" || r.ThrottleMillis != 1 {
		t.Fatalf("retry 1 ms early: %s throttle %d ms", codes(r), r.ThrottleMillis)
	}
	clock.advance(time.Millisecond)
	if r := createOn(mutator(7), 7, map[string]int32{"m-c": 1}, "m-c"); codes(r) != "m-c=ok" || r.ThrottleMillis != 0 {
		t.Fatalf("retry after the throttle time: %s throttle %d ms", codes(r), r.ThrottleMillis)
	}

	// CreateTopics v5 is permissive: 30 partitions go through, the
	// bucket (at -1 after m-c) far below zero, with 3.1 s of throttle
	// time.
	perm := createOn(mutator(5), 5, map[string]int32{"m-d": 30}, "m-d")
	if got := codes(perm); got != "m-d=ok" || perm.ThrottleMillis != 3100 {
		t.Fatalf("permissive create: %s throttle %d ms", got, perm.ThrottleMillis)
	}

	// CreatePartitions v3 and DeleteTopics v6 are strict too.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "m-c", 2
	cp.Topics = append(cp.Topics, cpt)
	cpResp, err := cp.RequestWith(ctx, cl)
	if err != nil || len(cpResp.Topics) != 1 || cpResp.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || cpResp.ThrottleMillis <= 0 {
		t.Fatalf("create partitions while throttled: %+v %v", cpResp, err)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 6, 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = new("m-b")
	del.Topics = append(del.Topics, dt)
	// (On a new connection: cl waits out the throttle time it was given.)
	delCl := mutator(7)
	delResp, err := del.RequestWith(ctx, delCl)
	if err != nil || len(delResp.Topics) != 1 || delResp.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || delResp.ThrottleMillis <= 0 {
		t.Fatalf("delete while throttled: %+v %v", delResp, err)
	}
	if delResp.ThrottleMillis != 3100 {
		t.Fatalf("delete's throttle time %d ms, want 3100", delResp.ThrottleMillis)
	}
	clock.advance(3100 * time.Millisecond)
	if delResp, err = del.RequestWith(ctx, delCl); err != nil || delResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete after the throttle time: %+v %v", delResp, err)
	}
	// The other clients have no quota.
	if r, err := adm.DeleteTopic(ctx, "m-d"); err != nil || r.Err != nil {
		t.Fatalf("another client's delete: %v %v", r, err)
	}
}

// startMutationServer starts a broker with 2 quota windows of 1 s (a
// controller_mutation_rate bucket of 2 s of the rate) on clock.
func startMutationServer(t *testing.T, clock *testClock) *testServer {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.QuotaWindowNum, cfg.QuotaWindowSizeSeconds = 2, 1
	s, err := New(cfg, Options{Logger: testLogger(), Now: clock.Now})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, dir: dir, addr: s.Addr().String()}
}

// TestControllerMutationQuotaSlowCommit: the throttle time a
// CreateTopics, CreatePartitions or DeleteTopics response carries (and
// mutes the connection for) is the one measured when the partitions were
// counted less the time the request then took, as Kafka's
// AbstractControllerMutationQuota.throttleTime deducts the time a
// request waited: the response is sent after the metadata commit, and
// the bucket refills meanwhile.
func TestControllerMutationQuotaSlowCommit(t *testing.T) {
	clock := &testClock{now: time.Now()}
	ts := startMutationServer(t, clock)
	setQuota(t, ts.admin(t), "controller_mutation_rate", 10, "client-id", "mutator")
	q := &mutationQuota{s: ts.Server, clientID: "mutator", strict: true}
	if !q.allow(25) || q.allow(1) {
		t.Fatalf("25 partitions then 1 from a bucket of 20: want allowed then refused")
	}
	for _, c := range []struct {
		step time.Duration
		want int
	}{{0, 500}, {300 * time.Millisecond, 200}, {199 * time.Millisecond, 1}, {time.Millisecond, 0}, {time.Second, 0}} {
		clock.advance(c.step)
		if got := q.remainingMs(clock.Now()); got != c.want {
			t.Fatalf("throttle time after another %v: %d ms, want %d", c.step, got, c.want)
		}
	}
}
