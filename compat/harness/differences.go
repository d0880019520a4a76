package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// The kinds of a listed difference between Gregor and the Kafka
// reference.
const (
	// Deliberate: Gregor behaves otherwise on purpose, for the reason
	// given; it stays.
	Deliberate = "deliberate"
	// Gap: a known shortcoming of Gregor (a bug to fix); listed so that
	// the run names it instead of failing on it, and removed once fixed.
	Gap = "gap"
)

// Difference is one listed way Gregor's outcome may differ from Kafka's.
type Difference struct {
	Kind   string // Deliberate or Gap
	Reason string
}

// Differences maps a key ("client scenario", or an API key's number for
// the API-versions list) to its listed difference.
type Differences map[string]Difference

// ReadDifferences reads lines of "kind client scenario reason…" (kind
// deliberate or gap); blank lines and # comments are ignored. Every entry
// needs a reason.
func ReadDifferences(r io.Reader) (Differences, error) {
	out := Differences{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 4)
		if len(f) < 4 || strings.TrimSpace(f[3]) == "" {
			return nil, fmt.Errorf("differences line %d: %q is not \"kind client scenario reason\"", n, line)
		}
		if f[0] != Deliberate && f[0] != Gap {
			return nil, fmt.Errorf("differences line %d: kind %q, want %s or %s", n, f[0], Deliberate, Gap)
		}
		key := f[1] + " " + f[2]
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("differences line %d: %q listed twice", n, key)
		}
		out[key] = Difference{Kind: f[0], Reason: strings.TrimSpace(f[3])}
	}
	return out, sc.Err()
}

// ReadDifferencesFile reads a differences list; a missing file is an
// empty list.
func ReadDifferencesFile(path string) (Differences, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return Differences{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read differences: %w", err)
	}
	defer f.Close()
	d, err := ReadDifferences(f)
	if err != nil {
		return nil, fmt.Errorf("read differences %s: %w", path, err)
	}
	return d, nil
}

// TargetDiff is how Gregor's outcomes differ from the Kafka reference's
// in one run.
type TargetDiff struct {
	// Unlisted differ and are not in the differences list: the run fails.
	Unlisted []string
	// Listed differ as the list allows.
	Listed []string
	// Stale are listed but did not differ in this run (a fixed gap whose
	// line should go, or an outcome that flips between runs).
	Stale []string
}

// CompareTargets sets Gregor's results against Kafka's, key by key
// ("client scenario"), where both targets ran the key. Statuses differ
// when one passes and the other does not, or one is n/a and the other
// is not: a client failing the same way on both is the client's or the
// scenario's problem, not Gregor's.
func CompareTargets(kafka, gregor map[string]Result, listed Differences) TargetDiff {
	var d TargetDiff
	for key, g := range gregor {
		k, ok := kafka[key]
		if !ok {
			continue
		}
		_, isListed := listed[key]
		line := fmt.Sprintf("%s: Kafka %s, Gregor %s", key, k.Status, g.Status)
		switch {
		case k.Status != g.Status && isListed:
			d.Listed = append(d.Listed, line)
		case k.Status != g.Status:
			d.Unlisted = append(d.Unlisted, fmt.Sprintf("%s (Kafka: %s; Gregor: %s)", line,
				OneLine(orDash(k.Reason), 300), OneLine(orDash(g.Reason), 300)))
		case isListed:
			d.Stale = append(d.Stale, fmt.Sprintf("%s: both %s", key, k.Status))
		}
	}
	sort.Strings(d.Unlisted)
	sort.Strings(d.Listed)
	sort.Strings(d.Stale)
	return d
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ReadAPIDifferences reads the API-versions differences list: lines of
// "key<TAB>name<TAB>kind<TAB>reason", one per API key whose range Gregor
// advertises differently from the Kafka reference, keyed by the key's
// number.
func ReadAPIDifferences(path string) (map[int16]Difference, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[int16]Difference{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read api differences: %w", err)
	}
	out := map[int16]Difference{}
	for n, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 || strings.TrimSpace(f[3]) == "" {
			return nil, fmt.Errorf("%s line %d: want key, name, kind and reason separated by tabs", path, n+1)
		}
		key, err := strconv.ParseInt(f[0], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: key: %w", path, n+1, err)
		}
		if f[2] != Deliberate && f[2] != Gap {
			return nil, fmt.Errorf("%s line %d: kind %q, want %s or %s", path, n+1, f[2], Deliberate, Gap)
		}
		if _, dup := out[int16(key)]; dup {
			return nil, fmt.Errorf("%s line %d: key %d listed twice", path, n+1, key)
		}
		out[int16(key)] = Difference{Kind: f[2], Reason: strings.TrimSpace(f[3])}
	}
	return out, nil
}

// CompareVersions sets the ranges Gregor advertises against the Kafka
// reference's. A key whose range differs in any way (not served, fewer
// or more versions) must be listed with its reason: unlisted returns
// those that are not, stale the listed keys whose ranges are now equal.
func CompareVersions(kafka, gregor []APIVersion, listed map[int16]Difference) (unlisted, stale []string) {
	km := map[int16]APIVersion{}
	gm := map[int16]APIVersion{}
	keys := map[int16]bool{}
	for _, v := range kafka {
		km[v.Key] = v
		keys[v.Key] = true
	}
	for _, v := range gregor {
		gm[v.Key] = v
		keys[v.Key] = true
	}
	for k := range listed {
		keys[k] = true
	}
	var sorted []int16
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for _, k := range sorted {
		kv, ok := km[k]
		if !ok {
			kv = APIVersion{Key: k, Min: -1, Max: -1}
		}
		gv, ok := gm[k]
		if !ok {
			gv = APIVersion{Key: k, Min: -1, Max: -1}
		}
		_, isListed := listed[k]
		differ := kv.Min != gv.Min || kv.Max != gv.Max
		switch {
		case differ && !isListed:
			unlisted = append(unlisted, fmt.Sprintf("key %d (%s): Kafka %s, Gregor %s", k, nameFor(k, kv, gv), kv.Range(), gv.Range()))
		case !differ && isListed:
			stale = append(stale, fmt.Sprintf("key %d (%s): both %s", k, nameFor(k, kv, gv), kv.Range()))
		}
	}
	return unlisted, stale
}

func nameFor(k int16, a, b APIVersion) string {
	switch {
	case a.Name != "":
		return a.Name
	case b.Name != "":
		return b.Name
	}
	return strconv.Itoa(int(k))
}
