package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestParsePerfJSON(t *testing.T) {
	// Lines as `gregor perf ... --json` prints them.
	produce := `{"mode":"produce","topic":"t1","records":50000,"bytes":51200000,"seconds":0.25,"records_per_sec":200000,"mb_per_sec":195.3125,"latency_ms":{"avg":136.1,"p50":141.4,"p95":175.9,"p99":184.7,"p999":190.5,"max":190.9},"produce":{"record_size":1024,"acks":"all","compression":"none","linger_ms":5,"batch_max_bytes":0,"idempotent":true,"throughput_cap":-1}}` + "\n"
	r, err := parsePerfJSON([]byte(produce), "produce")
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 50000 || r.Bytes != 51200000 || r.MiBPerS != 195.3125 || r.Latency == nil || r.Latency.P999 != 190.5 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parsePerfJSON([]byte(produce), "consume"); err == nil {
		t.Error("a produce report accepted as consume")
	}

	consume := `{"mode":"consume","topic":"t1","records":50000,"bytes":51200000,"seconds":0.26,"records_per_sec":189170,"mb_per_sec":184.7,"consume":{"verified":true,"fetch_seconds":0.22}}`
	if r, err := parsePerfJSON([]byte(consume), "consume"); err != nil || r.MiBPerS != 184.7 {
		t.Errorf("consume: %+v, %v", r, err)
	}
	unverified := strings.Replace(consume, `"verified":true`, `"verified":false`, 1)
	if _, err := parsePerfJSON([]byte(unverified), "consume"); err == nil {
		t.Error("an unverified consume accepted")
	}

	e2e := `{"mode":"e2e","topic":"t2","records":5000,"bytes":5120000,"seconds":0.51,"records_per_sec":9693.6,"mb_per_sec":9.46,"latency_ms":{"avg":5.2,"p50":5.11,"p95":8.55,"p99":10.73,"p999":17.68,"max":18.08},"e2e":{"rate":10000,"achieved":10000.1,"verified":true,"behind_ms":4}}`
	if r, err := parsePerfJSON([]byte(e2e), "e2e"); err != nil || r.Latency.P50 != 5.11 || r.Latency.P99 != 10.73 {
		t.Errorf("e2e: %+v, %v", r, err)
	}
	for _, bad := range []string{"", "not json", `{"mode":"produce","records":0,"bytes":0,"seconds":0}`} {
		if _, err := parsePerfJSON([]byte(bad), "produce"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCPUTicks(t *testing.T) {
	// A real line of /proc/<pid>/stat, with a command name that holds a
	// space and a parenthesis: utime 1234 and stime 567 are fields 14, 15.
	stat := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 40 0 12345 3000000000 100000 18446744073709551615"
	got, err := cpuTicks(stat)
	if err != nil || got != 1234+567 {
		t.Errorf("cpuTicks = %d, %v; want %d", got, err, 1234+567)
	}
	for _, bad := range []string{"", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 u v 1 2"} {
		if _, err := cpuTicks(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRSSAndLoad(t *testing.T) {
	status := "Name:\tgregor\nVmPeak:\t  900000 kB\nVmRSS:\t   59392 kB\nThreads:\t12\n"
	if got, err := rssKiB(status); err != nil || got != 59392 {
		t.Errorf("rssKiB = %d, %v", got, err)
	}
	if _, err := rssKiB("Name:\tx\n"); err == nil {
		t.Error("status without VmRSS accepted")
	}
	if got, err := loadAvg("8.54 3.63 2.22 12/143 18377\n"); err != nil || got != 8.54 {
		t.Errorf("loadAvg = %g, %v", got, err)
	}
}

func TestMedianAndRatio(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 200, 30, 40, 50}, 40},
	}
	for _, c := range cases {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.xs, got, c.want)
		}
	}
	in := []float64{5, 1, 3}
	median(in)
	if in[0] != 5 || in[1] != 1 {
		t.Error("median sorted its argument in place")
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	if got := ratio(3, 2); got != 1.5 {
		t.Errorf("ratio(3, 2) = %g", got)
	}
	for _, r := range []float64{ratio(1, 0), ratio(math.NaN(), 1), ratio(1, math.NaN())} {
		if !math.IsNaN(r) {
			t.Errorf("ratio with a missing side = %g, want NaN", r)
		}
	}
	if fmtRatio(ratio(1, 0)) != "—" || fmtRatio(0.5) != "0.50×" || fmtNum(math.NaN(), 1) != "—" {
		t.Error("formatting of a missing figure")
	}
}

func TestSummarize(t *testing.T) {
	var ss []sample
	for i, mibps := range []float64{100, 300, 200} {
		ss = append(ss, sample{Broker: "gregor", Case: "produce-16", Round: i + 1, MiBPS: mibps,
			CPUSec: float64(i + 1), GiB: 2, RSSMiB: 50 + float64(i)})
		ss = append(ss, sample{Broker: "kfake", Case: "produce-16", Round: i + 1, MiBPS: mibps / 2,
			CPUSec: 4, GiB: 2, RSSMiB: 30})
	}
	sum := summarize(ss)
	g, k := sum["produce-16"]["gregor"], sum["produce-16"]["kfake"]
	if g.N != 3 || g.MiBPS != 200 || g.CPUPerGiB != 1 || g.RSSMiB != 51 {
		t.Errorf("gregor summary %+v", g)
	}
	if k.MiBPS != 100 || k.CPUPerGiB != 2 {
		t.Errorf("kfake summary %+v", k)
	}
	cases := []benchCase{{Name: "produce-16", Kind: "produce", Partitions: 16, Records: 1000}}
	if err := checkCPURatio(cases, sum, 0.6); err != nil {
		t.Errorf("ratio 0.5 against a bound of 0.6: %v", err)
	}
	if err := checkCPURatio(cases, sum, 0.4); err == nil {
		t.Error("ratio 0.5 passed a bound of 0.4")
	}
	delete(sum["produce-16"], "kfake")
	if err := checkCPURatio(cases, sum, 10); err == nil {
		t.Error("a missing kfake figure passed the check")
	}

	info := runInfo{Rounds: 3, Machine: machine{CPUs: 2, Model: "test CPU", LoadStart: 0.3, LoadEnd: 2.1, LoadMax: 2.5}}
	md := renderMarkdown(info, cases, []string{"gregor", "kfake"}, summarize(ss))
	for _, want := range []string{
		"| produce acks=all, 16 partitions | gregor | 200.0 | 1.00 | 51 |",
		"| produce acks=all, 16 partitions | kfake | 100.0 | 2.00 | 30 |",
		"| produce acks=all, 16 partitions | — | 2.00× | — | 0.50× |",
		"2 cores, test CPU; load average 0.30 at the start, 2.10 at the end",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "WARNING") {
		t.Errorf("a quiet machine warned:\n%s", md)
	}
}

func TestLoadWarning(t *testing.T) {
	quiet := machine{CPUs: 2, LoadStart: 0.5, LoadMax: 2.9, LoadEnd: 2.9}
	if w := quiet.loadWarning(); w != "" {
		t.Errorf("quiet machine: %q", w)
	}
	busy := machine{CPUs: 2, LoadStart: 8.5, LoadMax: 16, LoadEnd: 3}
	w := busy.loadWarning()
	if !strings.Contains(w, "8.50 at the start") || !strings.Contains(w, "up to 16.00") || strings.Contains(w, "at the end") {
		t.Errorf("busy machine: %q", w)
	}
}

func TestSplice(t *testing.T) {
	doc := "# Performance\n\nintro\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\n## Next\n"
	got, err := splice(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Performance\n\nintro\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\n## Next\n"
	if got != want {
		t.Errorf("splice:\n%s\nwant:\n%s", got, want)
	}
	// Splicing again replaces, never appends.
	again, err := splice(got, "newer\n")
	if err != nil || strings.Contains(again, "new table") || strings.Count(again, beginMarker) != 1 {
		t.Errorf("second splice: %v\n%s", err, again)
	}
	for _, bad := range []string{"no markers", endMarker + beginMarker, beginMarker + endMarker + beginMarker + endMarker} {
		if _, err := splice(bad, "x"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMatrix(t *testing.T) {
	cs := matrix(1000, false, []float64{10000, 50000}, 10000, 2)
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); got != "produce-16 produce-1000 consume-16 e2e-16 e2e-16-50000 e2e-16-durable-10000" {
		t.Errorf("matrix = %s", got)
	}
	if cs[3].Records != 20000 || cs[4].Records != 100000 || cs[5].Records != 20000 || cs[2].From != "produce-16" {
		t.Errorf("e2e records %d, %d, %d, consume from %q", cs[3].Records, cs[4].Records, cs[5].Records, cs[2].From)
	}
	if len(matrix(1000, true, []float64{10000}, 0, 2)) != 5 {
		t.Error("-many does not add the 10,000-partition case, or a durable rate of 0 adds one")
	}
	args := strings.Join(cs[3].perfArgs("b:1", "t", "gregor"), " ")
	if args != "gregor perf e2e --bootstrap b:1 --topic t --records 20000 --record-size 1024 --acks all --throughput 10000 --json" {
		t.Errorf("e2e args: %s", args)
	}
	if cs[4].Title() != "e2e at 50,000 msg/s, 16 partitions" || cs[4].TargetP99 != 3 || cs[4].TargetP999 != 6 || !cs[4].BelowKafka {
		t.Errorf("50,000 msg/s case: %+v (%s)", cs[4], cs[4].Title())
	}
	d := cs[5]
	if !d.Durable || d.TargetP99 != 5 || d.TargetP999 != 0 || d.BelowKafka ||
		d.Title() != "e2e at 10,000 msg/s, 16 partitions, durable (flush.messages=1; kfake does not fsync)" {
		t.Errorf("durable case: %+v (%s)", d, d.Title())
	}
	for _, b := range []string{"gregor", "kafka"} {
		if v := d.topicConfigs(b)["flush.messages"]; v == nil || *v != "1" {
			t.Errorf("durable topic on %s: configs %v", b, d.topicConfigs(b))
		}
	}
	if d.topicConfigs("kfake") != nil || cs[3].topicConfigs("gregor") != nil {
		t.Error("kfake or a non-durable case gets topic configs")
	}
	sel, err := selectCases(cs, []string{"e2e-16", "produce-16"})
	if err != nil || len(sel) != 2 || sel[0].Name != "produce-16" || sel[1].Name != "e2e-16" {
		t.Errorf("selectCases = %v, %v", sel, err)
	}
	if rs, err := parseRates("10000, 50000,"); err != nil || len(rs) != 2 || rs[1] != 50000 {
		t.Errorf("parseRates = %v, %v", rs, err)
	}
	for _, bad := range []string{"0", "x", "-5"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) accepted", bad)
		}
	}
	if _, err := selectCases(cs, []string{"consume-16"}); err == nil {
		t.Error("consume without the produce case it reads accepted")
	}
	if _, err := selectCases(cs, []string{"produce-10000"}); err == nil {
		t.Error("a case not in the matrix accepted")
	}
	if groupDigits(10000) != "10,000" || groupDigits(16) != "16" || groupDigits(1000000) != "1,000,000" {
		t.Error("groupDigits")
	}
}

// TestRenderLatencyTargets: the generated section gives every e2e case's
// p50 / p99 / p99.9 per broker and says whether gregor meets the case's
// target, and why not.
func TestRenderLatencyTargets(t *testing.T) {
	cases := matrix(1000, false, []float64{10000, 50000}, 10000, 2)[3:]
	lat := func(br, c string, mibps, p50, p99, p999 float64) sample {
		return sample{Broker: br, Case: c, Round: 1, MiBPS: mibps, CPUSec: 1, GiB: 1, P50: p50, P99: p99, P999: p999}
	}
	ss := []sample{
		lat("gregor", "e2e-16", 9.8, 1, 2.5, 5.5), lat("kafka", "e2e-16", 9.8, 2, 4, 8), lat("kfake", "e2e-16", 9.8, 1, 2, 3),
		lat("gregor", "e2e-16-50000", 40, 1.5, 3.5, 7), lat("kafka", "e2e-16-50000", 48.8, 2, 3, 9), lat("kfake", "e2e-16-50000", 48.8, 1, 2, 3),
		lat("gregor", "e2e-16-durable-10000", 9.8, 2, 4.5, 9), lat("kafka", "e2e-16-durable-10000", 9.8, 3, 6, 12),
	}
	info := runInfo{Rounds: 1, Machine: machine{CPUs: 2, Model: "test CPU"}}
	md := renderMarkdown(info, cases, []string{"gregor", "kafka", "kfake"}, summarize(ss))
	for _, want := range []string{
		"| e2e at 10,000 msg/s, 16 partitions | 1.00 / 2.50 / 5.50 | 2.00 / 4.00 / 8.00 | 1.00 / 2.00 / 3.00 | p99 ≤ 3 ms, p99.9 ≤ 6 ms, below Kafka's | yes |",
		"| e2e at 50,000 msg/s, 16 partitions | 1.50 / 3.50 / 7.00 | 2.00 / 3.00 / 9.00 | 1.00 / 2.00 / 3.00 | p99 ≤ 3 ms, p99.9 ≤ 6 ms, below Kafka's | no: kept 40.0 of 48.8 MiB/s; p99 3.50 > 3; p99.9 7.00 > 6; p99 not below Kafka's 3.00 |",
		"| e2e at 10,000 msg/s, 16 partitions, durable (flush.messages=1; kfake does not fsync) | 2.00 / 4.50 / 9.00 | 3.00 / 6.00 / 12.00 | — | p99 ≤ 5 ms | yes |",
		"# e2e at 10,000 msg/s, 16 partitions, durable (flush.messages=1; kfake does not fsync): a topic of 16 partitions with flush.messages=1 (on kfake without)",
		"--throughput 50000 --json",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if renderLatencyTargets(cases[:1], map[string]map[string]summary{}) != "" {
		t.Error("a table without any gregor figure")
	}
}

func TestRenderMemory(t *testing.T) {
	figs := []figure{
		{"idle RSS after start (empty data dir)", "14.2 MiB, 12 fds", "≤ 30 MiB", met(14.2 <= targetIdleRSSMiB)},
		{"10000 idle partitions", "70.0 MiB, 10011 fds", "≤ 64 MiB, ≤ 1000 fds", met(false)},
	}
	md := renderTargets("2026-12-02 01:00 UTC", machine{CPUs: 2, Model: "test CPU", LoadStart: 9, LoadEnd: 9}, figs, "go run ./cmd/benchcompare -memory")
	for _, want := range []string{
		"| idle RSS after start (empty data dir) | 14.2 MiB, 12 fds | ≤ 30 MiB | yes |",
		"| 10000 idle partitions | 70.0 MiB, 10011 fds | ≤ 64 MiB, ≤ 1000 fds | no |",
		"WARNING: load average 9.00 at the start",
		"go run ./cmd/benchcompare -memory",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("memory report lacks %q:\n%s", want, md)
		}
	}
}

func TestProcFiguresOfSelf(t *testing.T) {
	rss, fds, err := procFigures(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 1 || fds < 3 {
		t.Errorf("this process: %.1f MiB, %d fds", rss, fds)
	}
	ticks, err := procCPU(os.Getpid())
	if err != nil || ticks < 0 {
		t.Errorf("procCPU of this process: %d, %v", ticks, err)
	}
}
