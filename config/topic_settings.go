package config

import (
	"fmt"
	"slices"
	"strings"
)

// unsupportedTopicKeys are the topic configs Gregor accepts (CreateTopics,
// AlterConfigs, IncrementalAlterConfigs) so that Kafka's tools work
// unchanged, but whose value has no effect, with why. The broker logs a
// warning naming the topic and the key whenever one is set. Every other
// key of topicKeys does what Kafka's does; a key added to topicKeys that
// Gregor does not act on must be added here.
var unsupportedTopicKeys = map[string]string{
	// kafka-reassign-partitions.sh --throttle sets these two.
	"follower.replication.throttled.replicas": "no replication throttling: followers fetch at full speed",
	"leader.replication.throttled.replicas":   "no replication throttling: leaders serve followers at full speed",
	"local.retention.bytes":                   "no tiered storage: retention.bytes bounds the whole log",
	"local.retention.ms":                      "no tiered storage: retention.ms bounds the whole log",
	"remote.log.copy.disable":                 "no tiered storage",
	"remote.log.delete.on.disable":            "no tiered storage",
	"preallocate":                             "segment files grow as written",
}

// topicKeyNotes qualify honoured topic configs whose effect differs in
// detail from Kafka's.
var topicKeyNotes = map[string]string{
	"remote.storage.enable":  "only false: true is refused with INVALID_CONFIG, as Kafka refuses it while tiered storage is disabled",
	"compression.lz4.level":  "9 is lz4's fast mode, as in Kafka; 1-8 the high-compression levels; 10-17 compress as 9's high-compression level, the highest of Gregor's encoder",
	"compression.zstd.level": "mapped onto the encoder's four speeds: below 3 fastest, 3-5 default, 6-9 better, 10 and above best",
}

// UnsupportedTopicConfigs lists, sorted by name, the configs among a
// topic's overrides that have no effect in Gregor, for the broker to name
// each one when it is set.
func UnsupportedTopicConfigs(overrides map[string]string) []UnsupportedSetting {
	var out []UnsupportedSetting
	for name, v := range overrides {
		if why, ok := unsupportedTopicKeys[name]; ok {
			out = append(out, UnsupportedSetting{Name: name, Value: v, Why: why})
		}
	}
	slices.SortFunc(out, func(a, b UnsupportedSetting) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// topicSettingsTable renders the topic-config section of
// docs/configuration.md.
func topicSettingsTable() string {
	var sb strings.Builder
	sb.WriteString(`
## Topic configs

Every topic config of Kafka 4.2 is accepted by CreateTopics, AlterConfigs
and IncrementalAlterConfigs with Kafka's name, type, validation and broker
default (the broker property that supplies it is in brackets). **honoured**
means it does what it does in Kafka; **not supported** means it is accepted
so that Kafka's tools work unchanged, but has no effect: the broker logs a
warning naming the topic and the config each time one is set. Configs Kafka
4 removed (` + "`message.format.version`, `message.downconversion.enable`,\n`message.timestamp.difference.max.ms`" + `) and unknown names are refused
with INVALID_CONFIG, as Kafka 4 refuses them.

| config | default | status |
|---|---|---|
`)
	names := make([]string, 0, len(topicKeys))
	for _, k := range topicKeys {
		if !k.internal {
			names = append(names, k.name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		k := topicKeyIndex[name]
		dflt := "`" + k.dflt + "`"
		switch {
		case k.null:
			dflt = "(none)"
		case k.dflt == "":
			dflt = "(empty)"
		}
		if len(k.synonyms) > 0 {
			dflt += " (`" + strings.Join(k.synonyms, "`, `") + "`)"
		}
		status := "honoured"
		if why, ok := unsupportedTopicKeys[name]; ok {
			status = "not supported: " + why
		} else if note, ok := topicKeyNotes[name]; ok {
			status += ": " + note
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s |\n", name, dflt, strings.ReplaceAll(status, "|", `\|`))
	}
	return sb.String()
}
