package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Expected is the committed table of outcomes: key ("client scenario" or
// "suite test") to status. A key that passed there and does not pass now
// is a regression, which fails the run.
type Expected map[string]Status

// ReadExpected reads lines of "status key…" (the key may hold spaces);
// blank lines and lines starting with # are ignored.
func ReadExpected(r io.Reader) (Expected, error) {
	exp := Expected{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, key, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, fmt.Errorf("expected line %d: %q is not \"status key\"", n, line)
		}
		st, err := ParseStatus(word)
		if err != nil {
			return nil, fmt.Errorf("expected line %d: %w", n, err)
		}
		key = strings.TrimSpace(key)
		if _, dup := exp[key]; dup {
			return nil, fmt.Errorf("expected line %d: %q listed twice", n, key)
		}
		exp[key] = st
	}
	return exp, sc.Err()
}

// ReadExpectedFile reads an expected file; a missing file is an empty
// table, so a first run records everything as new.
func ReadExpectedFile(path string) (Expected, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return Expected{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read expected: %w", err)
	}
	defer f.Close()
	exp, err := ReadExpected(f)
	if err != nil {
		return nil, fmt.Errorf("read expected %s: %w", path, err)
	}
	return exp, nil
}

// WriteExpectedFile writes exp sorted by key under a header comment.
func WriteExpectedFile(path, header string, exp Expected) error {
	keys := make([]string, 0, len(exp))
	for k := range exp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		fmt.Fprintf(&b, "# %s\n", line)
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", exp[k], k)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write expected: %w", err)
	}
	return nil
}

// Diff is how a run differs from the expected table.
type Diff struct {
	// Regressed passed before and does not now: the run fails.
	Regressed []string
	// Improved did not pass before (or was not listed) and passes now.
	Improved []string
	// Changed moved between fail, n/a and skip, or is new and not passing.
	Changed []string
	// Missing is listed as passing but was not run at all: a regression
	// too, or a renamed scenario whose expected line must be updated.
	Missing []string
}

// Compare sets got against exp. Only the keys got names are judged, plus
// exp's passing keys within the prefixes of keys that ran (so a subset run
// of one client does not report every other client as missing).
func Compare(exp Expected, got map[string]Status, scope func(key string) bool) Diff {
	var d Diff
	for k, st := range got {
		was, listed := exp[k]
		switch {
		case was == Pass && st != Pass:
			d.Regressed = append(d.Regressed, fmt.Sprintf("%s: %s, expected pass", k, st))
		case st == Pass && was != Pass:
			d.Improved = append(d.Improved, k)
		case !listed || was != st:
			d.Changed = append(d.Changed, fmt.Sprintf("%s: %s (expected %s)", k, st, orNone(was)))
		}
	}
	for k, was := range exp {
		if _, ran := got[k]; !ran && was == Pass && (scope == nil || scope(k)) {
			d.Missing = append(d.Missing, k)
		}
	}
	sort.Strings(d.Regressed)
	sort.Strings(d.Improved)
	sort.Strings(d.Changed)
	sort.Strings(d.Missing)
	return d
}

// Failed reports whether the diff fails the run.
func (d Diff) Failed() bool { return len(d.Regressed) > 0 || len(d.Missing) > 0 }

// Merge returns exp updated with got: the new expected table.
func Merge(exp Expected, got map[string]Status) Expected {
	out := Expected{}
	for k, v := range exp {
		out[k] = v
	}
	for k, v := range got {
		out[k] = v
	}
	return out
}

func orNone(s Status) string {
	if s == "" {
		return "not listed"
	}
	return string(s)
}
