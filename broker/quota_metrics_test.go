package broker

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

// scrapeMetrics reads the broker's /metrics over HTTP and returns each
// sample's value by its line's name and labels as written, e.g.
// `kafka_server_produce_byte_rate{client_id="x",user=""}`.
func scrapeMetrics(t *testing.T, ts *testServer) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + ts.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQuotaMetricsScraped: with byte-rate quotas set, a producer and a
// consumer that go over them are throttled, and a scrape of /metrics
// reads back the throttle time per request (RequestMetrics
// ThrottleTimeMs) and the per client id byte rate and average throttle
// time Kafka exposes per quota sensor.
func TestQuotaMetricsScraped(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		c.HTTPListener = "127.0.0.1:0"
		// 5 windows of 1 s: a rate is measured over at least 4 s and a
		// throttle is remembered for 5 s, long enough to scrape it.
		c.QuotaWindowNum = 5
		c.QuotaWindowSizeSeconds = 1
	})
	adm := ts.admin(t)
	createTopic(t, adm, "metered", 1, nil)
	const quota = 5 << 10
	setQuota(t, adm, "producer_byte_rate", quota, "client-id", "metered-producer")
	setQuota(t, adm, "consumer_byte_rate", quota, "client-id", "metered-consumer")
	// Far above what one client takes: measured, never throttled.
	setQuota(t, adm, "request_percentage", 1000, "client-id", "metered-producer")

	// 40 KiB in one go is 10 KiB/s over the 4 s span: twice the quota.
	prod := ts.client(t, kgo.ClientID("metered-producer"), kgo.DefaultProduceTopic("metered"),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for range 40 {
		recs = append(recs, &kgo.Record{Value: make([]byte, 1024)})
	}
	if err := prod.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := scrapeMetrics(t, ts)
	const producer = `{client_id="metered-producer",user=""}`
	rate, throttle := m["kafka_server_produce_byte_rate"+producer], m["kafka_server_produce_throttle_time"+producer]
	t.Logf("produce: byte_rate %.0f B/s, throttle_time %.0f ms, request_time %.4f%%", rate, throttle, m["kafka_server_request_request_time"+producer])
	if rate < quota || rate > 20*quota {
		t.Errorf("kafka_server_produce_byte_rate %v, want above the quota %d B/s and sane", rate, quota)
	}
	if throttle < 100 || throttle > 10000 {
		t.Errorf("kafka_server_produce_throttle_time %v ms, want a throttle of seconds", throttle)
	}
	n, sum := m[`kafka_network_requestmetrics_throttletimems_count{request="Produce"}`], m[`kafka_network_requestmetrics_throttletimems_sum{request="Produce"}`]
	if n < 1 || sum < 100 {
		t.Errorf("Produce throttletimems count %v sum %v ms, want a throttled response", n, sum)
	}
	rt, rok := m["kafka_server_request_request_time"+producer]
	if tt, tok := m["kafka_server_request_throttle_time"+producer]; !rok || !tok || rt <= 0 || rt > 1000 || tt != 0 {
		t.Errorf("request sensor: request_time %v%% (present %v), throttle_time %v (present %v); want some time, no throttle", rt, rok, tt, tok)
	}
	if s := m[`kafka_network_requestmetrics_throttletimems_sum{request="Metadata"}`]; s != 0 {
		t.Errorf("Metadata requests throttled for %v ms without a request quota", s)
	}

	hook := &throttleHook{}
	cons := ts.client(t, kgo.ClientID("metered-consumer"), kgo.ConsumeTopics("metered"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook), kgo.FetchMaxWait(100*time.Millisecond))
	waitFor(t, "a throttled fetch", func() bool {
		ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
		defer cancel()
		cons.PollFetches(ctx)
		return hook.n.Load() > 0
	})
	m = scrapeMetrics(t, ts)
	const consumer = `{client_id="metered-consumer",user=""}`
	ft, ok := m["kafka_server_fetch_throttle_time"+consumer]
	if _, rok := m["kafka_server_fetch_byte_rate"+consumer]; !ok || !rok || ft < 100 {
		t.Errorf("fetch sensor: throttle_time %v (present %v), byte_rate present %v; want a throttle of seconds", ft, ok, rok)
	}
	if s := m[`kafka_network_requestmetrics_throttletimems_sum{request="Fetch"}`]; s < 100 {
		t.Errorf("Fetch throttletimems sum %v ms", s)
	}
	t.Logf("fetch: throttle_time %.0f ms; %s", ft, fmt.Sprint(m[`kafka_network_requestmetrics_throttletimems_count{request="Fetch"}`], " fetches counted"))
}
