package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// perfResult is the part of `gregor perf --json` the comparison reads.
type perfResult struct {
	Mode    string  `json:"mode"`
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MiBPerS float64 `json:"mb_per_sec"` // perf's MB is 2^20 bytes, as Kafka's perf tools'
	Latency *struct {
		P50  float64 `json:"p50"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p999"`
	} `json:"latency_ms"`
	Consume *struct {
		Verified bool `json:"verified"`
	} `json:"consume"`
	E2E *struct {
		Verified bool `json:"verified"`
	} `json:"e2e"`
}

// parsePerfJSON reads the one JSON object `gregor perf ... --json` prints
// on stdout and checks that it is the mode asked for and that the run
// verified what it read.
func parsePerfJSON(out []byte, mode string) (perfResult, error) {
	var r perfResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return r, fmt.Errorf("parse perf output %q: %w", truncate(out, 200), err)
	}
	switch {
	case r.Mode != mode:
		return r, fmt.Errorf("perf output is mode %q, want %q", r.Mode, mode)
	case r.Records <= 0 || r.Bytes <= 0 || r.Seconds <= 0:
		return r, fmt.Errorf("perf %s output measured nothing: %d records, %d bytes in %g s", mode, r.Records, r.Bytes, r.Seconds)
	case mode == "consume" && (r.Consume == nil || !r.Consume.Verified):
		return r, errors.New("perf consume output: records not verified")
	case mode == "e2e" && (r.E2E == nil || !r.E2E.Verified || r.Latency == nil):
		return r, errors.New("perf e2e output: records not verified or no latency")
	}
	return r, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// cpuTicks reads a process's user plus system CPU time, in clock ticks,
// from the text of /proc/<pid>/stat: fields 14 and 15, counted after the
// command name, which is in parentheses and may itself hold spaces and
// parentheses (hence the last ')').
func cpuTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat %q: no command name", truncate([]byte(stat), 80))
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat stime: %w", err)
	}
	return utime + stime, nil
}

// rssKiB reads VmRSS, in KiB, from the text of /proc/<pid>/status.
func rssKiB(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("parse VmRSS line %q", strings.TrimSpace(line))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// loadAvg reads the 1-minute load average from the text of /proc/loadavg.
func loadAvg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, fmt.Errorf("parse /proc/loadavg %q", s)
	}
	return strconv.ParseFloat(f[0], 64)
}

// sample is one broker's figures for one case in one round.
type sample struct {
	Broker string
	Case   string
	Round  int
	MiBPS  float64
	CPUSec float64 // broker CPU seconds over the run
	GiB    float64 // bytes the run moved, in GiB
	RSSMiB float64 // broker resident memory right after the run
	P50    float64 // ms; end-to-end cases only
	P99    float64
	P999   float64
}

