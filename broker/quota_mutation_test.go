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

	"github.com/gregorbroker/gregor/config"
)

// TestControllerMutationQuota: a controller_mutation_rate of 10
// partitions/s (KIP-599) with 2 windows of 1 s, a bucket of 20
// partitions. Strict requests (CreateTopics v6+, CreatePartitions v3,
// DeleteTopics v5+) are refused with THROTTLING_QUOTA_EXCEEDED and the
// time until the bucket is back at zero once it is below zero, and are
// allowed after that time; an old-version request is let through with
// only the throttle time.
func TestControllerMutationQuota(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.QuotaWindowNum, c.QuotaWindowSizeSeconds = 2, 1 })
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
	answered := time.Now()
	if got := codes(resp); got != "m-a=ok m-b=ok m-c=THROTTLING_QUOTA_EXCEEDED" {
		t.Fatalf("first create: %s", got)
	}
	if msg := resp.Topics[2].ErrorMessage; msg == nil || *msg != "The throttling quota has been exceeded." {
		t.Errorf("throttled topic's message %v", msg)
	}
	if resp.ThrottleMillis < 400 || resp.ThrottleMillis > 500 {
		t.Fatalf("throttle_time_ms %d, want about 500", resp.ThrottleMillis)
	}

	// Asked again at once (on another connection: the client waits out
	// its own, which the broker has muted), it is still refused; after
	// the throttle time it is created.
	got := codes(createOn(retry, 6, map[string]int32{"m-c": 1}, "m-c"))
	if late := time.Since(answered); got != "m-c=THROTTLING_QUOTA_EXCEEDED" && late < time.Duration(resp.ThrottleMillis)*time.Millisecond*8/10 {
		t.Fatalf("retry at once (%v after the first answer): %s", late, got)
	} else if got != "m-c=THROTTLING_QUOTA_EXCEEDED" {
		// A loaded machine took most of the throttle time to send one
		// request: the bucket refilled meanwhile, and the topic exists.
		t.Logf("retry came %v after the first answer, too late to be refused: %s", late, got)
	} else {
		time.Sleep(time.Duration(resp.ThrottleMillis)*time.Millisecond + 100*time.Millisecond)
		if got := codes(create(7, map[string]int32{"m-c": 1}, "m-c")); got != "m-c=ok" {
			t.Fatalf("retry after the throttle time: %s", got)
		}
	}

	// CreateTopics v5 is permissive: 30 partitions go through, the
	// bucket far below zero, with about 3 s of throttle time.
	perm := createOn(mutator(5), 5, map[string]int32{"m-d": 30}, "m-d")
	if got := codes(perm); got != "m-d=ok" || perm.ThrottleMillis < 2500 || perm.ThrottleMillis > 3100 {
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
	time.Sleep(time.Duration(delResp.ThrottleMillis)*time.Millisecond + 100*time.Millisecond)
	if delResp, err = del.RequestWith(ctx, delCl); err != nil || delResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete after the throttle time: %+v %v", delResp, err)
	}
	// The other clients have no quota.
	if r, err := adm.DeleteTopic(ctx, "m-d"); err != nil || r.Err != nil {
		t.Fatalf("another client's delete: %v %v", r, err)
	}
}
