package config

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// Broker is a node's configuration: the properties of server.properties,
// parsed and checked, with the values Kafka derives from several of them
// (retention from log.retention.ms/.minutes/.hours, advertised listeners
// from listeners...) already resolved.
type Broker struct {
	// KRaft.
	ProcessRoles                              []string         // process.roles
	NodeID                                    int32            // node.id (or broker.id)
	ControllerQuorumVoters                    map[int32]string // controller.quorum.voters: id -> host:port
	ControllerQuorumBootstrapServers          []string         // controller.quorum.bootstrap.servers
	ControllerListenerNames                   []string         // controller.listener.names, upper-cased
	ControllerQuorumElectionTimeoutMs         int32
	ControllerQuorumFetchTimeoutMs            int32
	ControllerQuorumElectionBackoffMaxMs      int32
	ControllerQuorumRequestTimeoutMs          int32
	ControllerQuorumRetryBackoffMs            int32
	ControllerQuorumAppendLingerMs            int32
	MetadataLogDir                            string // metadata.log.dir; empty: the first of LogDirs (MetadataDir)
	MetadataLogSegmentBytes                   int32
	MetadataLogSegmentMs                      int64
	MetadataMaxRetentionBytes                 int64
	MetadataMaxRetentionMs                    int64
	MetadataLogMaxRecordBytesBetweenSnapshots int64
	MetadataLogMaxSnapshotIntervalMs          int64
	MetadataMaxIdleIntervalMs                 int32
	BrokerHeartbeatIntervalMs                 int32
	BrokerSessionTimeoutMs                    int32
	// BrokerDisconnectGraceMs is broker.disconnect.grace.ms (Gregor's):
	// how long the active controller waits for a heartbeat from a broker
	// whose connection to it closed before fencing it; 0 leaves only the
	// session timeout.
	BrokerDisconnectGraceMs            int32
	InitialBrokerRegistrationTimeoutMs int32
	BrokerRack                         string // broker.rack; "" when not set
	ClusterID                          string // cluster.id (Gregor only); "" when not set
	HTTPListener                       string // http.listener (Gregor only): HOST:PORT, "" when off
	HTTPConsoleEnable                  bool   // http.console.enable (Gregor only)
	HTTPConsoleReadOnly                bool   // http.console.read.only (Gregor only)
	HTTPPprofEnable                    bool   // http.pprof.enable (Gregor only): /debug/pprof/ on http.listener
	// The web console's own client security (http.console.*, Gregor
	// only): the listener it connects through and its credentials there.
	HTTPConsoleListener      string // upper-cased; "" for the first PLAINTEXT client listener
	HTTPConsoleSASLMechanism string // upper-cased; "" without SASL
	HTTPConsoleSASLUsername  string
	HTTPConsoleSASLPassword  string
	HTTPConsoleSSLTruststore string // PEM CA file; "" for the system's
	HTTPConsoleSSLKeystore   string // PEM certificate and key file, for mutual TLS
	LogLevel                 string // log.level (Gregor only): debug, info, warn or error
	LogFormat                string // log.format (Gregor only): text or json

	// Network.
	Listeners []Listener
	// AdvertisedListeners are the broker listeners published in Metadata:
	// advertised.listeners, else listeners, without the controller ones.
	AdvertisedListeners []Listener
	// AdvertisedControllerListeners are the controller listeners others
	// reach this node's controller on, in controller.listener.names order.
	AdvertisedControllerListeners []Listener
	InterBrokerListenerName       string            // upper-cased
	ListenerSecurityProtocolMap   map[string]string // listener name -> protocol, both upper-cased
	SocketRequestMaxBytes         int32
	SocketSendBufferBytes         int32
	SocketReceiveBufferBytes      int32
	SocketListenBacklogSize       int32
	MaxConnections                int32
	MaxConnectionsPerIP           int32
	// MaxConnectionCreationRate is max.connection.creation.rate, and
	// ListenerMaxConnectionCreationRate its listener.name.<l>. overrides
	// by upper-cased listener name.
	MaxConnectionCreationRate         int32
	ListenerMaxConnectionCreationRate map[string]int32
	// ListenerMaxConnections are listener.name.<l>.max.connections, by
	// upper-cased listener name.
	ListenerMaxConnections map[string]int32
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// host or address -> the limit for it.
	MaxConnectionsPerIPOverrides map[string]int32
	ConnectionsMaxIdleMs         int64
	QueuedMaxRequests            int32
	QueuedMaxRequestBytes        int64 // queued.max.request.bytes; -1 (or 0) is no limit
	NumNetworkThreads            int32
	NumIOThreads                 int32
	BackgroundThreads            int32
	// ConnectionFailedAuthenticationDelayMs is
	// connection.failed.authentication.delay.ms.
	ConnectionFailedAuthenticationDelayMs int32
	// Authorizer is authorizer.class.name and the StandardAuthorizer's
	// settings.
	Authorizer Authorizer

	// Logs.
	LogDirs                                 []string // log.dirs, else log.dir
	NumPartitions                           int32
	LogSegmentBytes                         int64
	LogRollMs                               int64 // log.roll.ms, else log.roll.hours
	LogRollJitterMs                         int64 // log.roll.jitter.ms, else log.roll.jitter.hours
	LogIndexIntervalBytes                   int32
	LogIndexSizeMaxBytes                    int32
	LogRetentionMs                          int64 // .ms, else .minutes, else .hours; -1 is forever
	LogRetentionBytes                       int64
	LogRetentionCheckIntervalMs             int64
	LogCleanupPolicy                        []string
	LogFlushIntervalMessages                int64
	LogFlushIntervalMs                      *int64 // nil: LogFlushSchedulerIntervalMs applies
	LogFlushSchedulerIntervalMs             int64
	LogFlushOffsetCheckpointIntervalMs      int64
	LogFlushStartOffsetCheckpointIntervalMs int64
	LogSegmentDeleteDelayMs                 int64
	LogPreallocate                          bool
	LogMessageTimestampType                 string
	LogMessageTimestampBeforeMaxMs          int64
	LogMessageTimestampAfterMaxMs           int64
	NumRecoveryThreadsPerDataDir            int32
	LogCleanerEnable                        bool
	LogCleanerThreads                       int32
	LogCleanerBackoffMs                     int64
	LogCleanerDedupeBufferSize              int64
	LogCleanerIOBufferSize                  int32
	LogCleanerIOBufferLoadFactor            float64
	LogCleanerIOMaxBytesPerSecond           float64
	LogCleanerDeleteRetentionMs             int64
	LogCleanerMinCompactionLagMs            int64
	LogCleanerMaxCompactionLagMs            int64
	LogCleanerMinCleanableRatio             float64

	// Records and topics.
	MessageMaxBytes             int32
	CompressionType             string
	CompressionGzipLevel        int32
	CompressionLz4Level         int32
	CompressionZstdLevel        int32
	MinInsyncReplicas           int32
	UncleanLeaderElectionEnable bool
	AutoCreateTopicsEnable      bool
	DefaultReplicationFactor    int16
	DeleteTopicEnable           bool

	// Replication.
	ReplicaLagTimeMaxMs                      int64
	ReplicaSocketTimeoutMs                   int32
	ReplicaFetchMaxBytes                     int32
	ReplicaFetchWaitMaxMs                    int32
	ReplicaFetchMinBytes                     int32
	ReplicaFetchBackoffMs                    int32
	ReplicaFetchResponseMaxBytes             int32
	NumReplicaFetchers                       int32
	ReplicaHighWatermarkCheckpointIntervalMs int64
	AutoLeaderRebalanceEnable                bool
	LeaderImbalanceCheckIntervalSeconds      int64
	LeaderImbalancePerBrokerPercentage       int32
	FetchMaxBytes                            int32
	MaxIncrementalFetchSessionCacheSlots     int32

	// Client quotas: the samples and the span of each over which a
	// client's byte rate is measured (quota.window.num,
	// quota.window.size.seconds).
	QuotaWindowNum         int32
	QuotaWindowSizeSeconds int32

	// Groups and offsets.
	GroupMinSessionTimeoutMs            int32
	GroupMaxSessionTimeoutMs            int32
	GroupInitialRebalanceDelayMs        int32
	GroupMaxSize                        int32
	GroupCoordinatorRebalanceProtocols  []string
	GroupConsumerSessionTimeoutMs       int32
	GroupConsumerMinSessionTimeoutMs    int32
	GroupConsumerMaxSessionTimeoutMs    int32
	GroupConsumerHeartbeatIntervalMs    int32
	GroupConsumerMinHeartbeatIntervalMs int32
	GroupConsumerMaxHeartbeatIntervalMs int32
	// GroupConsumerAssignmentIntervalMs is
	// group.consumer.assignment.interval.ms and its bounds for the
	// group-level consumer.assignment.interval.ms.
	GroupConsumerAssignmentIntervalMs    int32
	GroupConsumerMinAssignmentIntervalMs int32
	GroupConsumerMaxAssignmentIntervalMs int32
	GroupConsumerMaxSize                 int32
	GroupConsumerMigrationPolicy         string
	// Streams groups (KIP-1071), broker/group.
	GroupStreamsSessionTimeoutMs       int32
	GroupStreamsMinSessionTimeoutMs    int32
	GroupStreamsMaxSessionTimeoutMs    int32
	GroupStreamsHeartbeatIntervalMs    int32
	GroupStreamsMinHeartbeatIntervalMs int32
	GroupStreamsMaxHeartbeatIntervalMs int32
	GroupStreamsMaxSize                int32
	GroupStreamsNumStandbyReplicas     int32
	GroupStreamsMaxStandbyReplicas     int32
	GroupStreamsTaskOffsetIntervalMs   int32
	// GroupStreamsMinTaskOffsetIntervalMs bounds the broker's and the
	// groups' task offset interval from below.
	GroupStreamsMinTaskOffsetIntervalMs int32
	GroupStreamsAcceptableRecoveryLag   int64
	GroupStreamsInitialRebalanceDelay   int32
	// group.streams.assignment.interval.ms and its bounds for the
	// group-level streams.assignment.interval.ms.
	GroupStreamsAssignmentIntervalMs    int32
	GroupStreamsMinAssignmentIntervalMs int32
	GroupStreamsMaxAssignmentIntervalMs int32
	// group.streams.rack.aware.assignment.tags: client tag keys streams
	// members must set.
	GroupStreamsRackAwareAssignmentTags []string
	// Share groups (KIP-932), broker/share.
	GroupShareSessionTimeoutMs    int32
	GroupShareHeartbeatIntervalMs int32
	// GroupShareAssignmentIntervalMs is group.share.assignment.interval.ms
	// and its bounds for the group-level share.assignment.interval.ms.
	GroupShareAssignmentIntervalMs          int32
	GroupShareMinAssignmentIntervalMs       int32
	GroupShareMaxAssignmentIntervalMs       int32
	GroupShareRecordLockDurationMs          int32
	GroupShareDeliveryCountLimit            int32
	GroupSharePartitionMaxRecordLocks       int32
	GroupShareMaxSize                       int32
	ShareCoordinatorStateTopicNumPartitions int32
	ShareCoordinatorStateTopicRF            int16
	ShareCoordinatorStateTopicMinISR        int16 // share.coordinator.state.topic.min.isr
	ShareCoordinatorUpdatesPerSnapshot      int32
	OffsetsTopicNumPartitions               int32
	OffsetsTopicReplicationFactor           int16
	OffsetsTopicSegmentBytes                int32
	OffsetsRetentionMinutes                 int32
	OffsetsRetentionCheckIntervalMs         int64
	OffsetMetadataMaxBytes                  int32
	OffsetsCommitTimeoutMs                  int32
	OffsetsLoadBufferSize                   int32

	// Transactions and producer state.
	TransactionStateLogNumPartitions                     int32
	TransactionStateLogReplicationFactor                 int16
	TransactionStateLogMinISR                            int32
	TransactionStateLogSegmentBytes                      int32
	TransactionStateLogLoadBufferSize                    int32
	TransactionMaxTimeoutMs                              int32
	TransactionalIDExpirationMs                          int32
	TransactionAbortTimedOutTransactionCleanupIntervalMs int32
	TransactionRemoveExpiredTransactionCleanupIntervalMs int32
	TransactionPartitionVerificationEnable               bool
	ProducerIDExpirationMs                               int32
	ProducerIDExpirationCheckIntervalMs                  int32

	// listenerSecurity is each listener's resolved security, the
	// controller listeners' included (ListenerSecurity).
	listenerSecurity map[string]ListenerSecurity
	// peerSecurity is how this node connects to the inter-broker and
	// controller listeners (PeerSecurity), those not PLAINTEXT.
	peerSecurity map[string]PeerSecurity

	// Props is the property map as given (file and overrides), unparsed:
	// DescribeConfigs reports these as STATIC_BROKER_CONFIG.
	Props map[string]string
}

