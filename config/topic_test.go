package config

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestTopicConfigNames(t *testing.T) {
	// Kafka 4.2's LogConfig, without its internal configs.
	want := []string{
		"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
		"compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
		"flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
		"leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
		"max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
		"message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
		"min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
		"remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
		"segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
		"unclean.leader.election.enable",
	}
	got := TopicConfigNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("topic configs = %q\nwant %q", got, want)
	}
	if typ, ok := TopicConfigType("segment.bytes"); !ok || typ != TypeInt {
		t.Errorf("TopicConfigType(segment.bytes) = %d, %v", typ, ok)
	}
	if _, ok := TopicConfigType("internal.segment.bytes"); !ok {
		t.Error("internal.segment.bytes is accepted, as in Kafka")
	}
	if _, ok := TopicConfigType("message.downconversion.enable"); ok {
		t.Error("message.downconversion.enable is gone in Kafka 4")
	}
}

func TestValidateTopicConfigs(t *testing.T) {
	valid := []map[string]string{
		nil,
		{"cleanup.policy": "compact"},
		{"cleanup.policy": "compact,delete"},
		{"cleanup.policy": " delete , compact "},
		{"cleanup.policy": ""},
		{"segment.bytes": "1048576"},
		{"segment.ms": "1"},
		{"retention.ms": "-1", "retention.bytes": "-1"},
		{"retention.bytes": "-100"},
		{"max.message.bytes": "0"},
		{"min.cleanable.dirty.ratio": "0.01"},
		{"min.cleanable.dirty.ratio": "1"},
		{"compression.type": "zstd", "compression.zstd.level": "-5"},
		{"compression.gzip.level": "-1"},
		{"leader.replication.throttled.replicas": "*"},
		{"follower.replication.throttled.replicas": "0:1, 1:2"},
		{"message.timestamp.type": "LogAppendTime"},
		{"unclean.leader.election.enable": "TRUE"},
		{"remote.storage.enable": "false"},
		{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"},
		{"local.retention.ms": "-2"},
		{"internal.segment.bytes": "1024"},
	}
	for _, cfg := range valid {
		if err := ValidateTopicConfigs(cfg); err != nil {
			t.Errorf("ValidateTopicConfigs(%v) = %v, want nil", cfg, err)
		}
	}

	invalid := []struct {
		cfg     map[string]string
		name    string
		unknown bool
		msg     string // the whole message, when checked
	}{
		{map[string]string{"segment.bytes": "1048575"}, "segment.bytes", false,
			"Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"},
		{map[string]string{"segment.bytes": "abc"}, "segment.bytes", false,
			"Invalid value abc for configuration segment.bytes: Not a number of type INT"},
		{map[string]string{"segment.bytes": "2147483648"}, "segment.bytes", false, ""},
		{map[string]string{"max.message.bytes": "-1"}, "max.message.bytes", false, ""},
		{map[string]string{"cleanup.policy": "compact,foo"}, "cleanup.policy", false,
			"Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"},
		{map[string]string{"cleanup.policy": "delete,delete"}, "cleanup.policy", false, ""},
		{map[string]string{"cleanup.policy": "delete,"}, "cleanup.policy", false, ""},
		{map[string]string{"retention.ms": "-2"}, "retention.ms", false, ""},
		{map[string]string{"min.cleanable.dirty.ratio": "1.1"}, "min.cleanable.dirty.ratio", false, ""},
		{map[string]string{"min.cleanable.dirty.ratio": "NaN"}, "min.cleanable.dirty.ratio", false, ""},
		{map[string]string{"message.timestamp.type": "createtime"}, "message.timestamp.type", false, ""},
		{map[string]string{"unclean.leader.election.enable": "1"}, "unclean.leader.election.enable", false,
			"Invalid value 1 for configuration unclean.leader.election.enable: Expected value to be either true or false"},
		{map[string]string{"min.insync.replicas": "0"}, "min.insync.replicas", false, ""},
		{map[string]string{"segment.index.bytes": "3"}, "segment.index.bytes", false, ""},
		{map[string]string{"segment.ms": "0"}, "segment.ms", false, ""},
		{map[string]string{"compression.type": "brotli"}, "compression.type", false, ""},
		{map[string]string{"compression.gzip.level": "0"}, "compression.gzip.level", false, ""},
		{map[string]string{"compression.lz4.level": "18"}, "compression.lz4.level", false, ""},
		{map[string]string{"compression.zstd.level": "23"}, "compression.zstd.level", false, ""},
		{map[string]string{"leader.replication.throttled.replicas": "0-1"}, "leader.replication.throttled.replicas", false, ""},
		{map[string]string{"leader.replication.throttled.replicas": "*,0:1"}, "leader.replication.throttled.replicas", false, ""},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms", false,
			"Invalid value 10 for configuration min.compaction.lag.ms: conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{map[string]string{"remote.storage.enable": "true"}, "remote.storage.enable", false, ""},
		{map[string]string{"internal.segment.bytes": "10"}, "internal.segment.bytes", false, ""},
		{map[string]string{"foo": "bar"}, "foo", true, "Unknown topic config name: foo"},
		{map[string]string{"message.downconversion.enable": "true"}, "message.downconversion.enable", true, ""},
		{map[string]string{"message.format.version": "3.0"}, "message.format.version", true, ""},
		{map[string]string{"log.retention.ms": "1000"}, "log.retention.ms", true, ""},
		// Unknown names are reported before bad values, as in Kafka.
		{map[string]string{"segment.bytes": "1", "zzz": "1"}, "zzz", true, ""},
	}
	for _, tt := range invalid {
		err := ValidateTopicConfigs(tt.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("ValidateTopicConfigs(%v) = %v, want a *ConfigError", tt.cfg, err)
			continue
		}
		if ce.Name != tt.name || ce.Unknown != tt.unknown {
			t.Errorf("ValidateTopicConfigs(%v): %+v, want name %s unknown %v", tt.cfg, ce, tt.name, tt.unknown)
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("ValidateTopicConfigs(%v) = %q, want %q", tt.cfg, err, tt.msg)
		}
	}
}

func TestTopicConfigResolution(t *testing.T) {
	b := mustParse(t, map[string]string{
		"log.segment.bytes":          "2097152",
		"message.max.bytes":          "500000",
		"log.cleanup.policy":         "compact",
		"log.retention.minutes":      "10",
		"compression.type":           "lz4",
		"min.insync.replicas":        "2",
		"log.message.timestamp.type": "LogAppendTime",
	})
	got := b.TopicConfig(map[string]string{
		"segment.bytes":  "3145728",
		"retention.ms":   "1000",
		"flush.messages": "bad", // ignored: overrides are validated before use
	})
	if got.SegmentBytes != 3<<20 || got.RetentionMs != 1000 {
		t.Errorf("overrides not applied: segment %d, retention %d", got.SegmentBytes, got.RetentionMs)
	}
	if got.MaxMessageBytes != 500000 || !got.Compact() || got.Delete() || got.CompressionType != "lz4" ||
		got.MinInsyncReplicas != 2 || got.TimestampType != "LogAppendTime" {
		t.Errorf("broker defaults not applied: %+v", got)
	}
	small := b.TopicConfig(map[string]string{"segment.bytes": "3145728", "internal.segment.bytes": "4096"})
	if small.SegmentBytes != 4096 {
		t.Errorf("internal.segment.bytes not applied: %d", small.SegmentBytes)
	}
	if got.FlushMessages != 1<<63-1 {
		t.Errorf("bad override used: flush.messages %d", got.FlushMessages)
	}
	if got := b.TopicConfig(nil); got.SegmentBytes != 2<<20 || got.RetentionMs != 600000 {
		t.Errorf("no overrides: segment %d, retention %d", got.SegmentBytes, got.RetentionMs)
	}

	d := Default().TopicConfig(nil)
	want := Topic{
		CleanupPolicy: []string{"delete"}, CompressionType: "producer", CompressionGzipLevel: -1,
		CompressionLz4Level: 9, CompressionZstdLevel: 3, DeleteRetentionMs: 86400000, FileDeleteDelayMs: 60000,
		FlushMessages: 1<<63 - 1, FlushMs: 1<<63 - 1, FollowerReplicationThrottledReplicas: []string{},
		IndexIntervalBytes: 4096, LeaderReplicationThrottledReplicas: []string{}, LocalRetentionBytes: -2,
		LocalRetentionMs: -2, MaxCompactionLagMs: 1<<63 - 1, MaxMessageBytes: 1048588,
		TimestampAfterMaxMs: 3600000, TimestampBeforeMaxMs: 1<<63 - 1, TimestampType: "CreateTime",
		MinCleanableDirtyRatio: 0.5, MinInsyncReplicas: 1, RetentionBytes: -1, RetentionMs: 604800000,
		SegmentBytes: 1 << 30, SegmentIndexBytes: 10 << 20, SegmentMs: 604800000,
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("default topic config\n got %+v\nwant %+v", d, want)
	}
}

func BenchmarkTopicConfig(b *testing.B) {
	br := Default()
	overrides := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}
	for b.Loop() {
		_ = br.TopicConfig(overrides)
	}
}
