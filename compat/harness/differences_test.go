package harness

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadDifferences(t *testing.T) {
	in := "# header\n\ndeliberate kcat metadata kcat lists brokers its own way\ngap sarama txn.read_committed coordinator bug\n"
	got, err := ReadDifferences(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Differences{
		"kcat metadata":             {Kind: Deliberate, Reason: "kcat lists brokers its own way"},
		"sarama txn.read_committed": {Kind: Gap, Reason: "coordinator bug"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"gap kcat metadata\n",                        // no reason
		"maybe kcat metadata why\n",                  // unknown kind
		"gap kcat metadata a\ngap kcat metadata b\n", // twice
	} {
		if _, err := ReadDifferences(strings.NewReader(bad)); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

func TestCompareTargets(t *testing.T) {
	res := func(st Status, reason string) Result { return Result{Status: st, Reason: reason} }
	kafka := map[string]Result{
		"a same":     res(Pass, ""),
		"a unlisted": res(Pass, ""),
		"a listed":   res(Pass, ""),
		"a stale":    res(Fail, "x"),
		"a na":       res(NotApplicable, "no api"),
	}
	gregor := map[string]Result{
		"a same":     res(Pass, ""),
		"a unlisted": res(Fail, "boom"),
		"a listed":   res(Fail, "known"),
		"a stale":    res(Fail, "x"),
		"a na":       res(Fail, "no api here either"),
		"a only":     res(Fail, "kafka did not run it"),
	}
	listed := Differences{"a listed": {Gap, "known bug"}, "a stale": {Gap, "fixed since"}}
	d := CompareTargets(kafka, gregor, listed)
	want := TargetDiff{
		Unlisted: []string{
			"a na: Kafka n/a, Gregor fail (Kafka: no api; Gregor: no api here either)",
			"a unlisted: Kafka pass, Gregor fail (Kafka: -; Gregor: boom)",
		},
		Listed: []string{"a listed: Kafka pass, Gregor fail"},
		Stale:  []string{"a stale: both fail"},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
}

func TestCompareVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api-differences.tsv")
	if err := os.WriteFile(path, []byte("# c\n8\tOffsetCommit\tgap\tv10 later\n17\tSaslHandshake\tgap\tno SASL\n22\tInitProducerId\tdeliberate\tstale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	listed, err := ReadAPIDifferences(path)
	if err != nil {
		t.Fatal(err)
	}
	if listed[8] != (Difference{Gap, "v10 later"}) || len(listed) != 3 {
		t.Fatalf("read %+v", listed)
	}
	kafka := []APIVersion{{8, "OffsetCommit", 2, 10, ""}, {17, "SaslHandshake", 0, 1, ""}, {18, "ApiVersions", 0, 5, ""}, {22, "InitProducerId", 0, 6, ""}}
	gregor := []APIVersion{{8, "OffsetCommit", 0, 9, ""}, {18, "ApiVersions", 0, 4, ""}, {22, "InitProducerId", 0, 6, ""}, {99, "", 0, 0, ""}}
	unlisted, stale := CompareVersions(kafka, gregor, listed)
	wantUnlisted := []string{"key 18 (ApiVersions): Kafka 0-5, Gregor 0-4", "key 99 (99): Kafka -, Gregor 0"}
	wantStale := []string{"key 22 (InitProducerId): both 0-6"}
	if !reflect.DeepEqual(unlisted, wantUnlisted) || !reflect.DeepEqual(stale, wantStale) {
		t.Fatalf("unlisted %q stale %q", unlisted, stale)
	}
	for _, bad := range []string{"8\tOffsetCommit\tgap\n", "x\tA\tgap\twhy\n", "8\tA\tmaybe\twhy\n", "8\tA\tgap\ta\n8\tA\tgap\tb\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadAPIDifferences(path); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

func TestKafkaRelease(t *testing.T) {
	v, err := KafkaRelease("../java/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "4.") {
		t.Fatalf("release %q, want the 4.x the pom pins", v)
	}
}

func TestStartKafkaRefFailure(t *testing.T) {
	// A launcher that fails: the error carries what it printed.
	script := filepath.Join(t.TempDir(), "kafka-ref.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'node 1 exited while starting' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartKafkaRef(context.Background(), script, t.TempDir(), 1, map[string]string{"a": "b"})
	if err == nil || !strings.Contains(err.Error(), "node 1 exited") {
		t.Fatalf("start with a failing launcher: %v", err)
	}
	// One that prints no address is an error too.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := StartKafkaRef(context.Background(), script, t.TempDir(), 1, nil); err == nil {
		t.Fatal("a launcher that printed no address: no error")
	}
}

// TestCommittedLists reads the committed differences lists: each parses,
// and each line names a known client and scenario.
func TestCommittedLists(t *testing.T) {
	d, err := ReadDifferencesFile("../differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]bool{}
	for _, c := range Clients {
		clients[c.Name] = true
	}
	for key := range d {
		client, scenario, _ := strings.Cut(key, " ")
		if !clients[client] || ScenarioIndex(scenario) == len(Scenarios) {
			t.Errorf("differences.txt: %q names an unknown client or scenario", key)
		}
	}
	if _, err := ReadAPIDifferences("../api-differences.tsv"); err != nil {
		t.Fatal(err)
	}
}
