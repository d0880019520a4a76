package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseProduceFlags(t *testing.T) {
	o, err := parseProduceFlags([]string{"--topic", "t", "--records", "1000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.bootstrap, []string{"localhost:9092"}) || o.topic != "t" || o.records != 1000 ||
		o.recordSize != 1024 || o.partitions != -1 || o.replicationFactor != -1 || o.acks != "all" ||
		o.linger != 5*time.Millisecond || o.batchMaxBytes != 0 || o.compression != "none" ||
		o.throughput != -1 || !o.idempotent || o.json || o.producers != 1 || o.partitioner != "default" {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseProduceFlags([]string{
		"--bootstrap", "a:1, b:2", "--topic", "t", "--records", "5", "--record-size", "100",
		"--partitions", "12", "--replication-factor", "3", "--acks", "-1", "--linger", "0s",
		"--batch-max-bytes", "65536", "--compression", "zstd", "--throughput", "1000", "--idempotent=false", "--json",
		"--producers", "4", "--partitioner", "round-robin",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.bootstrap, []string{"a:1", "b:2"}) || o.recordSize != 100 || o.partitions != 12 ||
		o.replicationFactor != 3 || o.acks != "all" || o.linger != 0 || o.batchMaxBytes != 65536 ||
		o.compression != "zstd" || o.throughput != 1000 || o.idempotent || !o.json || o.producers != 4 || o.partitioner != "round-robin" {
		t.Errorf("set: %+v", o)
	}
	if n := len(o.clientOpts()); n != 8 {
		t.Errorf("clientOpts: %d options, want 8 (seeds, id, linger, compression, acks, no idempotence, batch, partitioner)", n)
	}

	bad := [][]string{
		{"--records", "1"},
		{"--topic", "t"},
		{"--topic", "t", "--records", "0"},
		{"--topic", "t", "--records", "1", "--bootstrap", " , "},
		{"--topic", "t", "--records", "1", "--record-size", "-1"},
		{"--topic", "t", "--records", "1", "--record-size", "100000000"},
		{"--topic", "t", "--records", "1", "--partitions", "0"},
		{"--topic", "t", "--records", "1", "--replication-factor", "40000"},
		{"--topic", "t", "--records", "1", "--acks", "2"},
		{"--topic", "t", "--records", "1", "--linger", "-1ms"},
		{"--topic", "t", "--records", "1", "--linger", "5"},
		{"--topic", "t", "--records", "1", "--batch-max-bytes", "-5"},
		{"--topic", "t", "--records", "1", "--compression", "brotli"},
		{"--topic", "t", "--records", "1", "--throughput", "0"},
		{"--topic", "t", "--records", "1", "--throughput", "-2"},
		{"--topic", "t", "--records", "1", "extra"},
		{"--topic", "t", "--records", "x"},
		{"--topic", "t", "--records", "1", "--producers", "0"},
		{"--topic", "t", "--records", "1", "--partitioner", "hash"},
	}
	for _, args := range bad {
		if o, err := parseProduceFlags(args, io.Discard); err == nil {
			t.Errorf("parseProduceFlags(%q) = %+v, want an error", args, o)
		}
	}
}

func TestParseConsumeFlags(t *testing.T) {
	o, err := parseConsumeFlags([]string{"--topic", "t", "--records", "10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.group != "" || o.verify || o.timeout != 10*time.Second || o.fetchMaxBytes != 0 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseConsumeFlags([]string{"--topic", "t", "--records", "10", "--group", "g", "--verify", "--timeout", "3s", "--fetch-max-bytes", "1000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.group != "g" || !o.verify || o.timeout != 3*time.Second || o.fetchMaxBytes != 1000 {
		t.Errorf("set: %+v", o)
	}
	if n := len(o.clientOpts()); n != 6 {
		t.Errorf("clientOpts: %d options, want 6", n)
	}
	bad := [][]string{
		{"--topic", "t"},
		{"--records", "1"},
		{"--topic", "t", "--records", "1", "--timeout", "0s"},
		{"--topic", "t", "--records", "1", "--fetch-max-bytes", "-1"},
		{"--topic", "t", "--records", "2000000000", "--verify"},
	}
	for _, args := range bad {
		if o, err := parseConsumeFlags(args, io.Discard); err == nil {
			t.Errorf("parseConsumeFlags(%q) = %+v, want an error", args, o)
		}
	}
}

func TestRunPerfModes(t *testing.T) {
	ctx := context.Background()
	var out strings.Builder
	if err := runPerfTo(ctx, nil, io.Discard, &out); err == nil || !strings.Contains(out.String(), "usage") {
		t.Errorf("no mode: %v, %q", err, out.String())
	}
	if err := runPerfTo(ctx, []string{"burn"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "burn") {
		t.Errorf("unknown mode: %v", err)
	}
	out.Reset()
	if err := runPerfTo(ctx, []string{"help"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "perf produce") {
		t.Errorf("help: %v, %q", err, out.String())
	}
	if err := runPerfTo(ctx, []string{"produce", "--records", "1"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--topic") {
		t.Errorf("produce without topic: %v", err)
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, size := range []int{8, 9, 15, 16, 17, 100, 1024, 1 << 16} {
		base := payloadBase(size)
		if len(base) != size {
			t.Fatalf("payloadBase(%d) has %d bytes", size, len(base))
		}
		v := make([]byte, size)
		for _, index := range []uint64{0, 1, 255, 1 << 40, 1<<64 - 1} {
			fillValue(v, base, index)
			got, err := valueIndex(v, base)
			if err != nil || got != index {
				t.Errorf("size %d index %d: got %d, %v", size, index, got, err)
			}
		}
	}
	// Values differ by index even when too short to carry it.
	base := payloadBase(4)
	a, b := make([]byte, 4), make([]byte, 4)
	fillValue(a, base, 1)
	fillValue(b, base, 2)
	if slices.Equal(a, b) {
		t.Error("4-byte values of records 1 and 2 are equal")
	}
	if _, err := valueIndex(a, base); err == nil {
		t.Error("a 4-byte value verified")
	}
	// A shorter base is a prefix of a longer one, so one base serves all.
	if long := payloadBase(100); !slices.Equal(long[:37], payloadBase(37)) {
		t.Error("payloadBase(37) is not a prefix of payloadBase(100)")
	}
}

func TestValueCorruptionDetected(t *testing.T) {
	const size = 64
	base := payloadBase(size)
	good := make([]byte, size)
	fillValue(good, base, 42)
	corrupt := map[string]func([]byte){
		"payload byte": func(v []byte) { v[30] ^= 1 },
		"trailer":      func(v []byte) { v[size-1] ^= 1 },
		"index only":   func(v []byte) { v[7] ^= 1 },
		"shifted":      func(v []byte) { copy(v[1:], v[:size-1]) },
	}
	for name, f := range corrupt {
		v := slices.Clone(good)
		f(v)
		if _, err := valueIndex(v, base); err == nil {
			t.Errorf("%s: corruption not detected", name)
		}
	}
	// Truncated: checked against the base of its own length.
	if _, err := valueIndex(good[:size-1], payloadBase(size-1)); err == nil {
		t.Error("truncated value verified")
	}
}

func TestVerifier(t *testing.T) {
	const n = 130
	v := newVerifier(n)
	val := make([]byte, 32)
	base := payloadBase(32)
	for i := uint64(0); i < n; i++ {
		fillValue(val, base, i)
		if err := v.check(val); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	fillValue(val, base, 7)
	if err := v.check(val); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	fillValue(val, base, n)
	if err := v.check(val); err == nil || !strings.Contains(err.Error(), "another run") {
		t.Errorf("out of range: %v", err)
	}
	// Values of several sizes share the growing base.
	w := newVerifier(3)
	for i, size := range []int{16, 100, 40} {
		val := make([]byte, size)
		fillValue(val, payloadBase(size), uint64(i))
		if err := w.check(val); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{
		{0, 1 * time.Millisecond}, {0.5, 501 * time.Millisecond}, {0.95, 951 * time.Millisecond},
		{0.99, 991 * time.Millisecond}, {0.999, 1000 * time.Millisecond}, {1, 1000 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(s, tt.p); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}

func TestLatencies(t *testing.T) {
	l := newLatencies(4)
	for _, d := range []time.Duration{4, 1, 3, 2} {
		l.add(d * time.Millisecond)
	}
	got := l.summary()
	want := latencySummary{Avg: 2.5, P50: 3, P95: 4, P99: 4, P999: 4, Max: 4}
	if got != want {
		t.Errorf("summary = %+v, want %+v", got, want)
	}
	if (&latencies{every: 1}).summary() != (latencySummary{}) {
		t.Error("summary of no latencies is not zero")
	}
	// Sampling keeps memory bounded for long runs while counting all.
	big := newLatencies(3 * maxLatencySamples)
	if big.every != 4 {
		t.Errorf("every = %d, want 4", big.every)
	}
	for i := 0; i < 3*maxLatencySamples; i++ {
		big.add(time.Microsecond)
	}
	if big.count != 3*maxLatencySamples || len(big.samples) > maxLatencySamples {
		t.Errorf("count %d, samples %d", big.count, len(big.samples))
	}
}

func TestThrottleDelay(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		now   time.Duration
		sent  int64
		rate  float64
		delay time.Duration
	}{
		{0, 0, 100, 0},
		{0, 10, 100, 100 * time.Millisecond},
		{50 * time.Millisecond, 10, 100, 50 * time.Millisecond},
		{200 * time.Millisecond, 10, 100, 0},
		{0, 10, -1, 0},
	}
	for _, tt := range tests {
		if got := throttleDelay(start, start.Add(tt.now), tt.sent, tt.rate); got != tt.delay {
			t.Errorf("throttleDelay(now+%v, sent %d, %v/s) = %v, want %v", tt.now, tt.sent, tt.rate, got, tt.delay)
		}
	}
}

func TestReport(t *testing.T) {
	r := newReport("produce", "t", 2000, 2000*1024, 2*time.Second)
	if r.RecordsPerSec != 1000 || r.MBPerSec != 1000.0*1024/mb {
		t.Errorf("rates: %+v", r)
	}
	r.Latency = &latencySummary{Avg: 1.5, P50: 1, P95: 2, P99: 3, P999: 4, Max: 5}
	r.Produce = &produceSettings{RecordSize: 1024, Acks: "all", Compression: "none", LingerMs: 5}
	want := "2000 records sent, 1000.0 records/sec (0.98 MB/sec), 1.50 ms avg latency, 5.00 ms max latency, " +
		"1.00 ms 50th, 2.00 ms 95th, 3.00 ms 99th, 4.00 ms 99.9th."
	if got := r.humanLine(); got != want {
		t.Errorf("humanLine =\n%s\nwant\n%s", got, want)
	}

	var stdout, stderr strings.Builder
	if err := writeReport(&stdout, &stderr, r, true); err != nil {
		t.Fatal(err)
	}
	if stderr.String() != want+"\n" {
		t.Errorf("stderr %q", stderr.String())
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(stdout.String()), &back); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", stdout.String(), err)
	}
	if back["mode"] != "produce" || back["records"] != 2000.0 || back["records_per_sec"] != 1000.0 {
		t.Errorf("JSON %v", back)
	}
	if lat, _ := back["latency_ms"].(map[string]any); lat["p99"] != 3.0 {
		t.Errorf("JSON latency %v", back["latency_ms"])
	}
	if p, _ := back["produce"].(map[string]any); p["acks"] != "all" || p["record_size"] != 1024.0 {
		t.Errorf("JSON produce settings %v", back["produce"])
	}

	c := newReport("consume", "t", 10, 10*mb, 5*time.Second)
	c.Consume = &consumeSettings{Verified: true, FetchSeconds: 4}
	stdout.Reset()
	if err := writeReport(&stdout, io.Discard, c, false); err != nil {
		t.Fatal(err)
	}
	if want := "10 records consumed (10.00 MB) in 5.00 s, 2.0 records/sec (2.00 MB/sec), every value verified.\n"; stdout.String() != want {
		t.Errorf("consume line %q, want %q", stdout.String(), want)
	}
	if z := newReport("consume", "t", 0, 0, 0); z.RecordsPerSec != 0 || z.MBPerSec != 0 {
		t.Errorf("zero elapsed: %+v", z)
	}
}

func BenchmarkFillValue(b *testing.B) {
	base := payloadBase(1024)
	v := make([]byte, 1024)
	b.SetBytes(1024)
	var i uint64
	for b.Loop() {
		fillValue(v, base, i)
		i++
	}
}

func BenchmarkVerify(b *testing.B) {
	const n = 1 << 16
	vals := make([][]byte, n)
	base := payloadBase(1024)
	for i := range vals {
		vals[i] = make([]byte, 1024)
		fillValue(vals[i], base, uint64(i))
	}
	b.SetBytes(1024)
	var ver *verifier
	i := 0
	for b.Loop() {
		if i%n == 0 {
			ver = newVerifier(n)
		}
		if err := ver.check(vals[i%n]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkLatenciesAdd(b *testing.B) {
	l := newLatencies(1 << 30)
	for b.Loop() {
		l.add(time.Millisecond)
	}
}

// TestPerfE2E runs `gregor perf e2e` against a real gregor: every record
// produced at the fixed rate is read back once, with no linger unless
// asked, and the report gives the latency from send with its stages
// (send delay, acknowledgement, from the due time).
func TestPerfE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gregor process")
	}
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	if r := runCLI(t, "", "", "perf", "e2e", "--bootstrap", p.addr, "--topic", "e", "--records", "10"); r.code == 0 || !strings.Contains(r.err, "--throughput") {
		t.Errorf("e2e without a rate: exit %d: %s", r.code, r.err)
	}
	out := mustCLI(t, "", "", "perf", "e2e", "--bootstrap", p.addr, "--topic", "e2e", "--partitions", "4",
		"--records", "3000", "--throughput", "1000", "--record-size", "100", "--json")
	var rep perfReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if rep.Mode != "e2e" || rep.Records != 3000 || rep.E2E == nil || !rep.E2E.Verified || rep.Latency == nil {
		t.Fatalf("report %+v", rep)
	}
	// 3,000 records at 1,000/s take about 3 s to send.
	if rep.Seconds < 2.9 || rep.E2E.Achieved > 1100 {
		t.Errorf("sent in %.2f s at %.0f records/s: the rate was not held", rep.Seconds, rep.E2E.Achieved)
	}
	if l := rep.Latency; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
		t.Errorf("latencies %+v", l)
	}
	if rep.Produce == nil || rep.Produce.LingerMs != 0 {
		t.Errorf("produce settings %+v: want linger 0 by default", rep.Produce)
	}
	e := rep.E2E
	if e.SendDelay == nil || e.Ack == nil || e.FromDue == nil {
		t.Fatalf("stages missing: %+v", e)
	}
	// A record is read back after it is sent, and it is sent at or after
	// its due time: the latency from due covers the one from send.
	if e.Ack.P50 <= 0 || e.SendDelay.P50 < 0 || e.FromDue.Max < rep.Latency.Max || e.FromDue.P50 < rep.Latency.P50 {
		t.Errorf("stages %+v %+v %+v against latency %+v", e.SendDelay, e.Ack, e.FromDue, rep.Latency)
	}
}

// TestPerfManyProducers runs `gregor perf produce` with several producer
// clients and the round-robin partitioner against a real gregor, then
// reads every record back: each index arrives once, and every partition
// holds records.
func TestPerfManyProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gregor process")
	}
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	out := mustCLI(t, "", "", "perf", "produce", "--bootstrap", p.addr, "--topic", "many", "--partitions", "50",
		"--records", "2003", "--record-size", "64", "--producers", "3", "--partitioner", "round-robin", "--json")
	var rep perfReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if rep.Records != 2003 || rep.Produce == nil || rep.Produce.Producers != 3 || rep.Produce.Partitioner != "round-robin" {
		t.Fatalf("report %+v", rep)
	}
	out = mustCLI(t, "", "", "perf", "consume", "--bootstrap", p.addr, "--topic", "many", "--records", "2003", "--verify", "--json")
	var crep perfReport
	if err := json.Unmarshal([]byte(out), &crep); err != nil || crep.Records != 2003 || crep.Consume == nil || !crep.Consume.Verified {
		t.Fatalf("consume report %q: %v", out, err)
	}
	// Round-robin from each of 3 producers over 50 partitions: about 40
	// records each, none empty.
	var offs []partitionOffsets
	cliJSON(t, p.addr, &offs, "offsets", "many")
	if len(offs) != 50 {
		t.Fatalf("offsets of %d partitions, want 50", len(offs))
	}
	for _, o := range offs {
		if o.HighWatermark < 20 {
			t.Errorf("partition %d holds %d records, want about 40", o.Partition, o.HighWatermark)
		}
	}
}
