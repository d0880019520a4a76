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

// The phases of a request's time, as Kafka's RequestMetrics splits it
// (RequestChannel.Request.updateRequestMetrics).
const (
	phaseRequestQueue = iota
	phaseLocal
	phaseRemote
	phaseResponseQueue
	phaseResponseSend
	numPhases
)

// phaseNames are the phases' MBean names, lowercased as the JMX exporter
// writes them, with the total last.
var phaseNames = [numPhases + 1]struct{ name, help string }{
	{"requestqueuetimems", "from the request read off the socket to its handler started (RequestMetrics RequestQueueTimeMs)"},
	{"localtimems", "in the request's handler on its connection's reader (RequestMetrics LocalTimeMs)"},
	{"remotetimems", "waiting for others: followers for acks=all, fetch.min.bytes and max wait, the coordinators (RequestMetrics RemoteTimeMs)"},
	{"responsequeuetimems", "from the response ready to the connection's writer taking it (RequestMetrics ResponseQueueTimeMs)"},
	{"responsesendtimems", "from the writer taking the response to its bytes written to the socket (RequestMetrics ResponseSendTimeMs)"},
	{"totaltimems", "from the request read off the socket to its response written (RequestMetrics TotalTimeMs)"},
}

// RequestTimes is where one request's time went, in Kafka's phases. Their
// sum is the request's total time.
type RequestTimes struct {
	// RequestQueue runs from the request's frame read to its handler
	// started (waiting for a queued.max.requests place).
	RequestQueue time.Duration
	// Local is the handler's first phase, on the connection's reader.
	Local time.Duration
	// Remote is the handler's background phase: waiting for followers
	// (acks=all), for data (a fetch's min bytes and max wait), for the
	// coordinators or the controller.
	Remote time.Duration
	// ResponseQueue runs from the response ready to the writer taking it
	// (it waits behind the responses of earlier requests).
	ResponseQueue time.Duration
	// ResponseSend runs from the writer taking the response to its last
	// byte written to the socket.
	ResponseSend time.Duration
	// Throttle is the throttle_time_ms the response carried: how long a
	// quota muted the client (KIP-219). Not part of the total, as in
	// Kafka: the client waits it out after the response.
	Throttle time.Duration
}

// Registry is one broker's metrics. Create it with New.
type Registry struct {
	reg *prometheus.Registry

	messagesIn, bytesIn, bytesOut *prometheus.CounterVec
	replicationBytesOut           prometheus.Counter
	replicationBytesIn            prometheus.Counter

	requests    [maxKey]prometheus.Counter
	requestTime [maxKey][numPhases + 1]prometheus.Observer // the phases, then the total
	throttle    [maxKey]prometheus.Observer

	isrShrinks, isrExpands, isrFailed prometheus.Counter

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
	var phases [numPhases + 1]*prometheus.HistogramVec
	for i, ph := range phaseNames {
		phases[i] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kafka_network_requestmetrics_" + ph.name,
			Help:    "Milliseconds " + ph.help + ", per API.",
			Buckets: latencyBucketsMs,
		}, []string{"request"})
		r.reg.MustRegister(phases[i])
	}
	throttle := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kafka_network_requestmetrics_throttletimems",
		Help:    "Milliseconds a quota throttled the client for, as the response's throttle_time_ms, per API (RequestMetrics ThrottleTimeMs).",
		Buckets: latencyBucketsMs,
	}, []string{"request"})
	r.reg.MustRegister(throttle)
	for _, key := range keys {
		name := kmsg.NameForKey(key)
		if key < 0 || key >= maxKey || name == "Unknown" || name == "" {
			continue
		}
		r.requests[key] = requests.WithLabelValues(name)
		r.throttle[key] = throttle.WithLabelValues(name)
		for i := range phases {
			r.requestTime[key][i] = phases[i].WithLabelValues(name)
		}
	}
	r.isrShrinks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_replicamanager_isrshrinks_total",
		Help: "ISR shrinks this node asked for as leader and the controller committed (ReplicaManager IsrShrinksPerSec).",
	})
	r.isrExpands = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_replicamanager_isrexpands_total",
		Help: "ISR expansions this node asked for as leader and the controller committed (ReplicaManager IsrExpandsPerSec).",
	})
	r.isrFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_replicamanager_failedisrupdates_total",
		Help: "ISR changes this node asked for as leader that failed (ReplicaManager FailedIsrUpdatesPerSec).",
	})
	r.reg.MustRegister(r.messagesIn, r.bytesIn, r.bytesOut, r.replicationBytesOut, r.replicationBytesIn,
		requests, r.isrShrinks, r.isrExpands, r.isrFailed,
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

// RequestDone counts a request of API key answered, with where its time
// went.
func (r *Registry) RequestDone(key int16, t RequestTimes) {
	if r == nil || key < 0 || key >= maxKey || r.requests[key] == nil {
		return
	}
	r.requests[key].Inc()
	obs := &r.requestTime[key]
	obs[phaseRequestQueue].Observe(ms(t.RequestQueue))
	obs[phaseLocal].Observe(ms(t.Local))
	obs[phaseRemote].Observe(ms(t.Remote))
	obs[phaseResponseQueue].Observe(ms(t.ResponseQueue))
	obs[phaseResponseSend].Observe(ms(t.ResponseSend))
	obs[numPhases].Observe(ms(t.RequestQueue + t.Local + t.Remote + t.ResponseQueue + t.ResponseSend))
	r.throttle[key].Observe(ms(t.Throttle))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ISRChanged counts an ISR change this node asked for as a partition's
// leader: committed as a shrink or an expansion, or failed (refused or
// not answered), as Kafka's AlterPartitionListener marks them.
func (r *Registry) ISRChanged(shrink, failed bool) {
	switch {
	case r == nil:
	case failed:
		r.isrFailed.Inc()
	case shrink:
		r.isrShrinks.Inc()
	default:
		r.isrExpands.Inc()
	}
}
