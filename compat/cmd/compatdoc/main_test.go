package main

import (
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/compat/harness"
)

func TestRender(t *testing.T) {
	rs := []harness.Result{
		{Client: "kcat", Scenario: "metadata", Status: harness.Pass},
		{Client: "kcat", Scenario: "topics.admin", Status: harness.NotApplicable, Reason: "kcat has no admin requests"},
		{Client: "sarama", Scenario: "txn.read_committed", Status: harness.Fail, Reason: "coordinator | not available"},
	}
	gregor := []harness.APIVersion{{Key: 0, Name: "Produce", Min: 3, Max: 11}, {Key: 18, Name: "ApiVersions", Min: 0, Max: 4}}
	kafka := []harness.APIVersion{{Key: 0, Name: "Produce", Min: 0, Max: 13}, {Key: 18, Name: "ApiVersions", Min: 0, Max: 4},
		{Key: 22, Name: "InitProducerId", Min: 0, Max: 5}}
	peers := []harness.SuiteSummary{{Suite: "franz-go/pkg/kgo", Passed: 7, Failed: 1, Skipped: 2}}
	page := render(rs, gregor, kafka, peers, "abc123")
	for _, want := range []string{
		"Gregor revision tested: `abc123`",
		"| metadata | not run | not run | not run | pass |",
		"| topics.admin | not run | not run | not run | n/a |",
		"- **sarama / txn.read_committed**: coordinator \\| not available",
		"| 0 | Produce | 3-11 | 0-13 | narrower than Kafka |",
		"| 18 | ApiVersions | 0-4 | 0-4 |  |",
		"| 22 | InitProducerId | - | 0-5 | not served yet |",
		"| franz-go/pkg/kgo | 7 | 1 | 2 |",
		"Gregor advertises 2 keys; 1 keys a Kafka 4.1 broker advertises are not served yet.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if render(rs, gregor, kafka, peers, "abc123") != page {
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
