package config

import (
	"slices"
	"strings"
	"testing"
)

func TestUnsupportedTopicKeysAreKnown(t *testing.T) {
	for _, m := range []map[string]string{unsupportedTopicKeys, topicKeyNotes} {
		for name := range m {
			if _, ok := topicKeyIndex[name]; !ok {
				t.Errorf("%s is not a topic config", name)
			}
		}
	}
}

// TestTopicSynonymsAgree: a broker property that supplies a topic
// config's default is named at start exactly when the topic config is
// not supported, so the two tables never disagree.
func TestTopicSynonymsAgree(t *testing.T) {
	for _, k := range topicKeys {
		_, topicUnsupported := unsupportedTopicKeys[k.name]
		for _, syn := range k.synonyms {
			_, brokerUnsupported := unsupportedKeys[syn]
			if topicUnsupported != brokerUnsupported {
				t.Errorf("topic config %s not supported: %v, its broker synonym %s: %v", k.name, topicUnsupported, syn, brokerUnsupported)
			}
		}
	}
}

func TestUnsupportedTopicConfigsNamesOnlyThose(t *testing.T) {
	got := UnsupportedTopicConfigs(map[string]string{
		"retention.ms": "1000", "preallocate": "true", "compression.gzip.level": "1",
		"leader.replication.throttled.replicas": "*", "remote.storage.enable": "false",
	})
	var names []string
	for _, u := range got {
		names = append(names, u.Name+"="+u.Value)
		if u.Why == "" {
			t.Errorf("%s has no reason", u.Name)
		}
	}
	if want := []string{"leader.replication.throttled.replicas=*", "preallocate=true"}; !slices.Equal(names, want) {
		t.Fatalf("UnsupportedTopicConfigs = %v, want %v", names, want)
	}
}

func TestConfigurationDocTopicTable(t *testing.T) {
	doc := SettingsTable()
	for _, k := range topicKeys {
		line := "| `" + k.name + "` |"
		if k.internal {
			if strings.Contains(doc, line) {
				t.Errorf("internal %s in the table", k.name)
			}
			continue
		}
		i := strings.Index(doc, line)
		if i < 0 {
			t.Errorf("%s missing from the topic table", k.name)
			continue
		}
		row := doc[i : i+strings.Index(doc[i:], "\n")]
		_, unsupported := unsupportedTopicKeys[k.name]
		if strings.Contains(row, "not supported") != unsupported {
			t.Errorf("row %q: not supported should be %v", row, unsupported)
		}
	}
}
