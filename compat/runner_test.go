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
	return []clientImpl{franzGo(), saramaClient(), kafkaGo(), kcatClient(), confluentPython(), confluentPython2(), kafkaPython(), aiokafkaPython(), kafkajs(), javaClient()}
}

// notApplicableError marks a scenario the client itself cannot express.
type notApplicableError struct{ why string }

func (e notApplicableError) Error() string { return e.why }

func notApplicable(why string) error { return notApplicableError{why} }

// env is what a scenario gets: two brokers of one target (two gregor
// processes, or the two Kafka references) and an out-of-band admin
// client for setting up and checking.
type env struct {
	client string
	// target is harness.TargetKafka or harness.TargetGregor.
	target string
	// addr is a broker with auto.create.topics.enable=true (the default).
	addr string
	// strict is a broker with auto.create.topics.enable=false.
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

// TestClients runs every client's scenarios against both targets, Gregor
// (each client against its own gregor processes) and the Apache Kafka
// reference (shared by every client), records one result per (target,
// client, scenario) and fails when a scenario that passes in expected.txt
// does not pass on Gregor now, or when Gregor's outcome differs from
// Kafka's and differences.txt does not list it.
func TestClients(t *testing.T) {
	exp, err := harness.ReadExpectedFile("expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	listed, err := harness.ReadDifferencesFile("differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Gregor's half runs first while the references' JVMs boot.
	targets := []string{harness.TargetGregor}
	if useKafka() {
		startKafkaRefs()
		targets = append(targets, harness.TargetKafka)
	}
	rec := &harness.Recorder{}
	ran := map[string]bool{} // "target client" pairs that ran, for the missing check
	t.Run("run", func(t *testing.T) {
		for _, tg := range targets {
			// One target at a time: fourteen clients at once on two cores
			// would turn the timing scenarios into a test of the machine.
			t.Run(tg, func(t *testing.T) {
				for _, c := range clientImpls() {
					t.Run(c.name, func(t *testing.T) {
						// Set here, not before t.Run: a client filtered out
						// by -run (TestClients/run/gregor/kcat/group.split)
						// did not run. The write precedes t.Parallel, so the
						// parent sees it.
						ran[tg+" "+c.name] = true
						t.Parallel()
						runClient(t, c, tg, rec, exp)
					})
				}
			})
		}
	})
	results := rec.Results()
	if *flagResults != "" {
		if err := harness.WriteResultsFile(*flagResults, results); err != nil {
			t.Error(err)
		}
	}
	got := map[string]harness.Status{}
	byTarget := map[string]map[string]harness.Result{harness.TargetKafka: {}, harness.TargetGregor: {}}
	// Only scenarios that were selected to run can be missing.
	selected := map[string]bool{}
	for _, r := range results {
		byTarget[r.Target][r.Key()] = r
		if r.Target == harness.TargetGregor {
			got[r.Key()] = r.Status
			selected[r.Scenario] = true
		}
	}
	d := harness.Compare(exp, got, func(key string) bool {
		client, scenario, _ := strings.Cut(key, " ")
		return ran[harness.TargetGregor+" "+client] && selected[scenario] && !testing.Short()
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
	if useKafka() {
		td := harness.CompareTargets(byTarget[harness.TargetKafka], byTarget[harness.TargetGregor], listed)
		for _, k := range td.Unlisted {
			t.Errorf("Gregor differs from Kafka and differences.txt does not list it: %s", k)
		}
		for _, k := range td.Listed {
			t.Logf("listed difference from Kafka: %s (%s: %s)", k, listed[keyOf(k)].Kind, listed[keyOf(k)].Reason)
		}
		for _, k := range td.Stale {
			t.Logf("listed in differences.txt but the same on both targets this run: %s", k)
		}
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

// keyOf is the "client scenario" key at the start of a comparison line.
func keyOf(line string) string {
	k, _, _ := strings.Cut(line, ":")
	return k
}

const expectedHeader = `The compatibility suite's expected outcomes: "status client scenario".
A scenario listed as pass that does not pass fails the run (make compat).
Regenerate with make compat UPDATE=1 after a change makes more pass; never
by hand to hide a regression.`

func runClient(t *testing.T, c clientImpl, target string, rec *harness.Recorder, exp harness.Expected) {
	e := &env{client: c.name, target: target}
	var logTail func(int) string
	switch target {
	case harness.TargetKafka:
		refs := kafkaReference(t)
		e.addr, e.strict, logTail = refs.main.Addr, refs.strict.Addr, refs.main.Tail
	default:
		main := startGregor(t, nil)
		strict := startGregor(t, map[string]string{"auto.create.topics.enable": "false"})
		e.addr, e.strict, logTail = main.Addr, strict.Addr, main.Tail
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	e.adm = kadm.NewClient(cl)
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
			t.Logf("RESULT %s %s %s %s %.1fs %s", res.Target, res.Client, res.Scenario, res.Status, res.Duration.Seconds(), res.Reason)
			// expected.txt holds Gregor's outcomes; Kafka's are judged
			// against Gregor's once both ran (TestClients).
			if target == harness.TargetGregor && exp[res.Key()] == harness.Pass && res.Status != harness.Pass {
				if unavailable != nil && os.Getenv("CI") == "" {
					t.Skipf("%s: %v (a failure in CI)", c.name, unavailable)
				}
				t.Errorf("regression: %s %s passed before, now %s: %s\ngregor log tail:\n%s",
					res.Client, res.Scenario, res.Status, res.Reason, logTail(1500))
			}
		})
	}
}

// storageErrorRE matches how the clients print KAFKA_STORAGE_ERROR (56).
var storageErrorRE = regexp.MustCompile(`(?i)storage.?error|disk error|KafkaStorage`)

func runScenario(e *env, c clientImpl, id string, unavailable error) harness.Result {
	res := harness.Result{Target: e.target, Client: c.name, Scenario: id}
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

// TestAPIVersions reads the ranges a running gregor advertises and, in
// a full run, the ranges the Kafka reference advertises, for the
// API-versions table of docs/compatibility.md (-compat.versions,
// -compat.kafka-versions). Every key whose range differs from Kafka's must
// be listed in api-differences.tsv with its reason.
func TestAPIVersions(t *testing.T) {
	if useKafka() {
		startKafkaRefs()
	}
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
	if !useKafka() {
		return
	}
	refs := kafkaReference(t)
	kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer kcancel()
	kvs, err := harness.QueryVersions(kctx, refs.main.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if *flagKafkaVer != "" {
		header := "API versions advertised by the Apache Kafka " + kafkaVersion() + " reference (compat/kafka-ref; generated by make compat)"
		if err := harness.WriteVersionsFile(*flagKafkaVer, header, kvs); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := harness.ReadAPIDifferences("api-differences.tsv")
	if err != nil {
		t.Fatal(err)
	}
	unlisted, stale := harness.CompareVersions(kvs, vs, listed)
	for _, u := range unlisted {
		t.Errorf("Gregor's range differs from Kafka's and api-differences.tsv does not list it: %s", u)
	}
	for _, s := range stale {
		t.Errorf("api-differences.tsv lists a key whose range is now Kafka's: %s (remove its line)", s)
	}
}

// kafkaVersion is the Apache Kafka release of the reference, as pinned
// in java/pom.xml.
func kafkaVersion() string {
	v, err := harness.KafkaRelease("java/pom.xml")
	if err != nil {
		return "(unknown)"
	}
	return v
}
