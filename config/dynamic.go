package config

import (
	"fmt"
	"slices"
	"strings"
)

// Dynamic broker configs: the values IncrementalAlterConfigs and
// AlterConfigs set on a BROKER resource at run time, kept in the metadata
// log (ConfigRecord) per broker ("1", "2"...) and for the whole cluster
// (""), as Kafka's DynamicBrokerConfig. A broker's value is, highest first:
// its own dynamic config (DYNAMIC_BROKER_CONFIG), the cluster-wide one
// (DYNAMIC_DEFAULT_BROKER_CONFIG), its file (STATIC_BROKER_CONFIG), then
// Kafka's default.
//
// Gregor accepts a dynamic config only where something reads it at run
// time; every other name is refused as Kafka refuses a config it cannot
// update dynamically, rather than stored and ignored.

// Dynamic holds the dynamic config layers that apply to one broker.
type Dynamic struct {
	Node    map[string]string // this broker's own (resource name = its id)
	Cluster map[string]string // the cluster-wide defaults (resource name "")
}

// appliedDynamic names the broker configs Gregor applies when they change
// at run time, with what reads them.
var appliedDynamic = map[string]string{
	// The active controller resolves it for each election: the topic's
	// config, then its own node's dynamic config, then the cluster
	// default, then its file (ConfigurationControlManager.getTopicConfig).
	"unclean.leader.election.enable": "the controller's leader elections",
}

// refusedDynamicReason explains why some configs Kafka updates at run
// time are refused by Gregor, for the message of the refusal.
var refusedDynamicReason = map[string]string{
	"leader.replication.throttled.rate":              "Gregor does not throttle replication",
	"follower.replication.throttled.rate":            "Gregor does not throttle replication",
	"replica.alter.log.dirs.io.max.bytes.per.second": "Gregor does not throttle moves between log directories",
}

// AppliedDynamicBrokerConfigs lists, sorted, the broker configs Gregor
// changes at run time.
func AppliedDynamicBrokerConfigs() []string {
	out := make([]string, 0, len(appliedDynamic))
	for k := range appliedDynamic {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// DynamicBrokerError is a dynamic broker config change Gregor refuses. Its
// message is Kafka's (DynamicBrokerConfig.validate); Kafka's broker answers
// it with INVALID_REQUEST (KAFKA-13609), and so does Gregor.
type DynamicBrokerError struct {
	msg string
}

func (e *DynamicBrokerError) Error() string { return e.msg }

// ValidateDynamicBrokerConfigs checks the dynamic configs a broker
// resource would hold after a change (set: name to value), as Kafka's
// broker does before it forwards the change to the controller: names that
// cannot change at run time first, all of them in one message, then each
// value against its type and validator.
//
// perBroker says the resource is one broker (its id), not the cluster
// default: listener key and trust stores are per broker only, as in Kafka.
func ValidateDynamicBrokerConfigs(set map[string]string, perBroker bool) error {
	var refused, reasons, unprefixed, stores []string
	for name := range set {
		if _, ok := ListenerStoreKey(name); ok {
			stores = append(stores, name)
			continue
		}
		if isPlainStoreKey(name) {
			unprefixed = append(unprefixed, name)
			continue
		}
		if _, ok := appliedDynamic[name]; !ok {
			refused = append(refused, name)
			if r, ok := refusedDynamicReason[name]; ok && !slices.Contains(reasons, r) {
				reasons = append(reasons, r)
			}
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		slices.Sort(reasons)
		why := "Gregor changes only " + strings.Join(AppliedDynamicBrokerConfigs(), ", ") + " at run time"
		if len(reasons) > 0 {
			why = strings.Join(reasons, "; ") + "; " + why
		}
		return &DynamicBrokerError{msg: fmt.Sprintf("Cannot update these configs dynamically: [%s] (%s)", strings.Join(refused, ", "), why)}
	}
	if len(unprefixed) > 0 {
		slices.Sort(unprefixed)
		return &DynamicBrokerError{msg: fmt.Sprintf("These security configs can be dynamically updated only per-listener using the listener prefix: [%s]", strings.Join(unprefixed, ", "))}
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := brokerKeyIndex[name]
		if _, ok := ListenerStoreKey(name); ok {
			_, key, _ := strings.Cut(strings.TrimPrefix(name, "listener.name."), ".")
			k = securityKey(key)
		}
		if _, err := parseChecked(name, k.typ, k.check, set[name]); err != nil {
			return &DynamicBrokerError{msg: err.Error()}
		}
	}
	if !perBroker && len(stores) > 0 {
		slices.Sort(stores)
		return &DynamicBrokerError{msg: fmt.Sprintf("Cannot update these configs at default cluster level, broker id must be specified: [%s]", strings.Join(stores, ", "))}
	}
	return nil
}

// dynamicSynonyms is the dynamic part of a broker config's synonyms,
// highest priority first, rendered as Kafka renders the value.
func (d Dynamic) dynamicSynonyms(name string) []Synonym {
	var out []Synonym
	for _, l := range []struct {
		m   map[string]string
		src int8
	}{{d.Node, SourceDynamicBroker}, {d.Cluster, SourceDynamicDefaultBroker}} {
		raw, ok := l.m[name]
		if !ok {
			continue
		}
		s := raw
		if k, known := brokerKeyIndex[name]; known {
			if v, err := parseValue(name, k.typ, raw); err == nil {
				s, _ = formatValue(k.typ, v)
			}
		}
		out = append(out, Synonym{Name: name, Value: s, Source: l.src})
	}
	return out
}

// DescribeClusterDefaults lists the cluster-wide dynamic broker configs
// as Kafka's DescribeConfigs shows the broker resource "": only those set,
// each from DYNAMIC_DEFAULT_BROKER_CONFIG, sorted by name.
func DescribeClusterDefaults(cluster map[string]string) []Entry {
	out := make([]Entry, 0, len(cluster))
	for _, syn := range (Dynamic{Cluster: cluster}).allSynonyms() {
		e := Entry{Name: syn.Name, Value: syn.Value, Source: syn.Source, Synonyms: []Synonym{syn}}
		if k, ok := brokerKeyIndex[syn.Name]; ok {
			e.Type, e.Doc = k.typ, k.doc
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

// allSynonyms is every dynamic value of d's cluster layer.
func (d Dynamic) allSynonyms() []Synonym {
	var out []Synonym
	for name := range d.Cluster {
		out = append(out, Dynamic{Cluster: d.Cluster}.dynamicSynonyms(name)...)
	}
	return out
}