// Default returns the configuration of a single combined node with no
// properties set: Kafka's defaults, and Gregor's where Kafka has none (see
// the package documentation).
func Default() *Broker {
	b, _, err := Parse(nil)
	if err != nil {
		// The defaults are fixed at compile time and tested; failing here
		// is a bug in this package, not bad input.
		panic("config: built-in defaults do not parse: " + err.Error())
	}
	return b
}

// LoadFile reads a server.properties file, applies overrides on top of it
// (as kafka-server-start's --override does) and parses the result.
func LoadFile(path string, overrides map[string]string) (*Broker, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	props, err := ReadProperties(f)
	if err != nil {
		return nil, nil, fmt.Errorf("load config %s: %w", path, err)
	}
	maps.Copy(props, overrides)
	b, unknown, err := Parse(props)
	if err != nil {
		return nil, unknown, fmt.Errorf("load config %s: %w", path, err)
	}
	return b, unknown, nil
}

// Parse checks and converts a property map. It returns the names it does
// not know, sorted, for the caller to log (Kafka logs them and goes on),
// and a *ConfigError naming the first bad property and value.
func Parse(props map[string]string) (*Broker, []string, error) {
	var unknown []string
	for name := range props {
		if _, ok := brokerKeyIndex[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)

	b := &Broker{Props: maps.Clone(props)}
	if b.Props == nil {
		b.Props = map[string]string{}
	}
	vals := make(map[string]value, len(brokerKeys))
	for i := range brokerKeys {
		k := &brokerKeys[i]
		v, err := k.resolve(props)
		if err != nil {
			return nil, unknown, err
		}
		vals[k.name] = v
		if k.set != nil {
			k.set(b, v)
		}
	}
	if err := b.derive(vals, props); err != nil {
		return nil, unknown, err
	}
	// listener.name.<name>.ssl.* and the like are known once the
	// listeners are.
	unknown = slices.DeleteFunc(unknown, func(name string) bool {
		return isListenerSecurityKey(name, b.ListenerSecurityProtocolMap) || b.isListenerRateKey(name)
	})
	return b, unknown, nil
}

// resolve returns the key's parsed value from props, or its default.
func (k *brokerKey) resolve(props map[string]string) (value, error) {
	raw, ok := props[k.name]
	if !ok {
		if k.null {
			return value{null: true}, nil
		}
		raw = k.dflt
	}
	return parseChecked(k.name, k.typ, k.check, raw)
}

// IsController reports whether process.roles includes the controller role.
func (b *Broker) IsController() bool { return slices.Contains(b.ProcessRoles, "controller") }

// IsBroker reports whether process.roles includes the broker role.
func (b *Broker) IsBroker() bool { return slices.Contains(b.ProcessRoles, "broker") }

// derive computes the values Kafka derives from several properties, and
// applies the checks of Kafka's KafkaConfig.validateValues that concern
// the properties Gregor knows.
func (b *Broker) derive(vals map[string]value, props map[string]string) error {
	if err := b.deriveIdentity(vals, props); err != nil {
		return err
	}
	if err := b.deriveLog(vals, props); err != nil {
		return err
	}
	if err := b.deriveListeners(vals, props); err != nil {
		return err
	}
	if err := b.checkRelations(props); err != nil {
		return err
	}
	if err := b.checkSockets(vals, props); err != nil {
		return err
	}
	if err := b.deriveSecurity(props); err != nil {
		return err
	}
	if err := b.derivePeerSecurity(props); err != nil {
		return err
	}
	return b.checkConsole(props)
}

// checkConsole refuses http.console.* settings the console could not
// connect with, at start rather than with a console that stays off: a
// listener that is no client listener, a SASL_* listener without a
// complete mechanism, user and password, SASL credentials for a listener
// that takes none, or TLS files for one without TLS.
func (b *Broker) checkConsole(props map[string]string) error {
	saslSet := b.HTTPConsoleSASLMechanism != "" || b.HTTPConsoleSASLUsername != "" || b.HTTPConsoleSASLPassword != ""
	tlsSet := b.HTTPConsoleSSLTruststore != "" || b.HTTPConsoleSSLKeystore != ""
	name := b.HTTPConsoleListener
	if name == "" {
		if saslSet || tlsSet {
			return invalid("http.console.listener", "", "the console's credentials (http.console.sasl.*, http.console.ssl.*) need the listener they are for")
		}
		return nil
	}
	proto, ok := b.ListenerSecurityProtocolMap[name]
	client := ok && !slices.Contains(b.ControllerListenerNames, name) && slices.ContainsFunc(b.Listeners, func(l Listener) bool { return l.Name == name })
	if !client {
		return invalid("http.console.listener", props["http.console.listener"], "no client listener of this node has that name")
	}
	if strings.HasPrefix(proto, "SASL_") {
		if b.HTTPConsoleSASLMechanism == "" || b.HTTPConsoleSASLUsername == "" || b.HTTPConsoleSASLPassword == "" {
			return invalid("http.console.listener", props["http.console.listener"],
				"listener %s is %s: the console needs http.console.sasl.mechanism, http.console.sasl.username and http.console.sasl.password", name, proto)
		}
	} else if saslSet {
		return invalid("http.console.sasl.mechanism", props["http.console.sasl.mechanism"], "listener %s is %s, which takes no SASL", name, proto)
	}
	if tlsSet && proto != "SSL" && proto != "SASL_SSL" {
		return invalid("http.console.ssl.truststore.location", props["http.console.ssl.truststore.location"], "listener %s is %s, which has no TLS", name, proto)
	}
	return nil
}

func (b *Broker) deriveIdentity(vals map[string]value, props map[string]string) error {
	nodeID, brokerID := vals["node.id"].i, vals["broker.id"].i
	_, nodeSet := props["node.id"]
	_, brokerSet := props["broker.id"]
	switch {
	case nodeSet && brokerSet && nodeID != brokerID:
		return invalid("broker.id", b.rawOrDefault(props, "broker.id"), "node.id (%d) and broker.id must be equal", nodeID)
	case brokerSet && !nodeSet:
		nodeID = brokerID // broker.id is node.id's former name
	}
	if nodeID < 0 {
		return invalid("node.id", fmt.Sprint(nodeID), "node.id is required and must be at least 0")
	}
	b.NodeID = int32(nodeID)

	voterList := vals["controller.quorum.voters"].list
	_, votersSet := props["controller.quorum.voters"]
	if _, bootSet := props["controller.quorum.bootstrap.servers"]; bootSet && !votersSet {
		// Gregor's default voter is for the zero-config node; a config
		// that names bootstrap servers describes a dynamic quorum.
		voterList = nil
	}
	voters, err := parseVoters(voterList)
	if err != nil {
		return invalid("controller.quorum.voters", b.rawOrDefault(props, "controller.quorum.voters"), "%v", err)
	}
	b.ControllerQuorumVoters = voters
	for _, s := range b.ControllerQuorumBootstrapServers {
		if _, _, err := parseHostPort(s); err != nil {
			return invalid("controller.quorum.bootstrap.servers", s, "%v", err)
		}
	}
	if len(voters) == 0 && len(b.ControllerQuorumBootstrapServers) == 0 {
		return invalid("controller.quorum.voters", "", "either controller.quorum.voters or controller.quorum.bootstrap.servers must name the controllers")
	}
	if b.IsController() {
		if _, ok := voters[b.NodeID]; len(voters) > 0 && !ok {
			return invalid("controller.quorum.voters", b.rawOrDefault(props, "controller.quorum.voters"),
				"when process.roles contains controller, node id %d must be one of the voters", b.NodeID)
		}
	} else if _, ok := voters[b.NodeID]; ok {
		return invalid("controller.quorum.voters", b.rawOrDefault(props, "controller.quorum.voters"),
			"when process.roles is just broker, node id %d must not be one of the voters", b.NodeID)
	}
	if id := b.ClusterID; id != "" {
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 {
			return invalid("cluster.id", id, "a cluster id is 16 bytes in URL-safe base64 without padding (22 characters)")
		}
	}
	return nil
}

func (b *Broker) deriveLog(vals map[string]value, props map[string]string) error {
	b.LogDirs = vals["log.dir"].list
	if v := vals["log.dirs"]; !v.null {
		b.LogDirs = v.list
	}
	if len(b.LogDirs) == 0 {
		return invalid("log.dirs", b.rawOrDefault(props, "log.dirs"), "at least one log directory must be given in log.dirs or log.dir")
	}
	// Empty stands for the first log dir, resolved when it is used
	// (MetadataDir), so that code changing LogDirs moves it too.
	b.MetadataLogDir = ""
	if v := vals["metadata.log.dir"]; !v.null && v.s != "" {
		b.MetadataLogDir = v.s
	}

	const hour, minute = 60 * 60 * 1000, 60 * 1000
	b.LogRollMs = vals["log.roll.hours"].i * hour
	if v := vals["log.roll.ms"]; !v.null {
		b.LogRollMs = v.i
		if v.i < 1 {
			return invalid("log.roll.ms", b.rawOrDefault(props, "log.roll.ms"), "Value must be at least 1")
		}
	}
	b.LogRollJitterMs = vals["log.roll.jitter.hours"].i * hour
	if v := vals["log.roll.jitter.ms"]; !v.null {
		b.LogRollJitterMs = v.i
		if v.i < 0 {
			return invalid("log.roll.jitter.ms", b.rawOrDefault(props, "log.roll.jitter.ms"), "Value must be at least 0")
		}
	}

	// Kafka's precedence: .ms over .minutes over .hours; any negative
	// value means forever (-1); zero is refused.
	name := "log.retention.hours"
	ms := vals[name].i * hour
	if v := vals["log.retention.minutes"]; !v.null {
		name, ms = "log.retention.minutes", v.i*minute
	}
	if v := vals["log.retention.ms"]; !v.null {
		name, ms = "log.retention.ms", v.i
	}
	if ms < 0 {
		ms = -1
	}
	if ms == 0 {
		return invalid(name, props[name], "retention must be unlimited (-1) or at least 1 ms")
	}
	b.LogRetentionMs = ms
	return nil
}

// checkRelations applies Kafka's checks between properties.
func (b *Broker) checkRelations(props map[string]string) error {
	if b.ReplicaFetchWaitMaxMs > b.ReplicaSocketTimeoutMs {
		return invalid("replica.fetch.wait.max.ms", b.rawOrDefault(props, "replica.fetch.wait.max.ms"),
			"must not exceed replica.socket.timeout.ms (%d), to prevent needless socket timeouts", b.ReplicaSocketTimeoutMs)
	}
	if int64(b.ReplicaFetchWaitMaxMs) > b.ReplicaLagTimeMaxMs {
		return invalid("replica.fetch.wait.max.ms", b.rawOrDefault(props, "replica.fetch.wait.max.ms"),
			"must not exceed replica.lag.time.max.ms (%d), to prevent frequent ISR changes", b.ReplicaLagTimeMaxMs)
	}
	if b.LogCleanerThreads > 0 && b.LogCleanerDedupeBufferSize/int64(b.LogCleanerThreads) <= 1<<20 {
		return invalid("log.cleaner.dedupe.buffer.size", b.rawOrDefault(props, "log.cleaner.dedupe.buffer.size"),
			"must be more than 1 MiB per cleaner thread")
	}
	if b.GroupMinSessionTimeoutMs > b.GroupMaxSessionTimeoutMs {
		return invalid("group.min.session.timeout.ms", b.rawOrDefault(props, "group.min.session.timeout.ms"),
			"must not exceed group.max.session.timeout.ms (%d)", b.GroupMaxSessionTimeoutMs)
	}
	if !slices.Contains(b.GroupCoordinatorRebalanceProtocols, "classic") {
		return invalid("group.coordinator.rebalance.protocols", b.rawOrDefault(props, "group.coordinator.rebalance.protocols"),
			"the classic protocol must be enabled")
	}
	for _, c := range []struct {
		name, minName, maxName string
		v, lo, hi              int32
	}{
		{"group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
			b.GroupConsumerSessionTimeoutMs, b.GroupConsumerMinSessionTimeoutMs, b.GroupConsumerMaxSessionTimeoutMs},
		{"group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
			b.GroupConsumerHeartbeatIntervalMs, b.GroupConsumerMinHeartbeatIntervalMs, b.GroupConsumerMaxHeartbeatIntervalMs},
		{"group.consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms",
			b.GroupConsumerAssignmentIntervalMs, b.GroupConsumerMinAssignmentIntervalMs, b.GroupConsumerMaxAssignmentIntervalMs},
		{"group.streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms",
			b.GroupStreamsSessionTimeoutMs, b.GroupStreamsMinSessionTimeoutMs, b.GroupStreamsMaxSessionTimeoutMs},
		{"group.streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
			b.GroupStreamsHeartbeatIntervalMs, b.GroupStreamsMinHeartbeatIntervalMs, b.GroupStreamsMaxHeartbeatIntervalMs},
		{"group.streams.num.standby.replicas", "", "group.streams.max.standby.replicas",
			b.GroupStreamsNumStandbyReplicas, 0, b.GroupStreamsMaxStandbyReplicas},
		{"group.streams.assignment.interval.ms", "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms",
			b.GroupStreamsAssignmentIntervalMs, b.GroupStreamsMinAssignmentIntervalMs, b.GroupStreamsMaxAssignmentIntervalMs},
		{"group.share.assignment.interval.ms", "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms",
			b.GroupShareAssignmentIntervalMs, b.GroupShareMinAssignmentIntervalMs, b.GroupShareMaxAssignmentIntervalMs},
	} {
		if c.lo > c.hi {
			return invalid(c.minName, props[c.minName], "must not exceed %s (%d)", c.maxName, c.hi)
		}
		if c.v < c.lo || c.v > c.hi {
			return invalid(c.name, props[c.name], "must be between %s (%d) and %s (%d)", c.minName, c.lo, c.maxName, c.hi)
		}
	}
	if b.GroupStreamsTaskOffsetIntervalMs < b.GroupStreamsMinTaskOffsetIntervalMs {
		return invalid("group.streams.task.offset.interval.ms", b.rawOrDefault(props, "group.streams.task.offset.interval.ms"),
			"must be greater than or equal to group.streams.min.task.offset.interval.ms (%d)", b.GroupStreamsMinTaskOffsetIntervalMs)
	}
	if b.GroupStreamsHeartbeatIntervalMs >= b.GroupStreamsSessionTimeoutMs {
		return invalid("group.streams.heartbeat.interval.ms", b.rawOrDefault(props, "group.streams.heartbeat.interval.ms"),
			"must be less than group.streams.session.timeout.ms (%d)", b.GroupStreamsSessionTimeoutMs)
	}
	if b.GroupConsumerHeartbeatIntervalMs >= b.GroupConsumerSessionTimeoutMs {
		return invalid("group.consumer.heartbeat.interval.ms", b.rawOrDefault(props, "group.consumer.heartbeat.interval.ms"),
			"must be less than group.consumer.session.timeout.ms (%d)", b.GroupConsumerSessionTimeoutMs)
	}
	return nil
}

// listenerNamed returns the listener with the given name.
func listenerNamed(ls []Listener, name string) (Listener, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

func (b *Broker) deriveListeners(vals map[string]value, props map[string]string) error {
	// controller.listener.names: Kafka compares these with the upper-cased
	// listener names as written; Gregor trims and upper-cases them too.
	var ctrl []string
	for _, n := range strings.Split(vals["controller.listener.names"].s, ",") {
		if n = strings.ToUpper(javaTrim(n)); n != "" {
			ctrl = append(ctrl, n)
		}
	}
	b.ControllerListenerNames = ctrl

	spm, err := b.securityProtocolMap(vals, props)
	if err != nil {
		return err
	}
	b.ListenerSecurityProtocolMap = spm

	listeners, err := ParseListeners(vals["listeners"].s)
	if err == nil {
		err = checkDistinct(listeners)
	}
	if err != nil {
		return invalid("listeners", vals["listeners"].s, "%v", err)
	}
	for _, l := range listeners {
		if _, ok := spm[l.Name]; !ok {
			return invalid("listeners", vals["listeners"].s, "no security protocol defined for listener %s in listener.security.protocol.map", l.Name)
		}
	}
	b.Listeners = listeners

	advertised := listeners
	if v := vals["advertised.listeners"]; !v.null {
		if advertised, err = ParseListeners(v.s); err != nil {
			return invalid("advertised.listeners", v.s, "%v", err)
		}
		for _, l := range advertised {
			if _, ok := spm[l.Name]; !ok {
				return invalid("advertised.listeners", v.s, "no security protocol defined for listener %s in listener.security.protocol.map", l.Name)
			}
		}
	}
	b.AdvertisedListeners = nil
	for _, l := range advertised {
		if !slices.Contains(ctrl, l.Name) {
			b.AdvertisedListeners = append(b.AdvertisedListeners, l)
		}
	}
	b.AdvertisedControllerListeners = nil
	for _, n := range ctrl {
		if l, ok := listenerNamed(advertised, n); ok {
			b.AdvertisedControllerListeners = append(b.AdvertisedControllerListeners, l)
		} else if l, ok := listenerNamed(listeners, n); ok {
			b.AdvertisedControllerListeners = append(b.AdvertisedControllerListeners, l)
		}
	}

	ibl, err := b.interBrokerListener(vals, props)
	if err != nil {
		return err
	}
	b.InterBrokerListenerName = ibl
	return b.checkListeners(props)
}

// securityProtocolMap parses listener.security.protocol.map. When it is
// not set, controller listeners are PLAINTEXT as long as no SSL or SASL
// listener is in use, as in Kafka's effectiveListenerSecurityProtocolMap.
func (b *Broker) securityProtocolMap(vals map[string]value, props map[string]string) (map[string]string, error) {
	raw := vals["listener.security.protocol.map"].s
	spm := map[string]string{}
	for _, e := range splitList(raw) {
		name, proto, ok := strings.Cut(e, ":")
		if !ok || strings.Contains(proto, ":") {
			return nil, invalid("listener.security.protocol.map", raw, "entry %q is not NAME:PROTOCOL", e)
		}
		name, proto = strings.ToUpper(javaTrim(name)), strings.ToUpper(javaTrim(proto))
		if !slices.Contains(securityProtocols, proto) {
			return nil, invalid("listener.security.protocol.map", raw, "invalid security protocol %s; valid ones are %s", proto, strings.Join(securityProtocols, ", "))
		}
		spm[name] = proto
	}
	if _, set := props["listener.security.protocol.map"]; set {
		return spm, nil
	}
	secure := func(n string) bool { return n == "SSL" || n == "SASL_SSL" || n == "SASL_PLAINTEXT" }
	if slices.ContainsFunc(b.ControllerListenerNames, secure) {
		return spm, nil
	}
	for _, e := range splitList(vals["listeners"].s) {
		if name, _, ok := strings.Cut(e, "://"); ok && secure(strings.ToUpper(name)) {
			return spm, nil
		}
	}
	for _, n := range b.ControllerListenerNames {
		if n != "PLAINTEXT" {
			spm[n] = "PLAINTEXT"
		}
	}
	return spm, nil
}

func (b *Broker) interBrokerListener(vals map[string]value, props map[string]string) (string, error) {
	if v := vals["inter.broker.listener.name"]; !v.null {
		if _, both := props["security.inter.broker.protocol"]; both {
			return "", invalid("inter.broker.listener.name", v.s, "only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
		}
		name := strings.ToUpper(v.s)
		if _, ok := b.ListenerSecurityProtocolMap[name]; !ok {
			return "", invalid("inter.broker.listener.name", v.s, "listener %s is not in listener.security.protocol.map", name)
		}
		return name, nil
	}
	proto := strings.ToUpper(vals["security.inter.broker.protocol"].s)
	if !slices.Contains(securityProtocols, proto) {
		return "", invalid("security.inter.broker.protocol", vals["security.inter.broker.protocol"].s,
			"String must be one of: %s", strings.Join(securityProtocols, ", "))
	}
	return proto, nil
}

// checkListeners applies Kafka's rules tying listeners to process.roles.
func (b *Broker) checkListeners(props map[string]string) error {
	lraw := b.rawOrDefault(props, "listeners")
	ctrl := strings.Join(b.ControllerListenerNames, ",")
	if b.IsController() {
		for _, n := range b.ControllerListenerNames {
			if _, ok := listenerNamed(b.Listeners, n); !ok {
				return invalid("controller.listener.names", ctrl, "controller listener %s must appear in listeners when process.roles contains controller", n)
			}
		}
		if len(b.AdvertisedControllerListeners) == 0 {
			return invalid("controller.listener.names", ctrl, "must name at least one listener of listeners when process.roles contains controller")
		}
		if !b.IsBroker() && len(b.AdvertisedControllerListeners) != len(b.Listeners) {
			return invalid("listeners", lraw, "must only contain controller listeners (controller.listener.names) when process.roles is just controller")
		}
	} else {
		if len(b.ControllerListenerNames) == 0 {
			return invalid("controller.listener.names", ctrl, "must name at least one listener when process.roles is just broker")
		}
		for _, n := range b.ControllerListenerNames {
			if _, ok := listenerNamed(b.Listeners, n); ok {
				return invalid("listeners", lraw, "must not contain the controller listener %s when process.roles is just broker", n)
			}
			if _, ok := b.ListenerSecurityProtocolMap[n]; !ok {
				return invalid("controller.listener.names", ctrl, "controller listener %s is not in listener.security.protocol.map", n)
			}
		}
	}
	if b.IsBroker() {
		if len(b.AdvertisedListeners) == 0 {
			return invalid("listeners", lraw, "there must be at least one broker listener besides the controller listeners")
		}
		if _, ok := listenerNamed(b.AdvertisedListeners, b.InterBrokerListenerName); !ok {
			return invalid("inter.broker.listener.name", b.InterBrokerListenerName, "must be the name of an advertised broker listener")
		}
		for _, l := range b.AdvertisedListeners {
			if _, ok := listenerNamed(b.Listeners, l.Name); !ok {
				return invalid("advertised.listeners", b.rawOrDefault(props, "advertised.listeners"), "listener %s is not in listeners", l.Name)
			}
		}
	}
	for _, l := range append(slices.Clone(b.AdvertisedListeners), b.AdvertisedControllerListeners...) {
		if l.Host == "0.0.0.0" {
			name := "advertised.listeners"
			if _, set := props[name]; !set {
				name = "listeners"
			}
			return invalid(name, l.String(), "cannot advertise the unroutable address 0.0.0.0; set advertised.listeners to a routable address")
		}
	}
	return nil
}

// rawOrDefault is the property's text as given, else its default.
func (b *Broker) rawOrDefault(props map[string]string, name string) string {
	if v, ok := props[name]; ok {
		return v
	}
	return brokerKeyIndex[name].dflt
}

// DevProperties returns the properties Kafka's shipped
// config/server.properties sets for a single development node besides its
// KRaft basics: the internal topics get one replica, since one broker can
// never satisfy Kafka's default of three. `gregor serve` without --config
// applies them, as running Kafka with its sample file does.
func DevProperties() map[string]string {
	return map[string]string{
		"offsets.topic.replication.factor":                 "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"http.listener":                                    "localhost:9644",
	}
}

// MetadataDir is where the metadata log lives: metadata.log.dir when set,
// else the first log dir, as in Kafka.
func (b *Broker) MetadataDir() string {
	if b.MetadataLogDir != "" {
		return b.MetadataLogDir
	}
	if len(b.LogDirs) == 0 {
		return ""
	}
	return b.LogDirs[0]
}
