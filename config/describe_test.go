package config

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConstantsMatchKmsg(t *testing.T) {
	sources := map[int8]kmsg.ConfigSource{
		SourceUnknown:              kmsg.ConfigSourceUnknown,
		SourceDynamicTopic:         kmsg.ConfigSourceDynamicTopicConfig,
		SourceDynamicBroker:        kmsg.ConfigSourceDynamicBrokerConfig,
		SourceDynamicDefaultBroker: kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		SourceStaticBroker:         kmsg.ConfigSourceStaticBrokerConfig,
		SourceDefault:              kmsg.ConfigSourceDefaultConfig,
		SourceDynamicBrokerLogger:  kmsg.ConfigSourceDynamicBrokerLoggerConfig,
		SourceClientMetrics:        kmsg.ConfigSourceClientMetricsConfig,
		SourceGroup:                kmsg.ConfigSourceGroupConfig,
	}
	for ours, theirs := range sources {
		if ours != int8(theirs) {
			t.Errorf("source %d != kmsg %v (%d)", ours, theirs, int8(theirs))
		}
	}
	types := map[int8]kmsg.ConfigType{
		TypeUnknown: kmsg.ConfigTypeUnknown, TypeBoolean: kmsg.ConfigTypeBoolean, TypeString: kmsg.ConfigTypeString,
		TypeInt: kmsg.ConfigTypeInt, TypeShort: kmsg.ConfigTypeShort, TypeLong: kmsg.ConfigTypeLong,
		TypeDouble: kmsg.ConfigTypeDouble, TypeList: kmsg.ConfigTypeList, TypeClass: kmsg.ConfigTypeClass,
		TypePassword: kmsg.ConfigTypePassword,
	}
	for ours, theirs := range types {
		if ours != int8(theirs) {
			t.Errorf("type %d != kmsg %v (%d)", ours, theirs, int8(theirs))
		}
	}
}

func entry(t *testing.T, entries []Entry, name string) Entry {
	t.Helper()
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %s", name)
	return Entry{}
}

func checkEntry(t *testing.T, entries []Entry, name, value string, source int8, synonyms []Synonym) {
	t.Helper()
	e := entry(t, entries, name)
	if e.Value != value || e.Source != source || !slices.Equal(e.Synonyms, synonyms) {
		t.Errorf("%s = %q source %d synonyms %+v\nwant %q source %d synonyms %+v", name, e.Value, e.Source, e.Synonyms, value, source, synonyms)
	}
}

func TestDescribeTopic(t *testing.T) {
	// Values, sources and synonyms as kafka-configs --describe --all shows
	// them for a topic on a broker with default settings.
	d := Default().DescribeTopic(nil)
	if len(d) != len(TopicConfigNames()) {
		t.Fatalf("%d entries, want %d", len(d), len(TopicConfigNames()))
	}
	for _, e := range d {
		if e.Name == "internal.segment.bytes" {
			t.Error("internal configs are not described")
		}
	}
	if !slices.IsSortedFunc(d, func(a, b Entry) int { return cmpString(a.Name, b.Name) }) {
		t.Error("entries are not sorted by name")
	}
	checkEntry(t, d, "segment.bytes", "1073741824", SourceDefault, []Synonym{{"log.segment.bytes", "1073741824", SourceDefault}})
	checkEntry(t, d, "retention.ms", "604800000", SourceDefault, nil)
	checkEntry(t, d, "segment.ms", "604800000", SourceDefault, nil)
	checkEntry(t, d, "flush.ms", "9223372036854775807", SourceDefault, nil)
	checkEntry(t, d, "retention.bytes", "-1", SourceDefault, []Synonym{{"log.retention.bytes", "-1", SourceDefault}})
	checkEntry(t, d, "delete.retention.ms", "86400000", SourceDefault, []Synonym{{"log.cleaner.delete.retention.ms", "86400000", SourceDefault}})
	checkEntry(t, d, "min.cleanable.dirty.ratio", "0.5", SourceDefault, []Synonym{{"log.cleaner.min.cleanable.ratio", "0.5", SourceDefault}})
	checkEntry(t, d, "max.message.bytes", "1048588", SourceDefault, []Synonym{{"message.max.bytes", "1048588", SourceDefault}})
	checkEntry(t, d, "remote.storage.enable", "false", SourceDefault, nil)
	checkEntry(t, d, "leader.replication.throttled.replicas", "", SourceDefault, nil)
	for _, e := range d {
		if e.ReadOnly || e.Sensitive || e.IsNull || e.Doc == "" {
			t.Errorf("%s: read-only %v sensitive %v null %v doc %q", e.Name, e.ReadOnly, e.Sensitive, e.IsNull, e.Doc)
		}
	}
	types := map[string]int8{"cleanup.policy": TypeList, "segment.bytes": TypeInt, "retention.ms": TypeLong,
		"min.cleanable.dirty.ratio": TypeDouble, "preallocate": TypeBoolean, "compression.type": TypeString}
	for name, typ := range types {
		if e := entry(t, d, name); e.Type != typ {
			t.Errorf("%s type %d, want %d", name, e.Type, typ)
		}
	}
}

