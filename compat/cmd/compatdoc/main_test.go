package main

import (
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/compat/harness"
)

func TestRender(t *testing.T) {
	rs := []harness.Result{
		{Target: harness.TargetKafka, Client: "kcat", Scenario: "metadata", Status: harness.Pass},
		{Target: harness.TargetGregor, Client: "kcat", Scenario: "metadata", Status: harness.Pass},
		{Target: harness.TargetKafka, Client: "kcat", Scenario: "topics.admin", Status: harness.NotApplicable, Reason: "kcat has no admin requests"},
		{Target: harness.TargetGregor, Client: "kcat", Scenario: "topics.admin", Status: harness.NotApplicable, Reason: "kcat has no admin requests"},
		{Target: harness.TargetKafka, Client: "sarama", Scenario: "txn.read_committed", Status: harness.Pass},
		{Target: harness.TargetGregor, Client: "sarama", Scenario: "txn.read_committed", Status: harness.Fail, Reason: "coordinator | not available"},
		{Target: harness.TargetKafka, Client: "sarama", Scenario: "group.split", Status: harness.Fail, Reason: "rebalanced"},
		{Target: harness.TargetGregor, Client: "sarama", Scenario: "group.split", Status: harness.Pass},
	}
	in := inputs{
		results: rs,
		gregor:  []harness.APIVersion{{Key: 0, Name: "Produce", Min: 3, Max: 11}, {Key: 18, Name: "ApiVersions", Min: 0, Max: 4}},
		kafka: []harness.APIVersion{{Key: 0, Name: "Produce", Min: 0, Max: 13}, {Key: 18, Name: "ApiVersions", Min: 0, Max: 4},
			{Key: 22, Name: "InitProducerId", Min: 0, Max: 5}},
		release:  "4.4.0",
		apiDiffs: map[int16]harness.Difference{0: {Kind: harness.Gap, Reason: "v12-13 | later"}},
		diffs:    harness.Differences{"sarama txn.read_committed": {Kind: harness.Gap, Reason: "coordinator bug"}},
		peers:    []harness.SuiteSummary{{Suite: "franz-go/pkg/kgo", Passed: 7, Failed: 1, Skipped: 2}},
		rev:      "abc123",
	}
	page := render(in)
	for _, want := range []string{
		"Gregor revision tested: `abc123`. Reference: Apache Kafka 4.4.0.",
		"| scenario | franz-go Kafka | franz-go Gregor | sarama Kafka | sarama Gregor |",
		"| metadata | not run | not run | not run | not run | not run | not run | pass | pass |",
		"| topics.admin | not run | not run | not run | not run | not run | not run | n/a | n/a |",
		"| txn.read_committed | not run | not run | pass | **fail** |",
		"| group.split | not run | not run | fail | **pass** |",
		"- **sarama / txn.read_committed** (gap: coordinator bug). Kafka: pass. Gregor: fail (coordinator \\| not available).",
		"- **sarama / group.split** (**not listed in differences.txt**). Kafka: fail (rebalanced). Gregor: pass.",
		"- **sarama / txn.read_committed** on Gregor: coordinator \\| not available",
		"- kcat / topics.admin on Kafka (n/a): kcat has no admin requests",
		"| key | API | Gregor | Kafka 4.4.0 | note |",
		"| 0 | Produce | 3-11 | 0-13 | narrower than Kafka (gap): v12-13 \\| later |",
		"| 18 | ApiVersions | 0-4 | 0-4 |  |",
		"| 22 | InitProducerId | - | 0-5 | not served (not listed) |",
		"| franz-go/pkg/kgo | 7 | 1 | 2 |",
		"Gregor advertises 2 keys; 1 keys Kafka 4.4.0 advertises are not served.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if render(in) != page {
		t.Error("render is not deterministic")
	}
}

func TestRenderPeerFailures(t *testing.T) {
	exp := harness.Expected{"s TestA": harness.Pass, "s TestB": harness.Fail, "s TestC": harness.Fail}
	got := renderPeerFailures(exp, map[string]string{"s TestB": "needs SASL | on 9093"})
	want := "\n## Peer tests that fail\n\n- s TestB: needs SASL \\| on 9093\n- s TestC: not yet explained\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if renderPeerFailures(harness.Expected{"s TestA": harness.Pass}, nil) != "" {
		t.Fatal("a list without failures")
	}
}
