package config

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// topicKey describes one topic-level config as Kafka's LogConfig defines it.
type topicKey struct {
	name  string
	typ   int8
	dflt  string // LogConfig's own default, used when nothing else applies
	null  bool   // the default is null (no value)
	check validator
	// internal configs are accepted but not described, as Kafka's
	// defineInternal configs.
	internal bool
	// synonyms are the broker properties that supply the default, highest
	// priority first (Kafka's ServerTopicConfigSynonyms).
	synonyms []string
	// fromBroker renders the broker-level default from the parsed broker
	// config; nil for configs without a broker synonym.
	fromBroker func(b *Broker) string
	doc        string
	set        func(t *Topic, v value)
}

// Topic is a topic's effective log configuration: each topic config's
// override if it has one, else the broker's default.
type Topic struct {
	CleanupPolicy                        []string
	CompressionType                      string
	CompressionGzipLevel                 int32
	CompressionLz4Level                  int32
	CompressionZstdLevel                 int32
	DeleteRetentionMs                    int64
	FileDeleteDelayMs                    int64
	FlushMessages                        int64
	FlushMs                              int64
	FollowerReplicationThrottledReplicas []string
	IndexIntervalBytes                   int32
	LeaderReplicationThrottledReplicas   []string
	LocalRetentionBytes                  int64
	LocalRetentionMs                     int64
	MaxCompactionLagMs                   int64
	MaxMessageBytes                      int32
	TimestampAfterMaxMs                  int64
	TimestampBeforeMaxMs                 int64
	TimestampType                        string // CreateTime or LogAppendTime
	MinCleanableDirtyRatio               float64
	MinCompactionLagMs                   int64
	MinInsyncReplicas                    int32
	Preallocate                          bool
	RemoteLogCopyDisable                 bool
	RemoteLogDeleteOnDisable             bool
	RemoteStorageEnable                  bool
	RetentionBytes                       int64 // -1: no size limit
	RetentionMs                          int64 // -1: no time limit
	SegmentBytes                         int64
	SegmentIndexBytes                    int32
	SegmentJitterMs                      int64
	SegmentMs                            int64
	UncleanLeaderElectionEnable          bool
}

// Compact reports whether cleanup.policy includes compact.
func (t Topic) Compact() bool { return slices.Contains(t.CleanupPolicy, "compact") }

// Delete reports whether cleanup.policy includes delete.
func (t Topic) Delete() bool { return slices.Contains(t.CleanupPolicy, "delete") }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// throttledRE is one entry of Kafka's ThrottledReplicaListValidator.
var throttledRE = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

func throttledReplicas(name, raw string, v value) error {
	if strings.Join(v.list, "") == "*" {
		return nil
	}
	for _, e := range v.list {
		if !throttledRE.MatchString(e) {
			return invalid(name, raw, "%s must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...", name)
		}
	}
	return nil
}

