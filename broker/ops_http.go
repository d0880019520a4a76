package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/metrics"
	"github.com/gregorbroker/gregor/broker/internal/partition"
)

// opsState is the server's side for its operator: the metrics registry
// and the HTTP listener (http.listener) serving /metrics, /healthz and
// /readyz.
type opsState struct {
	metrics *metrics.Registry
	httpLn  net.Listener
	httpSrv *http.Server
	// serving is set once the client listeners accept connections.
	serving atomic.Bool
	// extra serves the paths the listener's own leave (Options.HTTPHandler).
	extra http.Handler
}

// Metrics is the server's Prometheus registry's gatherer.
func (s *Server) Metrics() prometheus.Gatherer { return s.ops.metrics.Gatherer() }

// HTTPAddr is the address the HTTP listener is bound to, nil when it is
// off.
func (s *Server) HTTPAddr() net.Addr {
	if s.ops.httpLn == nil {
		return nil
	}
	return s.ops.httpLn.Addr()
}

// ClientListener is one bound client listener: its name, its security
// protocol and the address it accepts on.
type ClientListener struct {
	Name     string
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Addr     net.Addr
}

// ClientListeners are the client listeners as bound, once started, in
// the order of listeners; the web console picks one to connect through.
func (s *Server) ClientListeners() []ClientListener {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ClientListener
	for i, l := range s.clientListeners() {
		if i < len(s.listeners) {
			out = append(out, ClientListener{Name: l.Name, Protocol: s.cfg.ListenerSecurityProtocolMap[l.Name], Addr: s.listeners[i].Addr()})
		}
	}
	return out
}

// newMetrics creates the registry with the broker's scrape-time gauges.
func (s *Server) newMetrics() {
	var keys []int16
	for _, k := range s.versions.Keys() {
		keys = append(keys, k.ApiKey)
	}
	s.ops.metrics = metrics.New(keys)
	s.ops.metrics.MustRegister(&brokerCollector{s: s}, &stateCollector{s: s})
}

