package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/compat/harness"
)

// scenarioFunc runs one scenario for one client. It returns a note on how
// the client behaved (kept with a pass), or an error: the failure's
// reason, or a notApplicable when the client lacks the feature.
type scenarioFunc func(ctx context.Context, e *env) (string, error)

// clientImpl is one client's implementation of the scenarios.
type clientImpl struct {
	name string
	// available says why the client cannot run on this machine (a tool
	// not installed), or nil.
	available func() error
	scenarios map[string]scenarioFunc
}

// clientImpls are the clients in the table's order.
func clientImpls() []clientImpl {
	return []clientImpl{franzGo(), saramaClient(), kafkaGo(), kcatClient(), confluentPython(), kafkaPython(), kafkajs(), javaClient()}
}

// notApplicableError marks a scenario the client itself cannot express.
type notApplicableError struct{ why string }

func (e notApplicableError) Error() string { return e.why }

func notApplicable(why string) error { return notApplicableError{why} }

// env is what a scenario gets: two gregor processes and an out-of-band
// admin client for setting up and checking.
type env struct {
	client string
	// addr is a gregor with auto.create.topics.enable=true (the default).
	addr string
	// strict is a gregor with auto.create.topics.enable=false.
	strict string
	adm    *kadm.Client
}

// topic is the topic a scenario uses; scripts get it on their command
// line, so the post-checks find it.
func (e *env) topic(scenario string) string {
	r := strings.NewReplacer(".", "-", "_", "-")
	return r.Replace(e.client + "-" + scenario)
}

// shortScenarios run under go test -short (make test): one quick pass
// through every client; make compat runs them all.
var shortScenarios = map[string]bool{
	"metadata": true, "produce.none": true, "produce.gzip": true, "produce.snappy": true,
	"produce.lz4": true, "produce.zstd": true, "edge.too_large": true,
}

func scenarioTimeout(id string) time.Duration {
	switch id {
	case "bulk.100k":
		return 4 * time.Minute
	case "group.resume", "txn.read_committed":
		return 75 * time.Second
	case "group.split":
		return 2 * time.Minute
	}
	return 90 * time.Second
}

