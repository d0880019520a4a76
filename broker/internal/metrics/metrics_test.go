package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCounters: a topic's counters, resolved once, add up what is
// counted; a request's count and latency land under its API's name; a
// deleted topic's series go.
func TestCounters(t *testing.T) {
	r := New([]int16{0, 1})
	tp := r.Topic("t")
	if r.Topic("t") != tp {
		t.Fatal("Topic resolved twice to different counters")
	}
	tp.Produced(3, 100)
	tp.Produced(2, 50)
	r.Fetched(tp, 70, false)
	r.Fetched(tp, 40, true)
	r.RequestDone(0, RequestTimes{RequestQueue: time.Millisecond, Local: 2 * time.Millisecond, Remote: 30 * time.Millisecond,
		ResponseQueue: 100 * time.Microsecond, ResponseSend: 400 * time.Microsecond})
	r.RequestDone(99, RequestTimes{Local: time.Millisecond}) // not served: not counted
	r.ISRChanged(true, false)
	r.ISRChanged(true, false)
	r.ISRChanged(false, false)
	r.ISRChanged(false, true)
	var nilTopic *Topic
	nilTopic.Produced(1, 1) // a partition without counters counts nothing
	want := `
# HELP kafka_server_brokertopicmetrics_messagesin_total Records appended by produce requests, per topic (BrokerTopicMetrics MessagesInPerSec).
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 5
# HELP kafka_server_brokertopicmetrics_bytesin_total Record bytes appended by produce requests, per topic (BrokerTopicMetrics BytesInPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic="t"} 150
# HELP kafka_server_brokertopicmetrics_bytesout_total Record bytes sent to consumers in fetch responses, per topic (BrokerTopicMetrics BytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesout_total counter
kafka_server_brokertopicmetrics_bytesout_total{topic="t"} 70
# HELP kafka_server_brokertopicmetrics_replicationbytesout_total Record bytes sent to follower replicas (BrokerTopicMetrics ReplicationBytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_replicationbytesout_total counter
kafka_server_brokertopicmetrics_replicationbytesout_total 40
# HELP kafka_network_requestmetrics_requests_total Requests answered, per API (RequestMetrics RequestsPerSec).
# TYPE kafka_network_requestmetrics_requests_total counter
kafka_network_requestmetrics_requests_total{request="Fetch"} 0
kafka_network_requestmetrics_requests_total{request="Produce"} 1
`
	if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want),
		"kafka_server_brokertopicmetrics_messagesin_total", "kafka_server_brokertopicmetrics_bytesin_total",
		"kafka_server_brokertopicmetrics_bytesout_total", "kafka_server_brokertopicmetrics_replicationbytesout_total",
		"kafka_network_requestmetrics_requests_total"); err != nil {
		t.Error(err)
	}
	// Each phase lands in its own histogram, and the total is their sum.
	for name, want := range map[string]float64{
		"requestqueuetimems": 1, "localtimems": 2, "remotetimems": 30,
		"responsequeuetimems": 0.1, "responsesendtimems": 0.4, "totaltimems": 33.5,
	} {
		n, err := testutil.GatherAndCount(r.Gatherer(), "kafka_network_requestmetrics_"+name)
		if err != nil || n != 2 {
			t.Errorf("%s histograms: %d, %v", name, n, err)
		}
		if got := histogramSum(t, r, "kafka_network_requestmetrics_"+name, "Produce"); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s{Produce} sum %v, want %v", name, got, want)
		}
	}
	for _, c := range []struct {
		name    string
		counter prometheus.Counter
		want    float64
	}{
		{"isrshrinks", r.isrShrinks, 2}, {"isrexpands", r.isrExpands, 1}, {"failedisrupdates", r.isrFailed, 1},
	} {
		if got := testutil.ToFloat64(c.counter); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	r.DeleteTopic("t")
	if n, err := testutil.GatherAndCount(r.Gatherer(), "kafka_server_brokertopicmetrics_messagesin_total"); err != nil || n != 0 {
		t.Errorf("series after DeleteTopic: %d, %v", n, err)
	}
}

// histogramSum is the sum of the histogram name's series for request.
func histogramSum(t *testing.T, r *Registry, name, request string) float64 {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "request" && l.GetValue() == request {
					return m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	t.Fatalf("no %s{request=%q}", name, request)
	return 0
}

// BenchmarkHotPath is what one produced batch and its request cost the
// broker in metrics: two counter adds on the topic resolved beforehand,
// one request count and six latency observations (the five phases and
// the total).
func BenchmarkHotPath(b *testing.B) {
	r := New([]int16{0})
	tp := r.Topic("t")
	b.ReportAllocs()
	for b.Loop() {
		tp.Produced(10, 1000)
		r.RequestDone(0, RequestTimes{RequestQueue: 5 * time.Microsecond, Local: 100 * time.Microsecond,
			Remote: 150 * time.Microsecond, ResponseQueue: 10 * time.Microsecond, ResponseSend: 35 * time.Microsecond})
	}
}
