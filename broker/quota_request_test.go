package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// TestRequestPercentageQuota: a client with a tiny request_percentage
// (0.01% of a thread, 100 µs a second) flooding Metadata requests gets a
// throttle_time_ms above 0 and at most one window (Kafka's bound), while
// a client without a quota on the same broker is not throttled.
func TestRequestPercentageQuota(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.QuotaWindowNum, c.QuotaWindowSizeSeconds = 2, 1 })
	adm := ts.admin(t)
	setQuota(t, adm, "request_percentage", 0.01, "client-id", "flooder")
	ctx := testContext(t)
	d, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: new("flooder")}})
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "request_percentage" || d[0].Values[0].Value != 0.01 {
		t.Fatalf("describe flooder's quota: %+v %v", d, err)
	}

	flood := func(cl *kgo.Client, n int) (throttled int, most int32) {
		t.Helper()
		for range n {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("metadata: %v", err)
			}
			if resp.ThrottleMillis > 0 {
				throttled++
				most = max(most, resp.ThrottleMillis)
			}
		}
		return throttled, most
	}
	// The client waits out each throttle time before its next request,
	// so a few requests are enough.
	throttled, most := flood(ts.client(t, kgo.ClientID("flooder")), 5)
	if throttled == 0 || most > 1000 {
		t.Fatalf("flooder: %d of 5 requests throttled, at most %d ms; want some of 5, at most 1000 ms", throttled, most)
	}
	t.Logf("flooder: %d of 5 Metadata requests throttled, at most %d ms", throttled, most)
	if throttled, _ := flood(ts.client(t, kgo.ClientID("other")), 200); throttled != 0 {
		t.Fatalf("a client without a quota was throttled %d times", throttled)
	}
}
