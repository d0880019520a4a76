package config

import (
	"fmt"
	"slices"
	"strings"
)

// unsupportedKeys are the broker properties Gregor accepts (so a Kafka
// server.properties loads unchanged) but whose value has no effect, with
// why. Every other key of brokerKeys is honoured: it does what Kafka's
// does. A key added to brokerKeys that Gregor does not act on must be
// added here, so that start-up names it and docs/configuration.md says so.
var unsupportedKeys = map[string]string{
	"controller.quorum.election.timeout.ms":           "the metadata quorum uses its own election timing: 100 ms raft ticks, an election after 1-2 s without the leader, at once when the leader's controller listener refuses connections",
	"controller.quorum.fetch.timeout.ms":              "the metadata quorum uses its own election timing: 100 ms raft ticks, an election after 1-2 s without the leader, at once when the leader's controller listener refuses connections",
	"controller.quorum.election.backoff.max.ms":       "the metadata quorum uses its own election timing",
	"controller.quorum.request.timeout.ms":            "the metadata quorum uses its own request timing",
	"controller.quorum.retry.backoff.ms":              "the metadata quorum uses its own request timing",
	"controller.quorum.append.linger.ms":              "the metadata quorum appends without lingering",
	"metadata.log.segment.bytes":                      "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.log.segment.ms":                         "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.max.retention.bytes":                    "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.max.retention.ms":                       "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.log.max.record.bytes.between.snapshots": "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.log.max.snapshot.interval.ms":           "the metadata log's segments and snapshots are managed by the quorum itself",
	"metadata.max.idle.interval.ms":                   "the active controller appends no idle records",
	"initial.broker.registration.timeout.ms":          "registration waits a fixed 30 s",
	"broker.rack":                                     "no rack-aware replica placement or fetching from the closest replica yet",
	"num.network.threads":                             "each connection has its own goroutines",
	"num.io.threads":                                  "requests run on goroutines, not a thread pool",
	"background.threads":                              "background work runs on goroutines, not a thread pool",
	"log.flush.start.offset.checkpoint.interval.ms":   "log start offsets are checkpointed with the recovery points (log.flush.offset.checkpoint.interval.ms)",
	"log.preallocate":                                 "segment files grow as written",
	"log.local.retention.ms":                          "no tiered storage",
	"log.local.retention.bytes":                       "no tiered storage",
	"num.recovery.threads.per.data.dir":               "logs are recovered one at a time",
	"replica.socket.timeout.ms":                       "replica fetches time out with replica.fetch.wait.max.ms and the connection's own timeouts",
	"num.replica.fetchers":                            "one fetcher per source broker",
	"replica.high.watermark.checkpoint.interval.ms":   "high watermarks are checkpointed with the recovery points (log.flush.offset.checkpoint.interval.ms)",
	"group.coordinator.rebalance.protocols":           "the classic and consumer protocols are always enabled",
	"offsets.commit.timeout.ms":                       "an offset commit waits for its write with the request's own timeout",
	"offsets.load.buffer.size":                        "__consumer_offsets is read batch by batch",
	"transaction.state.log.load.buffer.size":          "__transaction_state is read batch by batch",
	"ssl.keymanager.algorithm":                        "Go's crypto/tls presents the key store's certificate itself, with no Java key manager",
	"ssl.trustmanager.algorithm":                      "Go's crypto/x509 verifies client certificates against the trust store (PKIX path validation), with no Java trust manager",
}

// UnsupportedSetting is a property set in the configuration that Gregor
// accepts but does not act on.
type UnsupportedSetting struct {
	Name, Value, Why string
}

// UnsupportedSettings lists, sorted by name, the properties given in the
// configuration (file and overrides) that have no effect in Gregor, for
// start-up to name each one.
func (b *Broker) UnsupportedSettings() []UnsupportedSetting {
	var out []UnsupportedSetting
	for name, v := range b.Props {
		if why, ok := unsupportedKeys[name]; ok {
			out = append(out, UnsupportedSetting{Name: name, Value: v, Why: why})
		}
	}
	slices.SortFunc(out, func(a, b UnsupportedSetting) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SettingsTable renders docs/configuration.md: every broker property and
// topic config Gregor accepts, honoured or not supported, one line each.
func SettingsTable() string {
	var sb strings.Builder
	sb.WriteString(`# Configuration

<!-- Generated from config/brokerkeys.go, config/settings.go, config/topic.go
     and config/topic_settings.go by
     go test ./config -run TestConfigurationDoc -update; do not edit. -->

Gregor reads Kafka's ` + "`server.properties`" + `. Every broker property below is
accepted with Kafka's name, type, default and validation. **honoured**
means it does what it does in Kafka; **not supported** means it is
accepted so that a Kafka configuration loads unchanged, but has no effect:
` + "`gregor serve`" + ` logs a warning for each one the configuration sets.
Properties Gregor does not know are logged and ignored, as Kafka does.
**refused** properties stop start-up when set: Gregor cannot do what they
ask, and ignoring them would change who is let in.

Every listener, the controller and inter-broker ones included, may use
PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Every ssl.*,
sasl.* and connections.max.reauth.ms property may be set for one listener
as ` + "`listener.name.<listener in lower case>.<property>`" + `, which takes
precedence over the plain property; a SASL listener's JAAS config is
` + "`listener.name.<listener>.<mechanism in lower case>.sasl.jaas.config`" + `.

| property | default | status |
|---|---|---|
`)
	names := make([]string, 0, len(brokerKeys))
	for _, k := range brokerKeys {
		names = append(names, k.name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := brokerKeyIndex[name]
		dflt := "`" + k.dflt + "`"
		if k.null {
			dflt = "(none)"
		} else if k.dflt == "" {
			dflt = "(empty)"
		}
		status := "honoured"
		if limits, ok := securityLimits[name]; ok {
			status += ": " + limits
		}
		if why, ok := unsupportedKeys[name]; ok {
			status = "not supported: " + why
		}
		if why, ok := refusedSecurityKeys[name]; ok {
			status = "refused: " + why
		}
		if k.gregor {
			status += " (Gregor only)"
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s |\n", name, dflt, strings.ReplaceAll(status, "|", `\|`))
	}
	sb.WriteString(dynamicSettingsText())
	sb.WriteString(topicSettingsTable())
	return sb.String()
}

// dynamicSettingsText is the part of docs/configuration.md on dynamic
// broker configs (dynamic.go).
func dynamicSettingsText() string {
	names := AppliedDynamicBrokerConfigs()
	for i, n := range names {
		names[i] = "`" + n + "`"
	}
	return `
## Dynamic broker configs

IncrementalAlterConfigs and AlterConfigs (` + "`kafka-configs --entity-type brokers`" + `)
change broker configs at run time, for one broker (its id) or for the
whole cluster (` + "`--entity-default`" + `, the empty name), as in Kafka: the
values are kept in the metadata log, and DescribeConfigs shows them with
source DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG ahead of the
file and the default. Gregor accepts only the configs it applies when
they change: ` + strings.Join(names, ", ") + `. Any other name is refused with
INVALID_REQUEST and Kafka's message ("Cannot update these configs
dynamically: [...]", with Gregor's reason), not stored and ignored; among
them the replication throttle rates, since Gregor does not throttle
replication. Deleting a config that is not set succeeds, as
` + "`kafka-reassign-partitions --verify`" + ` does when it clears the throttles.
`
}