func TestDescribeTopicSources(t *testing.T) {
	b := mustParse(t, map[string]string{
		"min.insync.replicas": "2",
		"log.segment.bytes":   "1048576",
		"log.retention.ms":    "3600000",
		"log.roll.hours":      "24",
	})
	d := b.DescribeTopic(map[string]string{"cleanup.policy": "delete", "max.message.bytes": " 2000 "})
	checkEntry(t, d, "cleanup.policy", "delete", SourceDynamicTopic, []Synonym{
		{"cleanup.policy", "delete", SourceDynamicTopic}, {"log.cleanup.policy", "delete", SourceDefault}})
	checkEntry(t, d, "max.message.bytes", "2000", SourceDynamicTopic, []Synonym{
		{"max.message.bytes", "2000", SourceDynamicTopic}, {"message.max.bytes", "1048588", SourceDefault}})
	checkEntry(t, d, "min.insync.replicas", "2", SourceStaticBroker, []Synonym{
		{"min.insync.replicas", "2", SourceStaticBroker}, {"min.insync.replicas", "1", SourceDefault}})
	checkEntry(t, d, "segment.bytes", "1048576", SourceStaticBroker, []Synonym{
		{"log.segment.bytes", "1048576", SourceStaticBroker}, {"log.segment.bytes", "1073741824", SourceDefault}})
	checkEntry(t, d, "retention.ms", "3600000", SourceStaticBroker, []Synonym{
		{"log.retention.ms", "3600000", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}})
	// Kafka lists synonyms from the first one (log.roll.ms) on: a value set
	// by log.roll.hours alone shows as a default without synonyms.
	checkEntry(t, d, "segment.ms", "86400000", SourceDefault, nil)
}

func TestDescribeBroker(t *testing.T) {
	d := Default().DescribeBroker()
	if !slices.IsSortedFunc(d, func(a, b Entry) int { return cmpString(a.Name, b.Name) }) {
		t.Error("entries are not sorted by name")
	}
	e := entry(t, d, "log.retention.ms")
	if !e.IsNull || e.Source != SourceDefault || len(e.Synonyms) != 0 || e.ReadOnly {
		t.Errorf("log.retention.ms: %+v", e)
	}
	checkEntry(t, d, "log.retention.hours", "168", SourceDefault, []Synonym{{"log.retention.hours", "168", SourceDefault}})
	checkEntry(t, d, "num.partitions", "1", SourceDefault, []Synonym{{"num.partitions", "1", SourceDefault}})
	checkEntry(t, d, "log.cleaner.min.cleanable.ratio", "0.5", SourceDefault, []Synonym{{"log.cleaner.min.cleanable.ratio", "0.5", SourceDefault}})
	if e := entry(t, d, "num.partitions"); !e.ReadOnly || e.Type != TypeInt {
		t.Errorf("num.partitions: %+v", e)
	}
	if e := entry(t, d, "message.max.bytes"); e.ReadOnly {
		t.Errorf("message.max.bytes is dynamic in Kafka: %+v", e)
	}
	for _, e := range d {
		if e.Name == "cluster.id" {
			t.Error("cluster.id is a Gregor extension and must not be described")
		}
	}

	b := mustParse(t, map[string]string{"log.retention.hours": " 24", "num.partitions": "3"})
	d = b.DescribeBroker()
	checkEntry(t, d, "log.retention.hours", "24", SourceStaticBroker, []Synonym{
		{"log.retention.hours", " 24", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}})
	checkEntry(t, d, "num.partitions", "3", SourceStaticBroker, []Synonym{
		{"num.partitions", "3", SourceStaticBroker}, {"num.partitions", "1", SourceDefault}})
	if e := entry(t, d, "log.retention.ms"); !e.IsNull || len(e.Synonyms) != 0 {
		t.Errorf("log.retention.ms with hours set: %+v", e)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