// CPUPerGiB is the broker's CPU seconds per GiB moved.
func (s sample) CPUPerGiB() float64 {
	if s.GiB <= 0 {
		return 0
	}
	return s.CPUSec / s.GiB
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio is a/b, or NaN when either is missing or b is zero.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

// summary is the medians of one broker's samples of one case.
type summary struct {
	N         int
	MiBPS     float64
	CPUPerGiB float64
	RSSMiB    float64
	P50       float64
	P99       float64
	P999      float64
}

// summarize takes the medians over rounds of every (case, broker).
func summarize(samples []sample) map[string]map[string]summary {
	type key struct{ c, b string }
	groups := map[key][]sample{}
	for _, s := range samples {
		k := key{s.Case, s.Broker}
		groups[k] = append(groups[k], s)
	}
	out := map[string]map[string]summary{}
	for k, ss := range groups {
		pick := func(f func(sample) float64) float64 {
			xs := make([]float64, len(ss))
			for i, s := range ss {
				xs[i] = f(s)
			}
			return median(xs)
		}
		if out[k.c] == nil {
			out[k.c] = map[string]summary{}
		}
		out[k.c][k.b] = summary{
			N:         len(ss),
			MiBPS:     pick(func(s sample) float64 { return s.MiBPS }),
			CPUPerGiB: pick(sample.CPUPerGiB),
			RSSMiB:    pick(func(s sample) float64 { return s.RSSMiB }),
			P50:       pick(func(s sample) float64 { return s.P50 }),
			P99:       pick(func(s sample) float64 { return s.P99 }),
			P999:      pick(func(s sample) float64 { return s.P999 }),
		}
	}
	return out
}

// fmtNum formats a figure for the table: "—" when missing.
func fmtNum(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

// fmtRatio formats a ratio as "1.23×", "—" when missing.
func fmtRatio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "×"
}

// machine describes where and under what load a run happened.
type machine struct {
	CPUs      int
	Model     string
	LoadStart float64
	LoadEnd   float64
	LoadMax   float64 // the highest 1-minute load seen before any measurement
}

// loadWarning says why the figures are not those of a quiet machine, or
// "" when they are: a 1-minute load average above half the cores before
// the run means other work was running; at the end the run's own client
// and broker account for about one load per core, so the bound is 1.5×.
func (m machine) loadWarning() string {
	var why []string
	if m.LoadStart > 0.5*float64(m.CPUs) {
		why = append(why, fmt.Sprintf("%.2f at the start", m.LoadStart))
	}
	if m.LoadMax > 1.5*float64(m.CPUs) {
		why = append(why, fmt.Sprintf("up to %.2f between measurements", m.LoadMax))
	}
	if m.LoadEnd > 1.5*float64(m.CPUs) {
		why = append(why, fmt.Sprintf("%.2f at the end", m.LoadEnd))
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: load average %s on %d cores: other work shared the machine, so these figures are under load and only their ratios within this run mean anything.",
		strings.Join(why, ", "), m.CPUs)
}

// brokerLabels are the tables' column names of the brokers.
var brokerLabels = map[string]string{"gregor": "gregor", "kafka": "Kafka", "kfake": "kfake"}

// renderMarkdown writes the run's tables: the medians per case and
// broker, then gregor's ratios to Kafka and to kfake.
func renderMarkdown(r runInfo, cases []benchCase, brokers []string, sum map[string]map[string]summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s, %s: gregor %s, Apache Kafka %s (compat/kafka-ref, one KRaft combined node, %s), kfake %s (compat/cmd/kfakeserver, data persisted to disk).\n\n",
		r.When, r.Form, r.GregorRev, r.KafkaVersion, r.KafkaHeap, r.KfakeVersion)
	fmt.Fprintf(&b, "Machine: %d cores, %s; load average %.2f at the start, %.2f at the end (highest before a measurement %.2f).\n\n",
		r.Machine.CPUs, r.Machine.Model, r.Machine.LoadStart, r.Machine.LoadEnd, r.Machine.LoadMax)
	if w := r.Machine.loadWarning(); w != "" {
		fmt.Fprintf(&b, "**%s**\n\n", w)
	}
	fmt.Fprintf(&b, "Medians of %d round(s), brokers alternating in each round; 1 KiB records, every record acknowledged (acks=all, idempotent) or read back and verified. CPU is the broker process's user+system time (/proc/<pid>/stat) over the run, per GiB moved; RSS is its resident memory after the run.\n\n", r.Rounds)
	b.WriteString("| case | broker | MiB/s | CPU s/GiB | RSS MiB | p50 ms | p99 ms | p99.9 ms |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cases {
		for _, br := range brokers {
			s, ok := sum[c.Name][br]
			if !ok {
				continue
			}
			lat := func(x float64) string {
				if c.Kind != "e2e" {
					return ""
				}
				return fmtNum(x, 2)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Title(), brokerLabels[br],
				fmtNum(s.MiBPS, 1), fmtNum(s.CPUPerGiB, 2), fmtNum(s.RSSMiB, 0), lat(s.P50), lat(s.P99), lat(s.P999))
		}
	}
	b.WriteString("\nRatios, gregor over the other broker (MiB/s: above 1 is better; CPU per GiB and latency: below 1 is better):\n\n")
	b.WriteString("| case | MiB/s vs Kafka | MiB/s vs kfake | CPU/GiB vs Kafka | CPU/GiB vs kfake | p99 vs Kafka | p99 vs kfake | p99.9 vs Kafka | p99.9 vs kfake |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cases {
		g, ok := sum[c.Name]["gregor"]
		if !ok {
			continue
		}
		other := func(br string) summary {
			if s, ok := sum[c.Name][br]; ok {
				return s
			}
			nan := math.NaN()
			return summary{MiBPS: nan, CPUPerGiB: nan, P99: nan, P999: nan}
		}
		k, f := other("kafka"), other("kfake")
		lat := func(a, b float64) string {
			if c.Kind != "e2e" {
				return ""
			}
			return fmtRatio(ratio(a, b))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Title(),
			fmtRatio(ratio(g.MiBPS, k.MiBPS)), fmtRatio(ratio(g.MiBPS, f.MiBPS)),
			fmtRatio(ratio(g.CPUPerGiB, k.CPUPerGiB)), fmtRatio(ratio(g.CPUPerGiB, f.CPUPerGiB)),
			lat(g.P99, k.P99), lat(g.P99, f.P99), lat(g.P999, k.P999), lat(g.P999, f.P999))
	}
	b.WriteString(renderLatencyTargets(cases, sum))
	b.WriteString("\nCommands (the topic is created beforehand, outside the measured interval; `<broker>` is each broker's bootstrap address):\n\n```\n")
	b.WriteString(r.Command + "\n")
	for _, c := range cases {
		with := ""
		if c.Durable {
			with = " with flush.messages=1 (on kfake without)"
		}
		fmt.Fprintf(&b, "# %s: a topic of %d partitions%s\n", c.Title(), c.Partitions, with)
		b.WriteString(strings.Join(c.perfArgs("<broker>", "<topic>", "gregor"), " ") + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// renderLatencyTargets is the table of the e2e cases that have targets:
// each broker's median p50 / p99 / p99.9 and whether gregor's meet the
// target ("" when no case has one).
func renderLatencyTargets(cases []benchCase, sum map[string]map[string]summary) string {
	var b strings.Builder
	for _, c := range cases {
		g, ok := sum[c.Name]["gregor"]
		if c.Kind != "e2e" || c.TargetP99 <= 0 || !ok {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nEnd-to-end latency targets (issue 17), p50 / p99 / p99.9 in ms, medians over the rounds; a case is met only if gregor kept the offered rate (at least 95% of its MiB/s):\n\n")
			b.WriteString("| case | gregor | Kafka | kfake | target | met |\n")
			b.WriteString("|---|---:|---:|---:|---|---|\n")
		}
		lat := func(br string) string {
			s, ok := sum[c.Name][br]
			if !ok {
				return "—"
			}
			return fmt.Sprintf("%s / %s / %s", fmtNum(s.P50, 2), fmtNum(s.P99, 2), fmtNum(s.P999, 2))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Title(), lat("gregor"), lat("kafka"), lat("kfake"),
			c.targetText(), latencyVerdict(c, g, sum[c.Name]))
	}
	return b.String()
}

// targetText states the case's latency target.
func (c benchCase) targetText() string {
	t := "p99 ≤ " + fmtNum(c.TargetP99, 0) + " ms"
	if c.TargetP999 > 0 {
		t += ", p99.9 ≤ " + fmtNum(c.TargetP999, 0) + " ms"
	}
	if c.BelowKafka {
		t += ", below Kafka's"
	}
	return t
}

// latencyVerdict is "yes" when gregor's medians g meet the case's target,
// else "no: " and every reason; of is the case's summaries by broker.
func latencyVerdict(c benchCase, g summary, of map[string]summary) string {
	var why []string
	if offered := c.Rate * 1024 / (1 << 20); !(g.MiBPS >= 0.95*offered) {
		why = append(why, fmt.Sprintf("kept %s of %s MiB/s", fmtNum(g.MiBPS, 1), fmtNum(offered, 1)))
	}
	if !(g.P99 <= c.TargetP99) {
		why = append(why, fmt.Sprintf("p99 %s > %s", fmtNum(g.P99, 2), fmtNum(c.TargetP99, 0)))
	}
	if c.TargetP999 > 0 && !(g.P999 <= c.TargetP999) {
		why = append(why, fmt.Sprintf("p99.9 %s > %s", fmtNum(g.P999, 2), fmtNum(c.TargetP999, 0)))
	}
	if c.BelowKafka {
		k, ok := of["kafka"]
		switch {
		case !ok:
			why = append(why, "no Kafka figure to compare")
		default:
			if !(g.P99 < k.P99) {
				why = append(why, fmt.Sprintf("p99 not below Kafka's %s", fmtNum(k.P99, 2)))
			}
			if !(g.P999 < k.P999) {
				why = append(why, fmt.Sprintf("p99.9 not below Kafka's %s", fmtNum(k.P999, 2)))
			}
		}
	}
	if len(why) == 0 {
		return "yes"
	}
	return "no: " + strings.Join(why, "; ")
}

// Markers delimit the generated section of docs/performance.md.
const (
	beginMarker = "<!-- bench-compare:begin (generated by make bench-compare; edits between the markers are lost) -->"
	endMarker   = "<!-- bench-compare:end -->"
)

// splice replaces what lies between the markers of doc with section.
func splice(doc, section string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < 0 || j < i {
		return "", errors.New("the document has no bench-compare markers (or they are out of order)")
	}
	if strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
		return "", errors.New("the document has more than one pair of bench-compare markers")
	}
	return doc[:i+len(beginMarker)] + "\n" + strings.TrimSpace(section) + "\n" + doc[j:], nil
}

// checkCPURatio returns an error for every produce case in which gregor's
// median CPU per GiB exceeds bound times kfake's in the same run.
func checkCPURatio(cases []benchCase, sum map[string]map[string]summary, bound float64) error {
	var errs []error
	for _, c := range cases {
		if c.Kind != "produce" {
			continue
		}
		g, okG := sum[c.Name]["gregor"]
		k, okK := sum[c.Name]["kfake"]
		if !okG || !okK {
			errs = append(errs, fmt.Errorf("%s: no gregor or no kfake figure to compare", c.Title()))
			continue
		}
		if r := ratio(g.CPUPerGiB, k.CPUPerGiB); !(r <= bound) {
			errs = append(errs, fmt.Errorf("%s: gregor's CPU per GiB %.2f s is %s kfake's %.2f s, over the bound of %.2f×",
				c.Title(), g.CPUPerGiB, fmtRatio(r), k.CPUPerGiB, bound))
		}
	}
	return errors.Join(errs...)
}
