package config

import (
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mustParse parses props and fails the test on an error.
func mustParse(t *testing.T, props map[string]string) *Broker {
	t.Helper()
	b, _, err := Parse(props)
	if err != nil {
		t.Fatalf("Parse(%v): %v", props, err)
	}
	return b
}

func TestDefaultsMatchKafka(t *testing.T) {
	b := Default()
	const week = 7 * 24 * 60 * 60 * 1000
	tests := []struct {
		name      string
		got, want any
	}{
		{"process.roles", b.ProcessRoles, []string{"broker", "controller"}},
		{"node.id", b.NodeID, int32(1)},
		{"controller.quorum.voters", b.ControllerQuorumVoters, map[int32]string{1: "localhost:9093"}},
		{"controller.listener.names", b.ControllerListenerNames, []string{"CONTROLLER"}},
		{"listeners", b.Listeners, []Listener{{"PLAINTEXT", "localhost", 9092}, {"CONTROLLER", "localhost", 9093}}},
		{"advertised listeners", b.AdvertisedListeners, []Listener{{"PLAINTEXT", "localhost", 9092}}},
		{"advertised controller listeners", b.AdvertisedControllerListeners, []Listener{{"CONTROLLER", "localhost", 9093}}},
		{"inter.broker.listener.name", b.InterBrokerListenerName, "PLAINTEXT"},
		{"listener.security.protocol.map", b.ListenerSecurityProtocolMap, map[string]string{
			"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "CONTROLLER": "PLAINTEXT"}},
		{"log.dirs", b.LogDirs, []string{"./data"}},
		{"metadata.log.dir", b.MetadataDir(), "./data"},
		{"num.partitions", b.NumPartitions, int32(1)},
		{"default.replication.factor", b.DefaultReplicationFactor, int16(1)},
		{"auto.create.topics.enable", b.AutoCreateTopicsEnable, true},
		{"delete.topic.enable", b.DeleteTopicEnable, true},
		{"message.max.bytes", b.MessageMaxBytes, int32(1048588)},
		{"socket.request.max.bytes", b.SocketRequestMaxBytes, int32(104857600)},
		{"log.segment.bytes", b.LogSegmentBytes, int64(1 << 30)},
		{"log.roll.ms", b.LogRollMs, int64(week)},
		{"log.roll.jitter.ms", b.LogRollJitterMs, int64(0)},
		{"log.index.interval.bytes", b.LogIndexIntervalBytes, int32(4096)},
		{"log.index.size.max.bytes", b.LogIndexSizeMaxBytes, int32(10 << 20)},
		{"log.retention.ms", b.LogRetentionMs, int64(week)},
		{"log.retention.bytes", b.LogRetentionBytes, int64(-1)},
		{"log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs, int64(300000)},
		{"log.flush.interval.messages", b.LogFlushIntervalMessages, int64(math.MaxInt64)},
		{"log.flush.interval.ms", b.LogFlushIntervalMs, (*int64)(nil)},
		{"log.flush.scheduler.interval.ms", b.LogFlushSchedulerIntervalMs, int64(math.MaxInt64)},
		{"log.flush.offset.checkpoint.interval.ms", b.LogFlushOffsetCheckpointIntervalMs, int64(60000)},
		{"log.message.timestamp.type", b.LogMessageTimestampType, "CreateTime"},
		{"log.message.timestamp.before.max.ms", b.LogMessageTimestampBeforeMaxMs, int64(math.MaxInt64)},
		{"log.message.timestamp.after.max.ms", b.LogMessageTimestampAfterMaxMs, int64(3600000)},
		{"log.cleanup.policy", b.LogCleanupPolicy, []string{"delete"}},
		{"log.cleaner.min.cleanable.ratio", b.LogCleanerMinCleanableRatio, 0.5},
		{"log.cleaner.io.max.bytes.per.second", b.LogCleanerIOMaxBytesPerSecond, math.MaxFloat64},
		{"num.recovery.threads.per.data.dir", b.NumRecoveryThreadsPerDataDir, int32(2)},
		{"compression.type", b.CompressionType, "producer"},
		{"compression.gzip.level", b.CompressionGzipLevel, int32(-1)},
		{"compression.lz4.level", b.CompressionLz4Level, int32(9)},
		{"compression.zstd.level", b.CompressionZstdLevel, int32(3)},
		{"min.insync.replicas", b.MinInsyncReplicas, int32(1)},
		{"unclean.leader.election.enable", b.UncleanLeaderElectionEnable, false},
		{"replica.lag.time.max.ms", b.ReplicaLagTimeMaxMs, int64(30000)},
		{"replica.fetch.max.bytes", b.ReplicaFetchMaxBytes, int32(1 << 20)},
		{"fetch.max.bytes", b.FetchMaxBytes, int32(55 << 20)},
		{"offsets.topic.num.partitions", b.OffsetsTopicNumPartitions, int32(50)},
		{"offsets.topic.replication.factor", b.OffsetsTopicReplicationFactor, int16(3)},
		{"offsets.topic.segment.bytes", b.OffsetsTopicSegmentBytes, int32(100 << 20)},
		{"offsets.retention.minutes", b.OffsetsRetentionMinutes, int32(7 * 24 * 60)},
		{"group.initial.rebalance.delay.ms", b.GroupInitialRebalanceDelayMs, int32(3000)},
		{"group.min.session.timeout.ms", b.GroupMinSessionTimeoutMs, int32(6000)},
		{"group.max.session.timeout.ms", b.GroupMaxSessionTimeoutMs, int32(1800000)},
		{"group.consumer.session.timeout.ms", b.GroupConsumerSessionTimeoutMs, int32(45000)},
		{"transaction.state.log.num.partitions", b.TransactionStateLogNumPartitions, int32(50)},
		{"transaction.state.log.replication.factor", b.TransactionStateLogReplicationFactor, int16(3)},
		{"transaction.state.log.min.isr", b.TransactionStateLogMinISR, int32(2)},
		{"transaction.max.timeout.ms", b.TransactionMaxTimeoutMs, int32(900000)},
		{"transactional.id.expiration.ms", b.TransactionalIDExpirationMs, int32(604800000)},
		{"producer.id.expiration.ms", b.ProducerIDExpirationMs, int32(86400000)},
		{"broker.session.timeout.ms", b.BrokerSessionTimeoutMs, int32(9000)},
		{"broker.heartbeat.interval.ms", b.BrokerHeartbeatIntervalMs, int32(2000)},
	}
	for _, tt := range tests {
		if !equal(tt.got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	if len(b.Props) != 0 {
		t.Errorf("Default().Props = %v, want empty", b.Props)
	}
}

// equal compares the value kinds the default table uses.
func equal(a, b any) bool {
	switch a := a.(type) {
	case []string:
		return slices.Equal(a, b.([]string))
	case []Listener:
		return slices.Equal(a, b.([]Listener))
	case map[string]string:
		return maps.Equal(a, b.(map[string]string))
	case map[int32]string:
		return maps.Equal(a, b.(map[int32]string))
	case *int64:
		bp := b.(*int64)
		return (a == nil) == (bp == nil) && (a == nil || *a == *bp)
	}
	return a == b
}

func TestEveryDefaultIsValid(t *testing.T) {
	for _, k := range brokerKeys {
		if k.null {
			continue
		}
		if _, err := parseChecked(k.name, k.typ, k.check, k.dflt); err != nil {
			t.Errorf("broker default of %s: %v", k.name, err)
		}
	}
	for _, k := range topicKeys {
		if k.null {
			continue
		}
		if _, err := parseChecked(k.name, k.typ, k.check, k.dflt); err != nil {
			t.Errorf("topic default of %s: %v", k.name, err)
		}
		for _, s := range k.synonyms {
			if _, ok := brokerKeyIndex[s]; !ok {
				t.Errorf("topic config %s: synonym %s is not a broker config", k.name, s)
			}
		}
		if (k.fromBroker == nil) != (len(k.synonyms) == 0) {
			t.Errorf("topic config %s: has synonyms %v but fromBroker set=%v", k.name, k.synonyms, k.fromBroker != nil)
		}
	}
}

func TestRetentionPrecedence(t *testing.T) {
	const hour, minute = 3600000, 60000
	tests := []struct {
		props map[string]string
		want  int64
	}{
		{nil, 168 * hour},
		{map[string]string{"log.retention.hours": "24"}, 24 * hour},
		{map[string]string{"log.retention.hours": "24", "log.retention.minutes": "30"}, 30 * minute},
		{map[string]string{"log.retention.hours": "24", "log.retention.minutes": "30", "log.retention.ms": "1234"}, 1234},
		{map[string]string{"log.retention.minutes": "30", "log.retention.ms": "1234"}, 1234},
		{map[string]string{"log.retention.ms": "-1"}, -1},
		{map[string]string{"log.retention.ms": "-5"}, -1},
		{map[string]string{"log.retention.hours": "-1"}, -1},
		{map[string]string{"log.retention.hours": "0", "log.retention.ms": "10"}, 10},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.props).LogRetentionMs; got != tt.want {
			t.Errorf("Parse(%v).LogRetentionMs = %d, want %d", tt.props, got, tt.want)
		}
		topic := mustParse(t, tt.props).TopicConfig(nil)
		if topic.RetentionMs != tt.want {
			t.Errorf("Parse(%v).TopicConfig(nil).RetentionMs = %d, want %d", tt.props, topic.RetentionMs, tt.want)
		}
	}
	for _, bad := range []map[string]string{
		{"log.retention.ms": "0"},
		{"log.retention.minutes": "0"},
		{"log.retention.hours": "0"},
	} {
		_, _, err := Parse(bad)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("Parse(%v) = %v, want a *ConfigError", bad, err)
			continue
		}
		for name := range bad {
			if ce.Name != name {
				t.Errorf("Parse(%v): error names %s, want %s", bad, ce.Name, name)
			}
		}
	}
}

func TestRollAndFlushPrecedence(t *testing.T) {
	b := mustParse(t, map[string]string{"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
	if b.LogRollMs != 2*3600000 || b.LogRollJitterMs != 3600000 {
		t.Errorf("roll = %d, jitter = %d", b.LogRollMs, b.LogRollJitterMs)
	}
	b = mustParse(t, map[string]string{"log.roll.hours": "2", "log.roll.ms": "5000", "log.roll.jitter.ms": "7"})
	if b.LogRollMs != 5000 || b.LogRollJitterMs != 7 {
		t.Errorf("roll = %d, jitter = %d", b.LogRollMs, b.LogRollJitterMs)
	}
	if tc := b.TopicConfig(nil); tc.SegmentMs != 5000 || tc.SegmentJitterMs != 7 {
		t.Errorf("topic segment.ms = %d, segment.jitter.ms = %d", tc.SegmentMs, tc.SegmentJitterMs)
	}
	b = mustParse(t, map[string]string{"log.flush.scheduler.interval.ms": "3000"})
	if b.LogFlushIntervalMs != nil || b.TopicConfig(nil).FlushMs != 3000 {
		t.Errorf("flush interval %v, topic flush.ms %d; want nil and 3000", b.LogFlushIntervalMs, b.TopicConfig(nil).FlushMs)
	}
	b = mustParse(t, map[string]string{"log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "500"})
	if b.LogFlushIntervalMs == nil || *b.LogFlushIntervalMs != 500 || b.TopicConfig(nil).FlushMs != 500 {
		t.Errorf("flush interval %v, topic flush.ms %d; want 500", b.LogFlushIntervalMs, b.TopicConfig(nil).FlushMs)
	}
}

func TestLogDirsPrecedence(t *testing.T) {
	tests := []struct {
		props    map[string]string
		want     []string
		metadata string
	}{
		{nil, []string{"./data"}, "./data"},
		{map[string]string{"log.dir": "/a"}, []string{"/a"}, "/a"},
		{map[string]string{"log.dir": "/a", "log.dirs": "/b, /c"}, []string{"/b", "/c"}, "/b"},
		{map[string]string{"log.dirs": "/b,/c", "metadata.log.dir": "/m"}, []string{"/b", "/c"}, "/m"},
	}
	for _, tt := range tests {
		b := mustParse(t, tt.props)
		if !slices.Equal(b.LogDirs, tt.want) || b.MetadataDir() != tt.metadata {
			t.Errorf("Parse(%v): LogDirs %q, MetadataDir %q; want %q, %q", tt.props, b.LogDirs, b.MetadataDir(), tt.want, tt.metadata)
		}
	}
	// Unset, it follows LogDirs changed after Parse, as tests do.
	b := mustParse(t, nil)
	b.LogDirs = []string{"/x", "/y"}
	if got := b.MetadataDir(); got != "/x" {
		t.Errorf("MetadataDir after changing LogDirs: %q, want /x", got)
	}
}

func TestParseErrorsNameProperty(t *testing.T) {
	tests := []struct {
		props map[string]string
		name  string // the property the error must name
		value string // the value it must quote
	}{
		{map[string]string{"num.partitions": "abc"}, "num.partitions", "abc"},
		{map[string]string{"num.partitions": "0"}, "num.partitions", "0"},
		{map[string]string{"num.partitions": "2147483648"}, "num.partitions", "2147483648"},
		{map[string]string{"auto.create.topics.enable": "yes"}, "auto.create.topics.enable", "yes"},
		{map[string]string{"log.segment.bytes": "1000"}, "log.segment.bytes", "1000"},
		{map[string]string{"log.cleanup.policy": "delete,erase"}, "log.cleanup.policy", "erase"},
		{map[string]string{"log.cleanup.policy": "delete,delete"}, "log.cleanup.policy", "delete,delete"},
		{map[string]string{"compression.type": "brotli"}, "compression.type", "brotli"},
		{map[string]string{"compression.gzip.level": "0"}, "compression.gzip.level", "0"},
		{map[string]string{"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type", "createtime"},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio", "1.5"},
		{map[string]string{"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor", "40000"},
		{map[string]string{"process.roles": "broker,zookeeper"}, "process.roles", "zookeeper"},
		{map[string]string{"process.roles": ""}, "process.roles", ""},
		{map[string]string{"log.dirs": ""}, "log.dirs", ""},
		{map[string]string{"log.dirs": "/a,,/b"}, "log.dirs", "/a,,/b"},
		{map[string]string{"listeners": "PLAINTEXT:9092"}, "listeners", "PLAINTEXT:9092"},
		{map[string]string{"listeners": "PLAINTEXT://:9092,CONTROLLER://:9092"}, "listeners", "PLAINTEXT://:9092,CONTROLLER://:9092"},
		{map[string]string{"listeners": "PLAINTEXT://:9092,FOO://:9094,CONTROLLER://:9093"}, "listeners", "PLAINTEXT://:9092,FOO://:9094,CONTROLLER://:9093"},
		{map[string]string{"controller.quorum.voters": "1@localhost"}, "controller.quorum.voters", "1@localhost"},
		{map[string]string{"controller.quorum.voters": "2@localhost:9093"}, "controller.quorum.voters", "2@localhost:9093"},
		{map[string]string{"node.id": "-1"}, "node.id", "-1"},
		{map[string]string{"node.id": "1", "broker.id": "2"}, "broker.id", "2"},
		{map[string]string{"cluster.id": "not-a-uuid"}, "cluster.id", "not-a-uuid"},
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:TLS"}, "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:TLS"},
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "listeners", "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"},
		{map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "inter.broker.listener.name", "PLAINTEXT"},
		{map[string]string{"inter.broker.listener.name": "SSL"}, "inter.broker.listener.name", "SSL"},
		{map[string]string{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "PLAINTEXT://0.0.0.0:9092"},
		{map[string]string{"listeners": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093"}, "listeners", "PLAINTEXT://0.0.0.0:9092"},
		{map[string]string{"advertised.listeners": "EXTERNAL://h:1", "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "inter.broker.listener.name", "PLAINTEXT"},
		{map[string]string{"advertised.listeners": "PLAINTEXT://h:1,EXTERNAL://h:2", "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "advertised.listeners", "PLAINTEXT://h:1,EXTERNAL://h:2"},
		{map[string]string{"controller.listener.names": "OTHER"}, "listeners", ""},
		{map[string]string{"controller.listener.names": "OTHER", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "controller.listener.names", "OTHER"},
		{map[string]string{"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms", "40000"},
		{map[string]string{"group.coordinator.rebalance.protocols": "consumer"}, "group.coordinator.rebalance.protocols", "consumer"},
		{map[string]string{"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms", "20000"},
		{map[string]string{"log.roll.ms": "0"}, "log.roll.ms", "0"},
		{map[string]string{"log.roll.hours": "0"}, "log.roll.hours", "0"},
	}
	for _, tt := range tests {
		b, _, err := Parse(tt.props)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("Parse(%v) = %v, %v; want a *ConfigError", tt.props, b, err)
			continue
		}
		if ce.Name != tt.name || (tt.value != "" && ce.Value != tt.value) {
			t.Errorf("Parse(%v): error names %s=%q, want %s=%q (%v)", tt.props, ce.Name, ce.Value, tt.name, tt.value, err)
		}
		if !strings.Contains(err.Error(), tt.name) {
			t.Errorf("Parse(%v): message %q does not name %s", tt.props, err, tt.name)
		}
	}
}

func TestParseValueSyntax(t *testing.T) {
	b := mustParse(t, map[string]string{
		"num.partitions":            "  +3 ",
		"auto.create.topics.enable": "FALSE",
		"log.cleanup.policy":        " compact , delete ",
		"log.retention.bytes":       "-1",
		"compression.type":          " zstd\t",
	})
	if b.NumPartitions != 3 || b.AutoCreateTopicsEnable || !slices.Equal(b.LogCleanupPolicy, []string{"compact", "delete"}) || b.CompressionType != "zstd" {
		t.Fatalf("got partitions %d, auto-create %v, cleanup %q, compression %q", b.NumPartitions, b.AutoCreateTopicsEnable, b.LogCleanupPolicy, b.CompressionType)
	}
	if b := mustParse(t, map[string]string{"log.cleanup.policy": ""}); len(b.LogCleanupPolicy) != 0 {
		t.Fatalf("empty cleanup policy parsed as %q", b.LogCleanupPolicy)
	}
}

func TestUnknownNamesReturned(t *testing.T) {
	_, unknown, err := Parse(map[string]string{
		"num.partitions":                                "3",
		"zookeeper.connect":                             "localhost:2181",
		"sasl.kerberos.service.name":                    "kafka",
		"listener.name.plaintext.ssl.keystore.location": "/x",
		"a.typo.in.a.config.name":                       "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	// A known key behind a listener prefix is known; sasl.kerberos.* is not.
	want := []string{"a.typo.in.a.config.name", "sasl.kerberos.service.name", "zookeeper.connect"}
	if !slices.Equal(unknown, want) {
		t.Fatalf("unknown = %q, want %q", unknown, want)
	}
	// Unknown names are returned even when a known one is bad.
	_, unknown, err = Parse(map[string]string{"num.partitions": "x", "foo": "bar"})
	if err == nil || !slices.Equal(unknown, []string{"foo"}) {
		t.Fatalf("unknown = %q, err = %v", unknown, err)
	}
}

func TestListenerDerivation(t *testing.T) {
	b := mustParse(t, map[string]string{
		"listeners":                      "PLAINTEXT://:9092,CONTROLLER://:9093,INTERNAL://10.0.0.1:9094",
		"advertised.listeners":           "PLAINTEXT://broker1.example.com:9092,INTERNAL://10.0.0.1:9094,CONTROLLER://ctl1:9093",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":     "internal",
	})
	wantAdv := []Listener{{"PLAINTEXT", "broker1.example.com", 9092}, {"INTERNAL", "10.0.0.1", 9094}}
	if !slices.Equal(b.AdvertisedListeners, wantAdv) {
		t.Errorf("AdvertisedListeners = %v, want %v", b.AdvertisedListeners, wantAdv)
	}
	if want := []Listener{{"CONTROLLER", "ctl1", 9093}}; !slices.Equal(b.AdvertisedControllerListeners, want) {
		t.Errorf("AdvertisedControllerListeners = %v, want %v", b.AdvertisedControllerListeners, want)
	}
	if b.InterBrokerListenerName != "INTERNAL" {
		t.Errorf("InterBrokerListenerName = %s", b.InterBrokerListenerName)
	}
	if _, ok := b.ListenerSecurityProtocolMap["SSL"]; ok {
		t.Errorf("an explicit listener.security.protocol.map got default entries: %v", b.ListenerSecurityProtocolMap)
	}
}

func TestProcessRoles(t *testing.T) {
	brokerOnly := map[string]string{
		"process.roles":            "broker",
		"node.id":                  "4",
		"controller.quorum.voters": "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                "PLAINTEXT://:9092",
	}
	b := mustParse(t, brokerOnly)
	if b.IsController() || !b.IsBroker() || len(b.ControllerQuorumVoters) != 3 || len(b.AdvertisedControllerListeners) != 0 {
		t.Errorf("broker only: %+v", b)
	}
	controllerOnly := map[string]string{
		"process.roles":            "controller",
		"node.id":                  "2",
		"controller.quorum.voters": "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                "CONTROLLER://c2:9093",
	}
	b = mustParse(t, controllerOnly)
	if !b.IsController() || b.IsBroker() {
		t.Errorf("controller only: roles %v", b.ProcessRoles)
	}

	bad := []map[string]string{
		with(brokerOnly, "node.id", "1"),                                      // a broker-only node is not a voter
		with(brokerOnly, "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"), // nor listens as controller
		with(controllerOnly, "listeners", "CONTROLLER://:9093,PLAINTEXT://:9092"),
		with(controllerOnly, "node.id", "7"),
	}
	for _, props := range bad {
		if _, _, err := Parse(props); err == nil {
			t.Errorf("Parse(%v): want an error", props)
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	c := maps.Clone(m)
	c[k] = v
	return c
}

func TestQuorumSettings(t *testing.T) {
	// Bootstrap servers without voters: a dynamic quorum, so Gregor's
	// default voter does not apply.
	b := mustParse(t, map[string]string{"node.id": "3", "controller.quorum.bootstrap.servers": "localhost:9093"})
	if len(b.ControllerQuorumVoters) != 0 || !slices.Equal(b.ControllerQuorumBootstrapServers, []string{"localhost:9093"}) {
		t.Errorf("voters %v, bootstrap %v", b.ControllerQuorumVoters, b.ControllerQuorumBootstrapServers)
	}
	if _, _, err := Parse(map[string]string{"controller.quorum.voters": ""}); err == nil {
		t.Error("no voters and no bootstrap servers: want an error")
	}
	if _, _, err := Parse(map[string]string{"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "nohostport"}); err == nil {
		t.Error("bad bootstrap server: want an error")
	}
	if b := mustParse(t, map[string]string{"broker.id": "1"}); b.NodeID != 1 {
		t.Errorf("broker.id alone: NodeID %d", b.NodeID)
	}
	id := "MkU3OEVBNTcwNTJENDM2Qg"
	if b := mustParse(t, map[string]string{"cluster.id": id}); b.ClusterID != id {
		t.Errorf("ClusterID = %q", b.ClusterID)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	file := "# test\nnum.partitions=3\nlog.dirs=" + filepath.Join(dir, "logs") + "\nlog.retention.hours = 1\nmystery=1\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	b, unknown, err := LoadFile(path, map[string]string{"num.partitions": "5", "min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if b.NumPartitions != 5 || b.MinInsyncReplicas != 2 || b.LogRetentionMs != 3600000 || b.LogDirs[0] != filepath.Join(dir, "logs") {
		t.Errorf("partitions %d, min.insync %d, retention %d, dirs %q", b.NumPartitions, b.MinInsyncReplicas, b.LogRetentionMs, b.LogDirs)
	}
	if !slices.Equal(unknown, []string{"mystery"}) {
		t.Errorf("unknown = %q", unknown)
	}
	if b.Props["num.partitions"] != "5" || b.Props["log.retention.hours"] != "1" {
		t.Errorf("Props = %v", b.Props)
	}
	if _, _, err := LoadFile(filepath.Join(dir, "missing.properties"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("num.partitions=-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if _, _, err := LoadFile(path, nil); !errors.As(err, &ce) || ce.Name != "num.partitions" || !strings.Contains(err.Error(), path) {
		t.Errorf("bad file: %v", err)
	}
}

func TestDevProperties(t *testing.T) {
	b := mustParse(t, DevProperties())
	if b.OffsetsTopicReplicationFactor != 1 || b.TransactionStateLogReplicationFactor != 1 || b.TransactionStateLogMinISR != 1 {
		t.Errorf("dev: offsets RF %d, txn RF %d, txn min ISR %d", b.OffsetsTopicReplicationFactor, b.TransactionStateLogReplicationFactor, b.TransactionStateLogMinISR)
	}
	if b.ShareCoordinatorStateTopicRF != 1 || b.ShareCoordinatorStateTopicMinISR != 1 {
		t.Errorf("dev: share state RF %d, min ISR %d", b.ShareCoordinatorStateTopicRF, b.ShareCoordinatorStateTopicMinISR)
	}
}

// TestShareStateMinISR: Kafka's sample server.properties sets
// share.coordinator.state.topic.min.isr, which Gregor used to warn about
// as unknown and ignore.
func TestShareStateMinISR(t *testing.T) {
	if b := mustParse(t, map[string]string{}); b.ShareCoordinatorStateTopicMinISR != 2 {
		t.Errorf("default share.coordinator.state.topic.min.isr = %d, want Kafka's 2", b.ShareCoordinatorStateTopicMinISR)
	}
	if b := mustParse(t, map[string]string{"share.coordinator.state.topic.min.isr": "3"}); b.ShareCoordinatorStateTopicMinISR != 3 {
		t.Errorf("share.coordinator.state.topic.min.isr=3 parsed as %d", b.ShareCoordinatorStateTopicMinISR)
	}
	if _, _, err := Parse(map[string]string{"share.coordinator.state.topic.min.isr": "0"}); err == nil {
		t.Error("share.coordinator.state.topic.min.isr=0 accepted")
	}
}

func TestJavaDouble(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0.5, "0.5"}, {1, "1.0"}, {0, "0.0"}, {0.9, "0.9"}, {1e-4, "1.0E-4"},
		{1.5e7, "1.5E7"}, {math.MaxFloat64, "1.7976931348623157E308"}, {123.25, "123.25"},
	}
	for _, tt := range tests {
		if got := javaDouble(tt.in); got != tt.want {
			t.Errorf("javaDouble(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func BenchmarkParseDefaults(b *testing.B) {
	for b.Loop() {
		if _, _, err := Parse(nil); err != nil {
			b.Fatal(err)
		}
	}
}
