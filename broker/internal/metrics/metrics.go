// Package metrics holds a broker's Prometheus metrics under the names the
// Kafka JMX exporter gives Kafka's MBeans (docs/operations.md has the
// table). Counters on the produce and fetch paths are resolved once per
// topic (Topic) and per API key (the Requests arrays), so counting a
// request costs an atomic add, not a lookup by label strings.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxKey bounds the API keys counted: Kafka's keys are below it.
const maxKey = 128

// latencyBucketsMs are the request latency histogram's upper bounds in
// milliseconds (Kafka's RequestMetrics *TimeMs are in milliseconds).
var latencyBucketsMs = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// Registry is one broker's metrics. Create it with New.
type Registry struct {
	reg *prometheus.Registry

	messagesIn, bytesIn, bytesOut *prometheus.CounterVec
	replicationBytesOut           prometheus.Counter
	replicationBytesIn            prometheus.Counter

	requests    [maxKey]prometheus.Counter
	requestTime [maxKey]prometheus.Observer

	mu     sync.Mutex // guards topics
	topics map[string]*Topic
}

// Topic is one topic's counters, resolved once and kept by each of its
// partitions. A nil *Topic counts nothing (a partition built in a test).
type Topic struct {
	messagesIn, bytesIn, bytesOut prometheus.Counter
}

// New returns a registry with the broker's counters, for the API keys it
// serves, and the Go runtime's and the process's own collectors.
func New(keys []int16) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), topics: make(map[string]*Topic)}
	r.messagesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_messagesin_total",
		Help: "Records appended by produce requests, per topic (BrokerTopicMetrics MessagesInPerSec).",
	}, []string{"topic"})
	r.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_bytesin_total",
		Help: "Record bytes appended by produce requests, per topic (BrokerTopicMetrics BytesInPerSec).",
	}, []string{"topic"})
	r.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_bytesout_total",
		Help: "Record bytes sent to consumers in fetch responses, per topic (BrokerTopicMetrics BytesOutPerSec).",
	}, []string{"topic"})
	r.replicationBytesOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_replicationbytesout_total",
		Help: "Record bytes sent to follower replicas (BrokerTopicMetrics ReplicationBytesOutPerSec).",
	})
	r.replicationBytesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_replicationbytesin_total",
		Help: "Record bytes appended from leaders by this node's followers (BrokerTopicMetrics ReplicationBytesInPerSec).",
	})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_network_requestmetrics_requests_total",
		Help: "Requests answered, per API (RequestMetrics RequestsPerSec).",
	}, []string{"request"})
	totalTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kafka_network_requestmetrics_totaltimems",
		Help:    "Milliseconds from a request parsed to its response queued on the socket, per API (RequestMetrics TotalTimeMs).",
		Buckets: latencyBucketsMs,
	}, []string{"request"})
	for _, key := range keys {
		name := kmsg.NameForKey(key)
		if key < 0 || key >= maxKey || name == "Unknown" || name == "" {
			continue
		}
		r.requests[key] = requests.WithLabelValues(name)
		r.requestTime[key] = totalTime.WithLabelValues(name)
	}
	r.reg.MustRegister(r.messagesIn, r.bytesIn, r.bytesOut, r.replicationBytesOut, r.replicationBytesIn,
		requests, totalTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// MustRegister adds collectors (the broker's scrape-time gauges).
func (r *Registry) MustRegister(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

// Handler serves the registry in Prometheus's text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Gatherer is the registry as a Gatherer, for tests.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Topic returns name's counters, creating them on first use. Call it
// once per partition, not per request.
func (r *Registry) Topic(name string) *Topic {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.topics[name]
	if t == nil {
		t = &Topic{
			messagesIn: r.messagesIn.WithLabelValues(name),
			bytesIn:    r.bytesIn.WithLabelValues(name),
			bytesOut:   r.bytesOut.WithLabelValues(name),
		}
		r.topics[name] = t
	}
	return t
}

// DeleteTopic drops a deleted topic's series, as Kafka removes its
// BrokerTopicMetrics.
func (r *Registry) DeleteTopic(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.topics[name]; !ok {
		return
	}
	delete(r.topics, name)
	r.messagesIn.DeleteLabelValues(name)
	r.bytesIn.DeleteLabelValues(name)
	r.bytesOut.DeleteLabelValues(name)
}

// Topics returns the names of the topics with counters.
func (r *Registry) Topics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.topics))
	for n := range r.topics {
		names = append(names, n)
	}
	return names
}

// Produced counts records and bytes appended by a produce request.
func (t *Topic) Produced(records int64, bytes int) {
	if t == nil {
		return
	}
	t.messagesIn.Add(float64(records))
	t.bytesIn.Add(float64(bytes))
}

// Fetched counts record bytes sent in a fetch response, to a consumer or
// (follower) to a replica.
func (r *Registry) Fetched(t *Topic, bytes int, follower bool) {
	if r == nil || bytes <= 0 {
		return
	}
	if follower {
		r.replicationBytesOut.Add(float64(bytes))
		return
	}
	if t != nil {
		t.bytesOut.Add(float64(bytes))
	}
}

// Replicated counts record bytes a follower appended from its leader.
func (r *Registry) Replicated(bytes int) {
	if r == nil || bytes <= 0 {
		return
	}
	r.replicationBytesIn.Add(float64(bytes))
}

// RequestDone counts a request of API key answered d after it was read.
func (r *Registry) RequestDone(key int16, d time.Duration) {
	if r == nil || key < 0 || key >= maxKey || r.requests[key] == nil {
		return
	}
	r.requests[key].Inc()
	r.requestTime[key].Observe(float64(d) / float64(time.Millisecond))
}
