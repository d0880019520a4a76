package metrics

import (
	"strings"
	"testing"
	"time"

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
	r.RequestDone(0, 2*time.Millisecond)
	r.RequestDone(99, time.Millisecond) // not served: not counted
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
	if n, err := testutil.GatherAndCount(r.Gatherer(), "kafka_network_requestmetrics_totaltimems"); err != nil || n != 2 {
		t.Errorf("latency histograms: %d, %v", n, err)
	}
	r.DeleteTopic("t")
	if n, err := testutil.GatherAndCount(r.Gatherer(), "kafka_server_brokertopicmetrics_messagesin_total"); err != nil || n != 0 {
		t.Errorf("series after DeleteTopic: %d, %v", n, err)
	}
}

// BenchmarkHotPath is what one produced batch and its request cost the
// broker in metrics: two counter adds on the topic resolved beforehand,
// one request count and one latency observation.
func BenchmarkHotPath(b *testing.B) {
	r := New([]int16{0})
	tp := r.Topic("t")
	b.ReportAllocs()
	for b.Loop() {
		tp.Produced(10, 1000)
		r.RequestDone(0, 300*time.Microsecond)
	}
}