// topicKeys is every topic config of Kafka 4.2's LogConfig.
// Kafka 4 removed message.format.version, message.downconversion.enable
// and message.timestamp.difference.max.ms; like Kafka, Gregor rejects them.
var topicKeys = []topicKey{
	{name: "cleanup.policy", typ: TypeList, dflt: "delete", check: listOf(false, cleanupPolicies...),
		synonyms:   []string{"log.cleanup.policy"},
		fromBroker: func(b *Broker) string { return strings.Join(b.LogCleanupPolicy, ",") },
		doc:        "The retention policy of old segments: delete (drop segments past the retention time or size), compact (keep the last record of each key), or both.",
		set:        func(t *Topic, v value) { t.CleanupPolicy = v.list }},
	{name: "compression.type", typ: TypeString, dflt: "producer", check: oneOf(compressionTypes...),
		synonyms:   []string{"compression.type"},
		fromBroker: func(b *Broker) string { return b.CompressionType },
		doc:        "The final compression of the topic's batches: gzip, snappy, lz4, zstd, uncompressed, or producer to keep the producer's codec.",
		set:        func(t *Topic, v value) { t.CompressionType = v.s }},
	{name: "compression.gzip.level", typ: TypeInt, dflt: "-1", check: gzipLevel,
		synonyms:   []string{"compression.gzip.level"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.CompressionGzipLevel)) },
		doc:        "The gzip level used when compression.type is gzip.",
		set:        func(t *Topic, v value) { t.CompressionGzipLevel = int32(v.i) }},
	{name: "compression.lz4.level", typ: TypeInt, dflt: "9", check: checkLZ4Level,
		synonyms:   []string{"compression.lz4.level"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.CompressionLz4Level)) },
		doc:        "The lz4 level used when compression.type is lz4.",
		set:        func(t *Topic, v value) { t.CompressionLz4Level = int32(v.i) }},
	{name: "compression.zstd.level", typ: TypeInt, dflt: "3", check: checkZstdLevel,
		synonyms:   []string{"compression.zstd.level"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.CompressionZstdLevel)) },
		doc:        "The zstd level used when compression.type is zstd.",
		set:        func(t *Topic, v value) { t.CompressionZstdLevel = int32(v.i) }},
	{name: "delete.retention.ms", typ: TypeLong, dflt: "86400000", check: atLeast(0),
		synonyms:   []string{"log.cleaner.delete.retention.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogCleanerDeleteRetentionMs) },
		doc:        "How long tombstones stay in a compacted topic; also how long a consumer reading from the start has to see them.",
		set:        func(t *Topic, v value) { t.DeleteRetentionMs = v.i }},
	{name: "file.delete.delay.ms", typ: TypeLong, dflt: "60000", check: atLeast(0),
		synonyms:   []string{"log.segment.delete.delay.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogSegmentDeleteDelayMs) },
		doc:        "How long a deleted segment's files stay on disk before they are removed.",
		set:        func(t *Topic, v value) { t.FileDeleteDelayMs = v.i }},
	{name: "flush.messages", typ: TypeLong, dflt: "9223372036854775807", check: atLeast(1),
		synonyms:   []string{"log.flush.interval.messages"},
		fromBroker: func(b *Broker) string { return itoa(b.LogFlushIntervalMessages) },
		doc:        "Force an fsync after this many records; replication is the usual guard against loss, so the default never forces one.",
		set:        func(t *Topic, v value) { t.FlushMessages = v.i }},
	{name: "flush.ms", typ: TypeLong, dflt: "9223372036854775807", check: atLeast(0),
		synonyms: []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
		fromBroker: func(b *Broker) string {
			if b.LogFlushIntervalMs != nil {
				return itoa(*b.LogFlushIntervalMs)
			}
			return itoa(b.LogFlushSchedulerIntervalMs)
		},
		doc: "Force an fsync when data has been unflushed this long; the default never forces one.",
		set: func(t *Topic, v value) { t.FlushMs = v.i }},
	{name: "follower.replication.throttled.replicas", typ: TypeList, dflt: "", check: throttledReplicas,
		doc: "Replicas whose log replication is throttled on the follower side, as partition:broker pairs, or * for all.",
		set: func(t *Topic, v value) { t.FollowerReplicationThrottledReplicas = v.list }},
	{name: "index.interval.bytes", typ: TypeInt, dflt: "4096", check: atLeast(0),
		synonyms:   []string{"log.index.interval.bytes"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.LogIndexIntervalBytes)) },
		doc:        "How many log bytes between entries of the offset index.",
		set:        func(t *Topic, v value) { t.IndexIntervalBytes = int32(v.i) }},
	{name: "leader.replication.throttled.replicas", typ: TypeList, dflt: "", check: throttledReplicas,
		doc: "Replicas whose log replication is throttled on the leader side, as partition:broker pairs, or * for all.",
		set: func(t *Topic, v value) { t.LeaderReplicationThrottledReplicas = v.list }},
	{name: "local.retention.bytes", typ: TypeLong, dflt: "-2", check: atLeast(-2),
		synonyms:   []string{"log.local.retention.bytes"},
		fromBroker: func(b *Broker) string { return b.brokerString("log.local.retention.bytes") },
		doc:        "Tiered storage: the local size limit; -2 uses retention.bytes. Gregor has no tiered storage.",
		set:        func(t *Topic, v value) { t.LocalRetentionBytes = v.i }},
	{name: "local.retention.ms", typ: TypeLong, dflt: "-2", check: atLeast(-2),
		synonyms:   []string{"log.local.retention.ms"},
		fromBroker: func(b *Broker) string { return b.brokerString("log.local.retention.ms") },
		doc:        "Tiered storage: the local time limit; -2 uses retention.ms. Gregor has no tiered storage.",
		set:        func(t *Topic, v value) { t.LocalRetentionMs = v.i }},
	{name: "max.compaction.lag.ms", typ: TypeLong, dflt: "9223372036854775807", check: atLeast(1),
		synonyms:   []string{"log.cleaner.max.compaction.lag.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogCleanerMaxCompactionLagMs) },
		doc:        "The longest time a record stays ineligible for compaction.",
		set:        func(t *Topic, v value) { t.MaxCompactionLagMs = v.i }},
	{name: "max.message.bytes", typ: TypeInt, dflt: "1048588", check: atLeast(0),
		synonyms:   []string{"message.max.bytes"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.MessageMaxBytes)) },
		doc:        "The largest record batch the topic accepts, after compression.",
		set:        func(t *Topic, v value) { t.MaxMessageBytes = int32(v.i) }},
	{name: "message.timestamp.after.max.ms", typ: TypeLong, dflt: "3600000", check: atLeast(0),
		synonyms:   []string{"log.message.timestamp.after.max.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogMessageTimestampAfterMaxMs) },
		doc:        "With CreateTime, how far after the broker's clock a record timestamp may be before the batch is rejected.",
		set:        func(t *Topic, v value) { t.TimestampAfterMaxMs = v.i }},
	{name: "message.timestamp.before.max.ms", typ: TypeLong, dflt: "9223372036854775807", check: atLeast(0),
		synonyms:   []string{"log.message.timestamp.before.max.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogMessageTimestampBeforeMaxMs) },
		doc:        "With CreateTime, how far before the broker's clock a record timestamp may be before the batch is rejected.",
		set:        func(t *Topic, v value) { t.TimestampBeforeMaxMs = v.i }},
	{name: "message.timestamp.type", typ: TypeString, dflt: "CreateTime", check: oneOf(timestampTypes...),
		synonyms:   []string{"log.message.timestamp.type"},
		fromBroker: func(b *Broker) string { return b.LogMessageTimestampType },
		doc:        "Whether record timestamps are the producer's create time (CreateTime) or the broker's append time (LogAppendTime).",
		set:        func(t *Topic, v value) { t.TimestampType = v.s }},
	{name: "min.cleanable.dirty.ratio", typ: TypeDouble, dflt: "0.5", check: betweenFloat(0, 1),
		synonyms:   []string{"log.cleaner.min.cleanable.ratio"},
		fromBroker: func(b *Broker) string { return javaDouble(b.LogCleanerMinCleanableRatio) },
		doc:        "The least share of uncompacted log for the cleaner to compact it; it bounds the space duplicates may waste.",
		set:        func(t *Topic, v value) { t.MinCleanableDirtyRatio = v.f }},
	{name: "min.compaction.lag.ms", typ: TypeLong, dflt: "0", check: atLeast(0),
		synonyms:   []string{"log.cleaner.min.compaction.lag.ms"},
		fromBroker: func(b *Broker) string { return itoa(b.LogCleanerMinCompactionLagMs) },
		doc:        "The least time a record stays uncompacted.",
		set:        func(t *Topic, v value) { t.MinCompactionLagMs = v.i }},
	{name: "min.insync.replicas", typ: TypeInt, dflt: "1", check: atLeast(1),
		synonyms:   []string{"min.insync.replicas"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.MinInsyncReplicas)) },
		doc:        "With acks=all, the least number of in-sync replicas for a write to succeed; fewer answers NOT_ENOUGH_REPLICAS.",
		set:        func(t *Topic, v value) { t.MinInsyncReplicas = int32(v.i) }},
	{name: "preallocate", typ: TypeBoolean, dflt: "false",
		synonyms:   []string{"log.preallocate"},
		fromBroker: func(b *Broker) string { return strconv.FormatBool(b.LogPreallocate) },
		doc:        "Whether a new segment file is preallocated on disk.",
		set:        func(t *Topic, v value) { t.Preallocate = v.b }},
	{name: "remote.log.copy.disable", typ: TypeBoolean, dflt: "false",
		doc: "Tiered storage: stop copying segments to remote storage. Gregor has no tiered storage.",
		set: func(t *Topic, v value) { t.RemoteLogCopyDisable = v.b }},
	{name: "remote.log.delete.on.disable", typ: TypeBoolean, dflt: "false",
		doc: "Tiered storage: delete remote data when tiering is turned off. Gregor has no tiered storage.",
		set: func(t *Topic, v value) { t.RemoteLogDeleteOnDisable = v.b }},
	{name: "remote.storage.enable", typ: TypeBoolean, dflt: "false",
		doc: "Tiered storage: keep old segments in remote storage. Gregor has no tiered storage, so only false is accepted.",
		set: func(t *Topic, v value) { t.RemoteStorageEnable = v.b }},
	{name: "retention.bytes", typ: TypeLong, dflt: "-1",
		synonyms:   []string{"log.retention.bytes"},
		fromBroker: func(b *Broker) string { return itoa(b.LogRetentionBytes) },
		doc:        "With the delete policy, the largest size a partition may grow to before its oldest segments are deleted; -1 is no limit.",
		set:        func(t *Topic, v value) { t.RetentionBytes = v.i }},
	{name: "retention.ms", typ: TypeLong, dflt: "604800000", check: atLeast(-1),
		synonyms:   []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		fromBroker: func(b *Broker) string { return itoa(b.LogRetentionMs) },
		doc:        "With the delete policy, how long records are kept before their segment is deleted; -1 is no limit.",
		set:        func(t *Topic, v value) { t.RetentionMs = v.i }},
	{name: "segment.bytes", typ: TypeInt, dflt: "1073741824", check: atLeast(1 << 20),
		synonyms:   []string{"log.segment.bytes"},
		fromBroker: func(b *Broker) string { return itoa(b.LogSegmentBytes) },
		doc:        "The size of one segment file; retention and compaction work a segment at a time.",
		set:        func(t *Topic, v value) { t.SegmentBytes = v.i }},
	{name: "segment.index.bytes", typ: TypeInt, dflt: "10485760", check: atLeast(4),
		synonyms:   []string{"log.index.size.max.bytes"},
		fromBroker: func(b *Broker) string { return itoa(int64(b.LogIndexSizeMaxBytes)) },
		doc:        "The size of the offset index preallocated for each segment.",
		set:        func(t *Topic, v value) { t.SegmentIndexBytes = int32(v.i) }},
	{name: "segment.jitter.ms", typ: TypeLong, dflt: "0", check: atLeast(0),
		synonyms:   []string{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		fromBroker: func(b *Broker) string { return itoa(b.LogRollJitterMs) },
		doc:        "The most random jitter subtracted from segment.ms, so that segments do not all roll at once.",
		set:        func(t *Topic, v value) { t.SegmentJitterMs = v.i }},
	{name: "segment.ms", typ: TypeLong, dflt: "604800000", check: atLeast(1),
		synonyms:   []string{"log.roll.ms", "log.roll.hours"},
		fromBroker: func(b *Broker) string { return itoa(b.LogRollMs) },
		doc:        "Roll a new segment after this long even if the current one is not full, so retention can act on it.",
		set:        func(t *Topic, v value) { t.SegmentMs = v.i }},
	// After segment.bytes, which it overrides when set.
	{name: "internal.segment.bytes", typ: TypeInt, null: true, check: atLeast(14), internal: true,
		doc: "For tests only: the segment size, overriding segment.bytes without its 1 MiB minimum.",
		set: func(t *Topic, v value) {
			if !v.null {
				t.SegmentBytes = v.i
			}
		}},
	{name: "unclean.leader.election.enable", typ: TypeBoolean, dflt: "false",
		synonyms:   []string{"unclean.leader.election.enable"},
		fromBroker: func(b *Broker) string { return strconv.FormatBool(b.UncleanLeaderElectionEnable) },
		doc:        "Whether a replica outside the ISR may become leader as a last resort, losing data.",
		set:        func(t *Topic, v value) { t.UncleanLeaderElectionEnable = v.b }},
}

