// Command peers runs other projects' own integration tests against a
// real gregor: franz-go's pkg/kgo (cluster from KGO_SEEDS) and
// segmentio/kafka-go (a broker on localhost:9092), both from the Go
// module cache through `go test -json`. It writes each test's outcome,
// a per-suite summary for docs/compatibility.md, and fails only when a
// test that passes in peers-expected.txt does not pass now.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/compat/harness"
)

// suite is one peer project's test package and how to point it at gregor.
type suite struct {
	name    string
	pkg     string
	listen  string // fixed address the suite expects, or "" for any
	env     func(addr string) []string
	timeout time.Duration
	// isolate names tests that wait for a feature gregor lacks until
	// their deadline, or that crash their test binary: they run on their
	// own with isolateTimeout, so they are counted without holding up (or
	// taking down) the rest of the suite.
	isolate        []string
	isolateTimeout time.Duration
}

var suites = []suite{
	{
		name: "franz-go/pkg/kgo", pkg: "github.com/twmb/franz-go/pkg/kgo",
		env: func(addr string) []string {
			// One replica, and fewer records than its 500,000 default so
			// the suite fits its time bound on two cores.
			return []string{"KGO_SEEDS=" + addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=20000"}
		},
		timeout: 8 * time.Minute,
		// The transactional ETL waits on transactions until it times out.
		isolate: []string{"TestTxnEtl"}, isolateTimeout: 2 * time.Minute,
	},
	{
		name: "segmentio/kafka-go", pkg: "github.com/segmentio/kafka-go", listen: "localhost:9092",
		env:     func(string) []string { return nil },
		timeout: 6 * time.Minute,
		// TestReaderConsumerGroup's own getOffsets calls a nil connect
		// function and panics whenever a subtest gets that far, which
		// kills the test binary and every test after it: run alone.
		isolate: []string{"TestReaderConsumerGroup"}, isolateTimeout: 2 * time.Minute,
	},
}

const expectedHeader = `Peer suites' expected outcomes: "status suite test" (make compat-peers).
A test listed as pass that does not pass fails the run; the others are
known gaps. Regenerate with make compat-peers UPDATE=1.`

func main() {
	only := flag.String("suite", "", "run only the suite of this name")
	update := flag.Bool("update", false, "rewrite the expected file with this run's outcomes")
	expectedPath := flag.String("expected", "peers-expected.txt", "the expected outcomes")
	summaryPath := flag.String("summary", "peers-summary.tsv", "the per-suite summary to write")
	outPath := flag.String("out", "out/peers.tsv", "every test's outcome")
	bin := flag.String("gregor", "", "a gregor binary (default: build ../cmd/gregor)")
	flag.Parse()
	if err := run(*only, *update, *expectedPath, *summaryPath, *outPath, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(only string, update bool, expectedPath, summaryPath, outPath, bin string) error {
	work, err := os.MkdirTemp("", "gregor-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if bin == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		bin, err = harness.Build(ctx, "..", work, false)
		cancel()
		if err != nil {
			return err
		}
	}
	exp, err := harness.ReadExpectedFile(expectedPath)
	if err != nil {
		return err
	}
	got := map[string]harness.Status{}
	var summaries []harness.SuiteSummary
	var lines []string
	for _, s := range suites {
		if only != "" && s.name != only {
			continue
		}
		res, sum, err := runSuite(bin, work, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		summaries = append(summaries, sum)
		fmt.Printf("%s: %d passed, %d failed, %d skipped in %.0fs\n", s.name, sum.Passed, sum.Failed, sum.Skipped, sum.Duration.Seconds())
		for test, st := range res {
			got[s.name+" "+test] = st
			lines = append(lines, fmt.Sprintf("%s\t%s\t%s", s.name, test, st))
		}
	}
	sort.Strings(lines)
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(outPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if only == "" {
		if err := harness.WriteSummariesFile(summaryPath, summaries); err != nil {
			return err
		}
	}
	ran := map[string]bool{}
	for _, s := range summaries {
		ran[s.Suite] = true
	}
	d := harness.Compare(exp, got, func(key string) bool {
		for s := range ran {
			if strings.HasPrefix(key, s+" ") {
				return true
			}
		}
		return false
	})
	for _, k := range d.Improved {
		fmt.Printf("newly passing (make compat-peers UPDATE=1 records it): %s\n", k)
	}
	if update {
		return harness.WriteExpectedFile(expectedPath, expectedHeader, harness.Merge(exp, got))
	}
	if d.Failed() {
		for _, k := range d.Regressed {
			fmt.Printf("REGRESSION: %s\n", k)
		}
		for _, k := range d.Missing {
			fmt.Printf("REGRESSION (did not run): %s\n", k)
		}
		return fmt.Errorf("%d peer tests that passed before do not pass now", len(d.Regressed)+len(d.Missing))
	}
	// A go test line the CI log reader recognises.
	p, f, sk := 0, 0, 0
	for _, s := range summaries {
		p, f, sk = p+s.Passed, f+s.Failed, sk+s.Skipped
	}
	fmt.Printf("peers: %d passed, %d failed, %d skipped (failures are known gaps; no regression)\n", p, f, sk)
	return nil
}

// testEvent is the part of go test -json's events this reads.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// runSuite starts a gregor for the suite, runs its package's tests and
// returns each top-level test's outcome.
func runSuite(bin, work string, s suite) (map[string]harness.Status, harness.SuiteSummary, error) {
	sum := harness.SuiteSummary{Suite: s.name, Note: fmt.Sprintf("go test %s -timeout %v", s.pkg, s.timeout)}
	g, err := harness.Start(bin, work, harness.Options{Listen: s.listen})
	if err != nil {
		return nil, sum, err
	}
	defer g.Close()
	start := time.Now()
	res := map[string]harness.Status{}
	timedOut := false
	only := ""
	if len(s.isolate) > 0 {
		only = "^(" + strings.Join(s.isolate, "|") + ")$"
	}
	type pass struct {
		filter  []string
		timeout time.Duration
	}
	runs := []pass{{nil, s.timeout}}
	if only != "" {
		runs = []pass{{[]string{"-skip", only}, s.timeout}, {[]string{"-run", only}, s.isolateTimeout}}
	}
	for _, r := range runs {
		part, to, err := goTest(s.pkg, r.filter, r.timeout, s.env(g.Addr))
		if err != nil {
			return nil, sum, err
		}
		timedOut = timedOut || to
		for k, v := range part {
			res[k] = v
		}
	}
	sum.Duration = time.Since(start)
	if only != "" {
		sum.Note += fmt.Sprintf("; %s alone with -timeout %v", strings.Join(s.isolate, ", "), s.isolateTimeout)
	}
	for _, st := range res {
		switch st {
		case harness.Pass:
			sum.Passed++
		case harness.Fail:
			sum.Failed++
		case harness.Skip:
			sum.Skipped++
		}
	}
	if timedOut {
		sum.Note += "; hit its timeout (tests after it did not run)"
	}
	if err := g.Close(); err != nil {
		sum.Note += "; gregor: " + harness.OneLine(err.Error(), 200)
	}
	return res, sum, nil
}

// goTest runs go test -json on pkg with extra flags and environment and
// returns each top-level test's outcome and whether it hit its timeout.
func goTest(pkg string, flags []string, timeout time.Duration, env []string) (map[string]harness.Status, bool, error) {
	args := append([]string{"test", "-json", "-count=1", "-timeout", timeout.String()}, flags...)
	args = append(args, pkg)
	// Two minutes past its own timeout for the test binary to print its
	// panic before this kills it.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, false, err
	}
	res, timedOut := parseEvents(stdout)
	cmd.Wait()
	return res, timedOut, nil
}

// parseEvents reads go test -json output: the outcome of each top-level
// test, and whether the package hit its timeout.
func parseEvents(r io.Reader) (map[string]harness.Status, bool) {
	res := map[string]harness.Status{}
	timedOut := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if strings.Contains(ev.Output, "panic: test timed out") {
			timedOut = true
		}
		if ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			res[ev.Test] = harness.Pass
		case "fail":
			res[ev.Test] = harness.Fail
		case "skip":
			res[ev.Test] = harness.Skip
		case "run":
			if _, ok := res[ev.Test]; !ok {
				res[ev.Test] = harness.Fail // until it reports; a timeout leaves it so
			}
		}
	}
	return res, timedOut
}
