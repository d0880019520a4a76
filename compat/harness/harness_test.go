package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResultsRoundTrip(t *testing.T) {
	in := []Result{
		{Target: TargetKafka, Client: "kcat", Scenario: "metadata", Status: Pass, Duration: 1500 * time.Millisecond},
		{Target: TargetGregor, Client: "kcat", Scenario: "topics.admin", Status: NotApplicable, Reason: "no admin"},
		{Target: TargetGregor, Client: "sarama", Scenario: "txn.read_committed", Status: Fail, Duration: 20 * time.Second, Reason: "line one\n\tline two"},
	}
	var buf bytes.Buffer
	if err := WriteResults(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadResults(&buf)
	if err != nil {
		t.Fatal(err)
	}
	in[2].Reason = "line one line two" // flattened to one line
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

func TestReadResultsErrors(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"too few fields", "gregor\tkcat\tmetadata\tpass\n"},
		{"no target", "kcat\tmetadata\tpass\t1.0\t\n"},
		{"unknown target", "zk\tkcat\tmetadata\tpass\t1.0\t\n"},
		{"bad status", "gregor\tkcat\tmetadata\tok\t1.0\t\n"},
		{"bad seconds", "gregor\tkcat\tmetadata\tpass\tsoon\t\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadResults(strings.NewReader(tc.in)); err == nil {
				t.Fatalf("%q read without error", tc.in)
			}
		})
	}
}

func TestReadExpected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Expected
		wantErr bool
	}{
		{name: "ok", in: "# c\n\npass kcat metadata\nfail sarama txn.read_committed\n",
			want: Expected{"kcat metadata": Pass, "sarama txn.read_committed": Fail}},
		{name: "unknown status", in: "maybe kcat metadata\n", wantErr: true},
		{name: "no key", in: "pass\n", wantErr: true},
		{name: "duplicate", in: "pass a b\nfail a b\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadExpected(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	exp := Expected{"a x": Pass, "a y": Fail, "a z": Pass, "b x": Pass, "a n": NotApplicable}
	got := map[string]Status{"a x": Fail, "a y": Pass, "a new": Fail, "a n": Fail}
	d := Compare(exp, got, func(k string) bool { return strings.HasPrefix(k, "a ") })
	want := Diff{
		Regressed: []string{"a x: fail, expected pass"},
		Improved:  []string{"a y"},
		Changed:   []string{"a n: fail (expected n/a)", "a new: fail (expected not listed)"},
		Missing:   []string{"a z"}, // b x is out of scope
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("diff\n got %+v\nwant %+v", d, want)
	}
	if !d.Failed() {
		t.Fatal("a regression did not fail the diff")
	}
	if (Diff{Improved: []string{"x"}, Changed: []string{"y"}}).Failed() {
		t.Fatal("improvements alone failed the diff")
	}
	merged := Merge(exp, got)
	if merged["a x"] != Fail || merged["b x"] != Pass || merged["a new"] != Fail {
		t.Fatalf("merge: %v", merged)
	}
}

func TestExpectedFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "expected.txt")
	missing, err := ReadExpectedFile(path)
	if err != nil || len(missing) != 0 {
		t.Fatalf("missing file: %v %v, want empty", missing, err)
	}
	exp := Expected{"kafkajs bulk.100k": Pass, "kcat configs.alter": NotApplicable, "franz-go peer TestX": Skip}
	if err := WriteExpectedFile(path, "header\ntwo lines", exp); err != nil {
		t.Fatal(err)
	}
	got, err := ReadExpectedFile(path)
	if err != nil || !reflect.DeepEqual(got, exp) {
		t.Fatalf("read back %v %v, want %v", got, err, exp)
	}
}

func TestReadVersions(t *testing.T) {
	in := "# comment\n0\tProduce\t0\t13\tnote here\n4\tLeaderAndIsr\t-\t-\tremoved\n18\tApiVersions\t0\t4\n"
	got, err := ReadVersions(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []APIVersion{{0, "Produce", 0, 13, "note here"}, {4, "LeaderAndIsr", -1, -1, "removed"}, {18, "ApiVersions", 0, 4, ""}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got[0].Range() != "0-13" || got[1].Range() != "-" || (APIVersion{Min: 2, Max: 2}).Range() != "2" {
		t.Fatalf("ranges %q %q", got[0].Range(), got[1].Range())
	}
	for _, bad := range []string{"x\tP\t0\t1\n", "1\tP\t3\t1\n", "1\tP\t0\n"} {
		if _, err := ReadVersions(strings.NewReader(bad)); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

func TestSummariesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.tsv")
	in := []SuiteSummary{{Suite: "franz-go/pkg/kgo", Passed: 10, Failed: 2, Skipped: 3, Duration: 61 * time.Second, Note: "go test x"}}
	if err := WriteSummariesFile(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadSummariesFile(path)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("read back %+v %v, want %+v", out, err, in)
	}
	if _, err := ReadSummaries(strings.NewReader("s\t1\t-2\t0\t3\tx\n")); err == nil {
		t.Fatal("negative count read without error")
	}
	none, err := ReadSummariesFile(filepath.Join(t.TempDir(), "missing"))
	if err != nil || none != nil {
		t.Fatalf("missing file: %v %v", none, err)
	}
}

func TestScenarioIndex(t *testing.T) {
	ids := map[string]bool{}
	for i, s := range Scenarios {
		if ids[s.ID] {
			t.Errorf("scenario %s listed twice", s.ID)
		}
		ids[s.ID] = true
		if ScenarioIndex(s.ID) != i {
			t.Errorf("ScenarioIndex(%s) = %d, want %d", s.ID, ScenarioIndex(s.ID), i)
		}
	}
	if ScenarioIndex("nope") != len(Scenarios) {
		t.Error("an unknown scenario does not sort last")
	}
	rs := []Result{{Client: "b", Scenario: "metadata"}, {Client: "a", Scenario: "bulk.100k"},
		{Target: TargetGregor, Client: "a", Scenario: "metadata"}, {Target: TargetKafka, Client: "a", Scenario: "metadata"}}
	SortResults(rs)
	if got := strings.Join([]string{rs[0].Client, rs[0].Scenario, rs[0].Target, rs[1].Target, rs[2].Scenario, rs[3].Client}, " "); got != "a metadata kafka gregor bulk.100k b" {
		t.Fatalf("sorted %v", rs)
	}
}

func TestGregorStartFailure(t *testing.T) {
	// A binary that exits at once: Start reports it, with its log.
	bin := filepath.Join(t.TempDir(), "gregor")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho boom >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(bin, t.TempDir(), Options{StartTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("start of a failing binary: %v, want its log in the error", err)
	}
}
