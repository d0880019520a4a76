package config

import (
	"slices"
	"strings"
)

// Entry is one config as DescribeConfigs returns it.
type Entry struct {
	Name      string
	Value     string
	IsNull    bool // the config has no value (Kafka's null)
	Source    int8 // SourceDynamicTopic, SourceStaticBroker, SourceDefault...
	ReadOnly  bool
	Sensitive bool
	Type      int8 // TypeBoolean, TypeString, ... (DescribeConfigs v3+)
	Doc       string
	Synonyms  []Synonym // highest priority first; the first one is the source
}

// Synonym is a config that supplies, or could supply, an Entry's value.
type Synonym struct {
	Name   string
	Value  string
	Source int8
}

// brokerSynonymFamily is Kafka's DynamicBrokerConfig.brokerConfigSynonyms:
// the broker properties that set the same value, highest priority first.
func brokerSynonymFamily(name string) []string {
	families := [][]string{
		{"log.roll.ms", "log.roll.hours"},
		{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	}
	for _, f := range families {
		if slices.Contains(f, name) {
			return f
		}
	}
	if name == "log.flush.interval.ms" {
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	}
	return []string{name}
}

// brokerSynonyms lists, as Kafka's ConfigHelper.configSynonyms does, the
// properties of name's family set dynamically (DYNAMIC_BROKER_CONFIG, then
// DYNAMIC_DEFAULT_BROKER_CONFIG), those set in the file
// (STATIC_BROKER_CONFIG), then
// those with a non-null default (DEFAULT_CONFIG), and drops any before the
// first entry for name itself. So retention.ms with nothing set has no
// synonyms, while log.segment.bytes has its default as one.
func (b *Broker) brokerSynonyms(name string, d Dynamic) []Synonym {
	family := brokerSynonymFamily(name)
	var out []Synonym
	for _, n := range family {
		out = append(out, d.dynamicSynonyms(n)...)
	}
	for _, n := range family {
		if raw, ok := b.Props[n]; ok {
			out = append(out, Synonym{Name: n, Value: raw, Source: SourceStaticBroker})
		}
	}
	for _, n := range family {
		if k, ok := brokerKeyIndex[n]; ok && !k.null {
			v, err := parseValue(n, k.typ, k.dflt)
			if err != nil {
				continue
			}
			s, _ := formatValue(k.typ, v)
			out = append(out, Synonym{Name: n, Value: s, Source: SourceDefault})
		}
	}
	for i, s := range out {
		if s.Name == name {
			return out[i:]
		}
	}
	return nil
}

// brokerValue is a broker property's parsed value: as set, else default.
func (b *Broker) brokerValue(k *brokerKey) value {
	if raw, ok := b.Props[k.name]; ok {
		if v, err := parseValue(k.name, k.typ, raw); err == nil {
			return v
		}
	}
	if k.null {
		return value{null: true}
	}
	v, _ := parseValue(k.name, k.typ, k.dflt)
	return v
}

// brokerString renders a broker property's value for use as a topic
// default.
func (b *Broker) brokerString(name string) string {
	k := brokerKeyIndex[name]
	s, _ := formatValue(k.typ, b.brokerValue(k))
	return s
}

// DescribeTopic lists every topic config of a topic with the given
// overrides, as Kafka's DescribeConfigs shows a topic: the effective value,
// its source (DYNAMIC_TOPIC_CONFIG for an override, else the first broker
// synonym's source, else DEFAULT_CONFIG) and the synonyms, sorted by name.
func (b *Broker) DescribeTopic(overrides map[string]string) []Entry {
	return b.DescribeTopicDynamic(overrides, Dynamic{})
}

// DescribeTopicDynamic is DescribeTopic on a broker whose dynamic configs
// are d: a topic config without an override takes its broker synonym's
// dynamic value when there is one.
func (b *Broker) DescribeTopicDynamic(overrides map[string]string, d Dynamic) []Entry {
	out := make([]Entry, 0, len(topicKeys))
	for i := range topicKeys {
		k := &topicKeys[i]
		if k.internal {
			continue
		}
		v, overridden := b.topicValue(k, overrides)
		s, null := formatValue(k.typ, v)
		var syn []Synonym
		if overridden {
			syn = append(syn, Synonym{Name: k.name, Value: s, Source: SourceDynamicTopic})
		}
		if len(k.synonyms) > 0 {
			bs := b.brokerSynonyms(k.synonyms[0], d)
			if !overridden && len(bs) > 0 && (bs[0].Source == SourceDynamicBroker || bs[0].Source == SourceDynamicDefaultBroker) {
				s, null = bs[0].Value, false
			}
			syn = append(syn, bs...)
		}
		src := SourceDefault
		if len(syn) > 0 {
			src = syn[0].Source
		}
		out = append(out, Entry{
			Name: k.name, Value: s, IsNull: null, Source: src,
			Type: k.typ, Doc: k.doc, Synonyms: syn,
		})
	}
	sortEntries(out)
	return out
}

// DescribeBroker lists the broker configs Gregor knows as Kafka's
// DescribeConfigs shows a broker's own configs: the value as set in the
// file (STATIC_BROKER_CONFIG) or the default (DEFAULT_CONFIG), null for a
// property without a default that is not set, and read-only unless Kafka
// can change it dynamically. Sorted by name.
func (b *Broker) DescribeBroker() []Entry {
	return b.DescribeBrokerDynamic(Dynamic{})
}

// DescribeBrokerDynamic is DescribeBroker with the broker's dynamic
// configs d: a config set dynamically shows its dynamic value and source
// (DYNAMIC_BROKER_CONFIG before DYNAMIC_DEFAULT_BROKER_CONFIG).
func (b *Broker) DescribeBrokerDynamic(d Dynamic) []Entry {
	out := make([]Entry, 0, len(brokerKeys))
	for i := range brokerKeys {
		k := &brokerKeys[i]
		if k.gregor {
			continue
		}
		s, null := formatValue(k.typ, b.brokerValue(k))
		syn := b.brokerSynonyms(k.name, d)
		src := SourceDefault
		if len(syn) > 0 {
			src = syn[0].Source
			if src == SourceDynamicBroker || src == SourceDynamicDefaultBroker {
				s, null = syn[0].Value, false
			}
		}
		sensitive := k.typ == TypePassword
		if sensitive {
			// As Kafka: a password is described, never shown.
			s, null = "", true
			for i := range syn {
				syn[i].Value = ""
			}
		}
		out = append(out, Entry{
			Name: k.name, Value: s, IsNull: null, Source: src, ReadOnly: !k.dynamic,
			Sensitive: sensitive, Type: k.typ, Doc: k.doc, Synonyms: syn,
		})
	}
	out = append(out, listenerStoreEntries(d.Node)...)
	sortEntries(out)
	return out
}

// listenerStoreEntries describes the listener-prefixed key and trust
// store properties set on this broker at run time, as Kafka lists them
// (DYNAMIC_BROKER_CONFIG; a password described, never shown).
func listenerStoreEntries(node map[string]string) []Entry {
	var out []Entry
	for name, v := range node {
		if _, ok := ListenerStoreKey(name); !ok {
			continue
		}
		_, key, _ := strings.Cut(strings.TrimPrefix(name, "listener.name."), ".")
		k := securityKey(key)
		sensitive := k.typ == TypePassword
		if sensitive {
			v = ""
		}
		out = append(out, Entry{
			Name: name, Value: v, IsNull: sensitive, Source: SourceDynamicBroker, Sensitive: sensitive,
			Type: k.typ, Doc: k.doc, Synonyms: []Synonym{{Name: name, Value: v, Source: SourceDynamicBroker}},
		})
	}
	return out
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}
