package config

import (
	"strings"
	"testing"
)

func FuzzReadProperties(f *testing.F) {
	for _, s := range []string{"a=b", "a\\\n  b", "# c\n!d\ne:f", `\u0041=\uD83D\uDE00`, "a=\\", "\r\n\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		props, err := ReadProperties(strings.NewReader(s))
		if err != nil {
			return
		}
		// Whatever was read parses as a broker config or fails cleanly.
		_, _, _ = Parse(props)
	})
}

// FuzzTopicConfig feeds one topic config override, as CreateTopics or
// AlterConfigs would, through validation, resolution and description. A
// value that validates must describe as a value that validates again to
// the same description.
func FuzzTopicConfig(f *testing.F) {
	for _, k := range topicKeys {
		f.Add(k.name, k.dflt)
	}
	f.Add("cleanup.policy", " compact , delete ")
	f.Add("min.cleanable.dirty.ratio", "1e-3")
	f.Add("segment.bytes", "+2000000")
	b := Default()
	f.Fuzz(func(t *testing.T, name, val string) {
		cfg := map[string]string{name: val}
		if err := ValidateTopicConfigs(cfg); err != nil {
			return
		}
		_ = b.TopicConfig(cfg)
		for _, e := range b.DescribeTopic(cfg) {
			if e.Name != name {
				continue
			}
			if e.Source != SourceDynamicTopic {
				t.Fatalf("%s=%q: source %d", name, val, e.Source)
			}
			again := map[string]string{name: e.Value}
			if err := ValidateTopicConfigs(again); err != nil {
				t.Fatalf("%s=%q described as %q, which does not validate: %v", name, val, e.Value, err)
			}
			for _, e2 := range b.DescribeTopic(again) {
				if e2.Name == name && e2.Value != e.Value {
					t.Fatalf("%s=%q: described %q, then %q", name, val, e.Value, e2.Value)
				}
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add("listeners", "PLAINTEXT://[::1]:9092,CONTROLLER://:9093")
	f.Add("controller.quorum.voters", "1@[::1]:9093")
	f.Add("log.retention.minutes", "-7")
	f.Add("listener.security.protocol.map", "A:B:C")
	f.Fuzz(func(t *testing.T, name, val string) {
		b, _, err := Parse(map[string]string{name: val})
		if err != nil {
			return
		}
		_ = b.DescribeBroker()
		_ = b.DescribeTopic(nil)
	})
}