// startHTTP binds http.listener and serves it until the server closes.
// It runs before registration, so /healthz answers (and /readyz says
// "not ready") while the node starts. A port already taken is logged and
// the node runs without it: the listener is for watching the broker, and
// a broker that serves clients is worth more than one that refuses to
// start for its monitoring port (two dev nodes on one machine).
func (s *Server) startHTTP() {
	addr := s.cfg.HTTPListener
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.log.Error("http listener off: cannot bind http.listener", "addr", addr, "err", err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.ops.metrics.Handler())
	mux.HandleFunc("GET /healthz", s.serveHealthz)
	mux.HandleFunc("GET /readyz", s.serveReadyz)
	paths := "/metrics /healthz /readyz"
	if s.cfg.HTTPPprofEnable {
		// Off by default: a profile costs the node CPU while it runs and
		// shows its internals to whoever reaches the listener.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		paths += " /debug/pprof/"
	}
	if s.ops.extra != nil {
		mux.Handle("/", s.ops.extra)
		paths += " /"
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.ops.httpLn, s.ops.httpSrv = ln, srv
	s.goTracked(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http listener", "err", err)
		}
	})
	s.goTracked(func() {
		<-s.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	s.log.Info("http listener", "addr", ln.Addr().String(), "paths", paths)
}

// serveHealthz is Kubernetes' liveness: the process is up and serving;
// it fails only when the node cannot go on (its metadata log stopped on a
// storage error) or is shutting down, when a restart is the cure.
func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	s.identify(w)
	if err := s.healthProblem(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// identify names the node and its cluster in headers, so that a probe
// (gregor cluster health) knows which broker answered.
func (s *Server) identify(w http.ResponseWriter) {
	w.Header().Set("Gregor-Node-Id", strconv.Itoa(int(s.cfg.NodeID)))
	if s.meta != nil {
		w.Header().Set("Gregor-Cluster-Id", s.meta.Image().ClusterID)
	}
}

func (s *Server) healthProblem() error {
	if s.isClosed() || s.ctx.Err() != nil {
		return errors.New("shutting down")
	}
	if s.meta != nil {
		if err := s.meta.Err(); err != nil {
			return fmt.Errorf("metadata log stopped: %w", err)
		}
	}
	return nil
}

// serveReadyz is Kubernetes' readiness: the node may be sent clients. It
// is ready when its client listeners accept connections, it is registered
// with the controller and unfenced (which the controller grants once the
// node has caught up with the metadata log), and it knows the quorum's
// leader.
func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	s.identify(w)
	if err := s.readinessProblem(); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (s *Server) readinessProblem() error {
	if err := s.healthProblem(); err != nil {
		return err
	}
	if !s.ops.serving.Load() {
		return errors.New("listeners not accepting yet")
	}
	if _, ok := s.meta.LeaderID(); !ok {
		return errors.New("no metadata quorum leader known")
	}
	epoch := s.epoch.Load()
	if epoch <= 0 {
		return errors.New("not registered with the controller")
	}
	b, ok := s.meta.Image().Broker(s.cfg.NodeID)
	switch {
	case !ok || b.Epoch != epoch:
		return errors.New("registration not in the metadata log yet")
	case b.Fenced:
		return errors.New("fenced: catching up with the metadata log")
	}
	return nil
}

// countFetched counts a fetch response partition's record bytes.
func (s *Server) countFetched(topic string, index int32, bytes int, follower bool) {
	var t *metrics.Topic
	if p := s.parts.get(topic, index); p != nil {
		t = p.Metrics
	}
	s.ops.metrics.Fetched(t, bytes, follower)
}

// brokerCollector reads the gauges Kafka keeps as MBeans from the server
// at scrape time: nothing on the request path keeps them up to date.
type brokerCollector struct{ s *Server }

var (
	descURP = prometheus.NewDesc("kafka_server_replicamanager_underreplicatedpartitions",
		"Partitions led here with fewer in-sync replicas than replicas (ReplicaManager UnderReplicatedPartitions).", nil, nil)
	descPartitionCount = prometheus.NewDesc("kafka_server_replicamanager_partitioncount",
		"Partitions hosted here (ReplicaManager PartitionCount).", nil, nil)
	descLeaderCount = prometheus.NewDesc("kafka_server_replicamanager_leadercount",
		"Partitions led here (ReplicaManager LeaderCount).", nil, nil)
	descOffline = prometheus.NewDesc("kafka_controller_kafkacontroller_offlinepartitionscount",
		"Partitions without a leader; reported by the active controller, 0 elsewhere (KafkaController OfflinePartitionsCount).", nil, nil)
	descActive = prometheus.NewDesc("kafka_controller_kafkacontroller_activecontrollercount",
		"1 on the active controller, else 0 (KafkaController ActiveControllerCount).", nil, nil)
	descBrokers = prometheus.NewDesc("kafka_controller_kafkacontroller_activebrokercount",
		"Registered unfenced brokers; reported by the active controller (KafkaController ActiveBrokerCount).", nil, nil)
	descLogSize = prometheus.NewDesc("kafka_log_log_size",
		"Bytes of a hosted partition's log segments (Log Size).", []string{"topic", "partition"}, nil)
	descLogStart = prometheus.NewDesc("kafka_log_log_logstartoffset",
		"A hosted partition's log start offset (Log LogStartOffset).", []string{"topic", "partition"}, nil)
	descLogEnd = prometheus.NewDesc("kafka_log_log_logendoffset",
		"A hosted partition's log end offset (Log LogEndOffset).", []string{"topic", "partition"}, nil)
	descConns = prometheus.NewDesc("kafka_server_socket_server_metrics_connection_count",
		"Open client connections (socket-server-metrics connection-count).", nil, nil)
	descRaftLeader = prometheus.NewDesc("kafka_server_raft_metrics_current_leader",
		"The metadata quorum's leader, -1 if unknown (raft-metrics current-leader).", nil, nil)
	descRaftHW = prometheus.NewDesc("kafka_server_raft_metrics_high_watermark",
		"The metadata log offset applied here (raft-metrics high-watermark).", nil, nil)
	descRaftCommit = prometheus.NewDesc("kafka_server_raft_metrics_commit_latency_ms",
		"Milliseconds from a metadata record proposed on the active controller to it committed and applied (raft-metrics commit-latency-avg is sum/count).", nil, nil)
	descGroupLag = prometheus.NewDesc("kafka_consumergroup_lag",
		"A group's committed offset behind the partition's high watermark, for groups coordinated and partitions led here (kafka_exporter's name; Kafka has no MBean for it).",
		[]string{"consumergroup", "topic", "partition"}, nil)
	descGroupOffset = prometheus.NewDesc("kafka_consumergroup_current_offset",
		"A group's committed offset, for groups coordinated here (kafka_exporter's name).",
		[]string{"consumergroup", "topic", "partition"}, nil)
)

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descURP, descPartitionCount, descLeaderCount, descOffline, descActive, descBrokers,
		descLogSize, descLogStart, descLogEnd, descConns, descRaftLeader, descRaftHW, descRaftCommit, descGroupLag, descGroupOffset} {
		ch <- d
	}
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var urp, count, leaders int
	led := make(map[string]map[int32]*partition.Partition)
	for _, p := range hostedPartitions(s.parts.load()) {
		count++
		labels := []string{p.Topic, strconv.Itoa(int(p.Index))}
		gauge(descLogSize, float64(p.Log.Size()), labels...)
		gauge(descLogStart, float64(p.Log.LogStartOffset()), labels...)
		gauge(descLogEnd, float64(p.Log.LogEndOffset()), labels...)
		a := p.Assign.Load()
		if a == nil || a.Leader != s.cfg.NodeID {
			continue
		}
		leaders++
		if len(a.ISR) < len(a.Replicas) {
			urp++
		}
		if led[p.Topic] == nil {
			led[p.Topic] = make(map[int32]*partition.Partition)
		}
		led[p.Topic][p.Index] = p
	}
	gauge(descURP, float64(urp))
	gauge(descPartitionCount, float64(count))
	gauge(descLeaderCount, float64(leaders))

	img := s.meta.Image()
	active := s.meta.IsLeader()
	var offline, brokers int
	if active {
		for t := range img.AllTopics() {
			for _, pi := range t.Partitions {
				if pi.Leader < 0 {
					offline++
				}
			}
		}
		for _, b := range img.Brokers() {
			if !b.Fenced {
				brokers++
			}
		}
	}
	gauge(descOffline, float64(offline))
	gauge(descActive, boolFloat(active))
	gauge(descBrokers, float64(brokers))

	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	gauge(descConns, float64(conns))

	leader := -1.0
	if id, ok := s.meta.LeaderID(); ok {
		leader = float64(id)
	}
	gauge(descRaftLeader, leader)
	gauge(descRaftHW, float64(img.Offset()))
	n, sum := s.meta.CommitLatency()
	ch <- prometheus.MustNewConstSummary(descRaftCommit, n, float64(sum)/float64(time.Millisecond), nil)

	c.collectGroupLag(ch, led)
}

