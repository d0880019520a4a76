package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is the outcome of one (client, scenario) or one peer test.
type Status string

// The statuses. NotApplicable is for a feature the client itself lacks
// (kcat has no admin API); a feature Gregor lacks is a Fail with a reason.
const (
	Pass          Status = "pass"
	Fail          Status = "fail"
	NotApplicable Status = "n/a"
	Skip          Status = "skip" // peer tests only: the test skipped itself
)

// ParseStatus reads a status word.
func ParseStatus(s string) (Status, error) {
	switch st := Status(s); st {
	case Pass, Fail, NotApplicable, Skip:
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q", s)
}

// The targets a scenario runs against: Apache Kafka itself (the
// reference, compat/kafka-ref) and Gregor.
const (
	TargetKafka  = "kafka"
	TargetGregor = "gregor"
)

// TargetIndex orders targets: the reference first.
func TargetIndex(t string) int {
	switch t {
	case TargetKafka:
		return 0
	case TargetGregor:
		return 1
	}
	return 2
}

// Result is one line of the table: a client's outcome in one scenario on
// one target.
type Result struct {
	// Target is the broker the scenario ran against: TargetKafka or
	// TargetGregor.
	Target   string
	Client   string
	Scenario string
	Status   Status
	Duration time.Duration
	// Reason says why a scenario failed or does not apply, or notes how
	// the client behaved when it passed.
	Reason string
}

// Key is the result's identity in the expected table and the differences
// list: the client and scenario, without the target.
func (r Result) Key() string { return r.Client + " " + r.Scenario }

// Recorder collects results from concurrently running clients.
type Recorder struct {
	mu      sync.Mutex
	results []Result
}

// Add records r.
func (rec *Recorder) Add(r Result) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.results = append(rec.results, r)
}

// Results returns what was recorded, ordered by client and scenario.
func (rec *Recorder) Results() []Result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := append([]Result(nil), rec.results...)
	SortResults(out)
	return out
}

// SortResults orders results by client, then by the scenario's position
// in Scenarios (unknown scenarios last, by name), then by target (Kafka
// before Gregor).
func SortResults(rs []Result) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Client != rs[j].Client {
			return rs[i].Client < rs[j].Client
		}
		a, b := ScenarioIndex(rs[i].Scenario), ScenarioIndex(rs[j].Scenario)
		if a != b {
			return a < b
		}
		if rs[i].Scenario != rs[j].Scenario {
			return rs[i].Scenario < rs[j].Scenario
		}
		return TargetIndex(rs[i].Target) < TargetIndex(rs[j].Target)
	})
}

// WriteResults writes results as tab-separated lines: target, client,
// scenario, status, seconds, reason (tabs and newlines in the reason
// become spaces).
func WriteResults(w io.Writer, rs []Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# target\tclient\tscenario\tstatus\tseconds\treason")
	for _, r := range rs {
		fmt.Fprintf(bw, "%s\t%s\t%s\t%s\t%.1f\t%s\n", r.Target, r.Client, r.Scenario, r.Status, r.Duration.Seconds(), OneLine(r.Reason, 400))
	}
	return bw.Flush()
}

// ReadResults reads what WriteResults wrote.
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 6)
		if len(f) < 5 {
			return nil, fmt.Errorf("results line %d: %d fields, want 6", n, len(f))
		}
		if TargetIndex(f[0]) > 1 {
			return nil, fmt.Errorf("results line %d: unknown target %q", n, f[0])
		}
		st, err := ParseStatus(f[3])
		if err != nil {
			return nil, fmt.Errorf("results line %d: %w", n, err)
		}
		secs, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("results line %d: seconds: %w", n, err)
		}
		res := Result{Target: f[0], Client: f[1], Scenario: f[2], Status: st, Duration: time.Duration(secs * float64(time.Second))}
		if len(f) == 6 {
			res.Reason = f[5]
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// ReadResultsFile reads a results file.
func ReadResultsFile(path string) ([]Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	rs, err := ReadResults(f)
	if err != nil {
		return nil, fmt.Errorf("read results %s: %w", path, err)
	}
	return rs, nil
}

// WriteResultsFile writes a results file.
func WriteResultsFile(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := WriteResults(f, rs); err != nil {
		f.Close()
		return fmt.Errorf("write results %s: %w", path, err)
	}
	return f.Close()
}

// OneLine flattens s to one line of at most max bytes.
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
