package config

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md from the key table")

// TestConfigurationDoc fails when docs/configuration.md is not what the
// key table generates; -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "configuration.md")
	want := SettingsTable()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with go test ./config -run TestConfigurationDoc -update)", err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./config -run TestConfigurationDoc -update", path)
	}
	for _, k := range brokerKeys {
		if !strings.Contains(want, "| `"+k.name+"` |") {
			t.Errorf("%s missing from the table", k.name)
		}
	}
}

func TestUnsupportedKeysAreKnown(t *testing.T) {
	for name := range unsupportedKeys {
		if _, ok := brokerKeyIndex[name]; !ok {
			t.Errorf("unsupportedKeys names %s, which is not a broker key", name)
		}
	}
}

func TestUnsupportedSettingsNamesOnlyWhatIsSet(t *testing.T) {
	b, _, err := Parse(map[string]string{"num.io.threads": "16", "broker.rack": "r1", "fetch.max.bytes": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range b.UnsupportedSettings() {
		names = append(names, u.Name+"="+u.Value)
		if u.Why == "" {
			t.Errorf("%s has no reason", u.Name)
		}
	}
	if want := []string{"broker.rack=r1", "num.io.threads=16"}; !slices.Equal(names, want) {
		t.Fatalf("UnsupportedSettings = %v, want %v", names, want)
	}
	if d := Default().UnsupportedSettings(); len(d) != 0 {
		t.Fatalf("the defaults name %v", d)
	}
}