// collectGroupLag reports each group coordinated here: its committed
// offsets and, for the partitions led here, its lag. Bounded: a scrape
// does not wait long on a busy coordinator.
func (c *brokerCollector) collectGroupLag(ch chan<- prometheus.Metric, led map[string]map[int32]*partition.Partition) {
	s := c.s
	if s.groups == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 5
	groups := s.groups.coord.ListGroups(ctx, lreq)()
	if groups.ErrorCode != 0 {
		return
	}
	freq := kmsg.NewPtrOffsetFetchRequest()
	freq.Version = 8
	for _, g := range groups.Groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g.Group
		freq.Groups = append(freq.Groups, rg)
	}
	if len(freq.Groups) == 0 {
		return
	}
	resp := s.groups.coord.OffsetFetch(ctx, freq)()
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				// A group id may be any bytes, and a label value that is
				// not UTF-8 is refused: such a group is left out rather
				// than failing the scrape.
				labels := []string{g.Group, t.Topic, strconv.Itoa(int(p.Partition))}
				m, err := prometheus.NewConstMetric(descGroupOffset, prometheus.GaugeValue, float64(p.Offset), labels...)
				if err != nil {
					continue
				}
				ch <- m
				if lp := led[t.Topic][p.Partition]; lp != nil {
					if m, err := prometheus.NewConstMetric(descGroupLag, prometheus.GaugeValue, float64(max(lp.HW.Load()-p.Offset, 0)), labels...); err == nil {
						ch <- m
					}
				}
			}
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
