package broker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/clientquota"
)

// stateCollector reads, at scrape time, the gauges and counters of the
// fetch session cache, the producer state and the transaction
// coordinator (docs/operations.md): each is kept by its owner, nothing
// extra on the request path.
type stateCollector struct{ s *Server }

var (
	descFetchSessions = prometheus.NewDesc("kafka_server_fetchsessioncache_numincrementalfetchsessions",
		"Incremental fetch sessions cached, of consumers and followers (FetchSessionCache NumIncrementalFetchSessions).", nil, nil)
	descFetchSessionParts = prometheus.NewDesc("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
		"Partitions held by the cached fetch sessions (FetchSessionCache NumIncrementalFetchPartitionsCached).", nil, nil)
	descFetchSessionEvictions = prometheus.NewDesc("kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total",
		"Fetch sessions evicted to make room for new ones (FetchSessionCache IncrementalFetchSessionEvictionsPerSec).", nil, nil)
	descProducerIDs = prometheus.NewDesc("kafka_server_replicamanager_produceridcount",
		"Producer ids in the producer state of the partitions led here (ReplicaManager ProducerIdCount).", nil, nil)
	descTxnOngoing = prometheus.NewDesc("kafka_server_transaction_coordinator_metrics_ongoing_transactions",
		"Transactions open on this coordinator: Ongoing, PrepareCommit or PrepareAbort (Gregor's, in Kafka's transaction-coordinator-metrics group).", nil, nil)
	descTxnCommits = prometheus.NewDesc("kafka_server_transaction_coordinator_metrics_transactions_committed_total",
		"Transactions this coordinator completed as committed (Gregor's, in Kafka's transaction-coordinator-metrics group).", nil, nil)
	descTxnAborts = prometheus.NewDesc("kafka_server_transaction_coordinator_metrics_transactions_aborted_total",
		"Transactions this coordinator completed as aborted, timed out ones included (Gregor's, in Kafka's transaction-coordinator-metrics group).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFetchSessions, descFetchSessionParts, descFetchSessionEvictions,
		descProducerIDs, descTxnOngoing, descTxnCommits, descTxnAborts} {
		ch <- d
	}
	for _, q := range quotaMetrics {
		ch <- q.rate
		ch <- q.throttle
	}
}

// quotaMetrics are the per user and client id measurements of the client
// quotas, named as the JMX exporter names Kafka's
// kafka.server:type=Produce|Fetch|Request,user=...,client-id=... MBeans.
// A sensor exists, as in Kafka, only while a quota of its kind is set,
// for the clients that sent traffic since (idle for an hour, it goes).
var quotaMetrics = []struct {
	quota          func(*clientQuotas) *clientquota.Manager
	rate, throttle *prometheus.Desc
}{
	{
		quota: func(q *clientQuotas) *clientquota.Manager { return q.produce },
		rate: prometheus.NewDesc("kafka_server_produce_byte_rate",
			"Bytes per second produced by the user and client id, measured against producer_byte_rate (Produce byte-rate).", []string{"user", "client_id"}, nil),
		throttle: prometheus.NewDesc("kafka_server_produce_throttle_time",
			"Average milliseconds the user and client id's produce requests were throttled for over the quota windows (Produce throttle-time).", []string{"user", "client_id"}, nil),
	},
	{
		quota: func(q *clientQuotas) *clientquota.Manager { return q.fetch },
		rate: prometheus.NewDesc("kafka_server_fetch_byte_rate",
			"Bytes per second fetched by the user and client id, measured against consumer_byte_rate (Fetch byte-rate).", []string{"user", "client_id"}, nil),
		throttle: prometheus.NewDesc("kafka_server_fetch_throttle_time",
			"Average milliseconds the user and client id's fetches were throttled for over the quota windows (Fetch throttle-time).", []string{"user", "client_id"}, nil),
	},
	{
		quota: func(q *clientQuotas) *clientquota.Manager { return q.request },
		rate: prometheus.NewDesc("kafka_server_request_request_time",
			"Percent of a thread's time the user and client id's requests took, measured against request_percentage (Request request-time).", []string{"user", "client_id"}, nil),
		throttle: prometheus.NewDesc("kafka_server_request_throttle_time",
			"Average milliseconds the user and client id's requests were throttled for under request_percentage over the quota windows (Request throttle-time).", []string{"user", "client_id"}, nil),
	},
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		ch <- prometheus.MustNewConstMetric(d, t, v)
	}
	st := s.sessions.Stats()
	metric(descFetchSessions, prometheus.GaugeValue, float64(st.Sessions))
	metric(descFetchSessionParts, prometheus.GaugeValue, float64(st.PartitionsCached))
	metric(descFetchSessionEvictions, prometheus.CounterValue, float64(st.Evictions))

	// Only a partition's leader keeps producer state here (a follower's
	// is rebuilt when it becomes leader); Kafka's count includes
	// followers'.
	var pids int
	for _, p := range hostedPartitions(s.parts.load()) {
		p.Mu.Lock()
		if p.Producers != nil {
			pids += p.Producers.Len()
		}
		p.Mu.Unlock()
	}
	metric(descProducerIDs, prometheus.GaugeValue, float64(pids))

	now := s.now()
	for _, q := range quotaMetrics {
		for _, st := range q.quota(&s.byteQuotas).Stats(now) {
			ch <- prometheus.MustNewConstMetric(q.rate, prometheus.GaugeValue, st.Rate, st.User, st.ClientID)
			ch <- prometheus.MustNewConstMetric(q.throttle, prometheus.GaugeValue, st.ThrottleMs, st.User, st.ClientID)
		}
	}

	if s.txns == nil {
		return
	}
	commits, aborts := s.txns.coord.Completed()
	metric(descTxnCommits, prometheus.CounterValue, float64(commits))
	metric(descTxnAborts, prometheus.CounterValue, float64(aborts))
	// Bounded: a scrape does not wait long on a busy coordinator.
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing", "PrepareCommit", "PrepareAbort"}
	if resp := s.txns.coord.ListTransactions(ctx, req); resp.ErrorCode == 0 {
		metric(descTxnOngoing, prometheus.GaugeValue, float64(len(resp.TransactionStates)))
	}
}