// TestClients runs every client's scenarios, each client against its own
// gregor processes, records one result per (client, scenario) and fails
// when a scenario that passes in expected.txt does not pass now.
func TestClients(t *testing.T) {
	exp, err := harness.ReadExpectedFile("expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	rec := &harness.Recorder{}
	ran := map[string]bool{} // clients that ran, for the missing check
	t.Run("run", func(t *testing.T) {
		for _, c := range clientImpls() {
			t.Run(c.name, func(t *testing.T) {
				// Set here, not before t.Run: a client filtered out by
				// -run (TestClients/run/kcat/group.split) did not run.
				// The write precedes t.Parallel, so the parent sees it.
				ran[c.name] = true
				t.Parallel()
				runClient(t, c, rec, exp)
			})
		}
	})
	results := rec.Results()
	got := map[string]harness.Status{}
	for _, r := range results {
		got[r.Key()] = r.Status
	}
	if *flagResults != "" {
		if err := harness.WriteResultsFile(*flagResults, results); err != nil {
			t.Error(err)
		}
	}
	// Only scenarios that were selected to run can be missing.
	selected := map[string]bool{}
	for _, r := range results {
		selected[r.Scenario] = true
	}
	d := harness.Compare(exp, got, func(key string) bool {
		client, scenario, _ := strings.Cut(key, " ")
		return ran[client] && selected[scenario] && !testing.Short()
	})
	for _, k := range d.Improved {
		t.Logf("newly passing (run make compat UPDATE=1 to record): %s", k)
	}
	for _, k := range d.Changed {
		t.Logf("changed: %s", k)
	}
	for _, k := range d.Missing {
		t.Errorf("expected to pass but did not run: %s", k)
	}
	if *flagUpdate {
		if testing.Short() {
			t.Fatal("-compat.update needs the full run, not -short")
		}
		err := harness.WriteExpectedFile("expected.txt", expectedHeader, harness.Merge(exp, got))
		if err != nil {
			t.Fatal(err)
		}
	}
}

const expectedHeader = `The compatibility suite's expected outcomes: "status client scenario".
A scenario listed as pass that does not pass fails the run (make compat).
Regenerate with make compat UPDATE=1 after a change makes more pass; never
by hand to hide a regression.`

func runClient(t *testing.T, c clientImpl, rec *harness.Recorder, exp harness.Expected) {
	main := startGregor(t, nil)
	strict := startGregor(t, map[string]string{"auto.create.topics.enable": "false"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(main.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	e := &env{client: c.name, addr: main.Addr, strict: strict.Addr, adm: kadm.NewClient(cl)}
	var unavailable error
	if c.available != nil {
		unavailable = c.available()
	}
	for _, s := range harness.Scenarios {
		t.Run(s.ID, func(t *testing.T) {
			if testing.Short() && !shortScenarios[s.ID] {
				t.Skip("not in -short")
			}
			res := runScenario(e, c, s.ID, unavailable)
			rec.Add(res)
			t.Logf("RESULT %s %s %s %.1fs %s", res.Client, res.Scenario, res.Status, res.Duration.Seconds(), res.Reason)
			if exp[res.Key()] == harness.Pass && res.Status != harness.Pass {
				if unavailable != nil && os.Getenv("CI") == "" {
					t.Skipf("%s: %v (a failure in CI)", c.name, unavailable)
				}
				t.Errorf("regression: %s %s passed before, now %s: %s\ngregor log tail:\n%s",
					res.Client, res.Scenario, res.Status, res.Reason, main.Tail(1500))
			}
		})
	}
}

// storageErrorRE matches how the clients print KAFKA_STORAGE_ERROR (56).
var storageErrorRE = regexp.MustCompile(`(?i)storage.?error|disk error|KafkaStorage`)

func runScenario(e *env, c clientImpl, id string, unavailable error) harness.Result {
	res := harness.Result{Client: c.name, Scenario: id}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	fn := c.scenarios[id]
	switch {
	case unavailable != nil:
		res.Status, res.Reason = harness.Fail, unavailable.Error()
		return res
	case fn == nil:
		res.Status, res.Reason = harness.Fail, "scenario not written for this client"
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout(id))
	defer cancel()
	note, err := guarded(ctx, fn, e)
	if err == nil {
		var more string
		more, err = postCheck(ctx, e, id)
		note += more
	}
	// Whatever the client shows of a deleted topic, a storage error is
	// wrong: Kafka answers UNKNOWN_TOPIC_OR_PARTITION (or UNKNOWN_TOPIC_ID).
	if err == nil && id == "edge.topic_deleted" && storageErrorRE.MatchString(note) {
		err = fmt.Errorf("the broker answered KAFKA_STORAGE_ERROR for the deleted topic's partition, where Kafka answers UNKNOWN_TOPIC_OR_PARTITION: %s", note)
	}
	var na notApplicableError
	switch {
	case errors.As(err, &na):
		res.Status, res.Reason = harness.NotApplicable, na.why
	case err != nil:
		res.Status, res.Reason = harness.Fail, err.Error()
	default:
		res.Status, res.Reason = harness.Pass, note
	}
	res.Duration = time.Since(start)
	return res
}

// guarded runs fn, turning a panic into an error and giving up 15 s after
// ctx ends if the client ignores its context (the goroutine is left).
func guarded(ctx context.Context, fn scenarioFunc, e *env) (string, error) {
	type out struct {
		note string
		err  error
	}
	ch := make(chan out, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- out{err: fmt.Errorf("client panicked: %v\n%s", p, debug.Stack())}
			}
		}()
		n, err := fn(ctx, e)
		ch <- out{n, err}
	}()
	select {
	case o := <-ch:
		return o.note, o.err
	case <-ctx.Done():
		select {
		case o := <-ch:
			return o.note, o.err
		case <-time.After(15 * time.Second):
			return "", fmt.Errorf("client hung past the scenario's deadline: %w", ctx.Err())
		}
	}
}

// TestAPIVersions reads the ranges a running gregor advertises, for the
// API-versions table of docs/compatibility.md (-compat.versions).
func TestAPIVersions(t *testing.T) {
	g := startGregor(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := harness.QueryVersions(ctx, g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("gregor advertised no API keys")
	}
	for _, v := range vs {
		if v.Key == 18 && (v.Min != 0 || v.Max < 3) {
			t.Errorf("ApiVersions advertised as %s, want 0-3 or more", v.Range())
		}
	}
	if *flagVersions != "" {
		if err := harness.WriteVersionsFile(*flagVersions, "API versions advertised by gregor (generated by make compat)", vs); err != nil {
			t.Fatal(err)
		}
	}
}
