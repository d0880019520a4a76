package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// SuiteSummary is one peer suite's counts from its last run.
type SuiteSummary struct {
	Suite                   string
	Passed, Failed, Skipped int
	Duration                time.Duration
	// Note says how the suite was run (its packages, -run and -timeout).
	Note string
}

// ReadSummaries reads tab-separated suite, passed, failed, skipped,
// seconds and note lines (# comments allowed).
func ReadSummaries(r io.Reader) ([]SuiteSummary, error) {
	var out []SuiteSummary
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 6)
		if len(f) < 5 {
			return nil, fmt.Errorf("summary line %d: %d fields, want 6", n, len(f))
		}
		var nums [3]int
		for i := range nums {
			v, err := strconv.Atoi(f[1+i])
			if err != nil || v < 0 {
				return nil, fmt.Errorf("summary line %d: count %q", n, f[1+i])
			}
			nums[i] = v
		}
		secs, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("summary line %d: seconds: %w", n, err)
		}
		s := SuiteSummary{Suite: f[0], Passed: nums[0], Failed: nums[1], Skipped: nums[2], Duration: time.Duration(secs * float64(time.Second))}
		if len(f) == 6 {
			s.Note = f[5]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// ReadSummariesFile reads a summary file; a missing file is no suites.
func ReadSummariesFile(path string) ([]SuiteSummary, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read summaries: %w", err)
	}
	defer f.Close()
	s, err := ReadSummaries(f)
	if err != nil {
		return nil, fmt.Errorf("read summaries %s: %w", path, err)
	}
	return s, nil
}

// WriteSummariesFile writes summaries in the format ReadSummaries reads.
func WriteSummariesFile(path string, ss []SuiteSummary) error {
	var b strings.Builder
	b.WriteString("# peer suites' last run (make compat-peers): suite, passed, failed, skipped, seconds, how\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "%s\t%d\t%d\t%d\t%.0f\t%s\n", s.Suite, s.Passed, s.Failed, s.Skipped, s.Duration.Seconds(), OneLine(s.Note, 300))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write summaries: %w", err)
	}
	return nil
}