var topicKeyIndex = func() map[string]*topicKey {
	m := make(map[string]*topicKey, len(topicKeys))
	for i := range topicKeys {
		m[topicKeys[i].name] = &topicKeys[i]
	}
	return m
}()

// TopicConfigNames returns the names of the topic configs DescribeConfigs
// shows (all but the internal ones), sorted.
func TopicConfigNames() []string {
	var names []string
	for _, k := range topicKeys {
		if !k.internal {
			names = append(names, k.name)
		}
	}
	slices.Sort(names)
	return names
}

// TopicConfigType returns the type of a topic config (TypeInt, ...) and
// whether the name is a topic config at all.
func TopicConfigType(name string) (int8, bool) {
	k, ok := topicKeyIndex[name]
	if !ok {
		return TypeUnknown, false
	}
	return k.typ, true
}

// ValidateTopicConfigs checks topic config overrides as Kafka checks those
// of CreateTopics and AlterConfigs: every name must be a topic config and
// every value must parse and pass its validator. The error is a
// *ConfigError; Kafka answers it with INVALID_CONFIG.
func ValidateTopicConfigs(cfg map[string]string) error {
	names := make([]string, 0, len(cfg))
	for name := range cfg {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := topicKeyIndex[name]; !ok {
			return &ConfigError{Name: name, Value: cfg[name], Reason: "unknown topic config", Unknown: true}
		}
	}
	for _, name := range names {
		k := topicKeyIndex[name]
		if _, err := parseChecked(name, k.typ, k.check, cfg[name]); err != nil {
			return err
		}
	}
	// Relations between configs, against LogConfig's own defaults as in
	// Kafka's LogConfig.validate.
	parsed := func(name string) value {
		k := topicKeyIndex[name]
		raw, ok := cfg[name]
		if !ok {
			raw = k.dflt
		}
		v, _ := parseChecked(name, k.typ, k.check, raw)
		return v
	}
	if lo, hi := parsed("min.compaction.lag.ms").i, parsed("max.compaction.lag.ms").i; lo > hi {
		return invalid("min.compaction.lag.ms", itoa(lo),
			"conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", lo, hi)
	}
	if parsed("remote.storage.enable").b {
		return invalid("remote.storage.enable", cfg["remote.storage.enable"],
			"Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	return nil
}

// topicValue returns a topic config's effective value: the override when
// there is a valid one, else the broker's default.
func (b *Broker) topicValue(k *topicKey, overrides map[string]string) (v value, overridden bool) {
	if raw, ok := overrides[k.name]; ok {
		if v, err := parseChecked(k.name, k.typ, k.check, raw); err == nil {
			return v, true
		}
	}
	if k.null {
		return value{null: true}, false
	}
	raw := k.dflt
	if k.fromBroker != nil {
		raw = k.fromBroker(b)
	}
	v, err := parseValue(k.name, k.typ, raw)
	if err != nil {
		// The broker's values were checked when it was parsed; a Broker
		// edited into an impossible state falls back to Kafka's default.
		v, _ = parseValue(k.name, k.typ, k.dflt)
	}
	return v, false
}

// TopicConfig resolves a topic's effective configuration: for each topic
// config its override, else the broker's default for it. Overrides are
// expected to have passed ValidateTopicConfigs; one that does not parse is
// ignored in favour of the broker's default.
func (b *Broker) TopicConfig(overrides map[string]string) Topic {
	var t Topic
	for i := range topicKeys {
		k := &topicKeys[i]
		v, _ := b.topicValue(k, overrides)
		k.set(&t, v)
	}
	return t
}
