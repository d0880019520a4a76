package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCLIProduceConsume: 100 keyed records with headers go in through
// produce's stdin in a format naming their partition, and come back out
// of consume in the same format byte for byte, per partition in offset
// order; kgo reads the same keys, headers and partitions; --json carries
// records (binary values too) from one topic into another; --offset -N and
// @TIME start where they say; offsets lists the ends.
func TestCLIProduceConsume(t *testing.T) {
	addr, cl, adm := cliCluster(t)
	ctx := testCtx(t, 2*time.Minute)
	mustCLI(t, addr, "", "topic", "create", "rec", "-p", "3")

	const format = `%p|%k|%h|%v\n`
	var in strings.Builder
	perPartition := map[int32][]string{}
	for i := range 100 {
		p := int32(i % 3)
		line := fmt.Sprintf("%d|key-%03d|n=%d,kind=test|value %d with spaces\t&tab\n", p, i, i, i)
		in.WriteString(line)
		perPartition[p] = append(perPartition[p], line)
	}
	out := mustCLI(t, addr, in.String(), "produce", "rec", "-f", format)
	if !strings.Contains(out, "produced 100 records") {
		t.Fatalf("produce output:\n%s", out)
	}

	// Per partition, the consumed lines are the produced ones, in order.
	for p := int32(0); p < 3; p++ {
		got := mustCLI(t, addr, "", "consume", "rec", "-p", strconv.Itoa(int(p)), "-f", format, "-e")
		if want := strings.Join(perPartition[p], ""); got != want {
			t.Fatalf("partition %d consumed:\n%q\nwant:\n%q", p, got, want)
		}
	}
	// All partitions with -n: the same set of lines.
	all := mustCLI(t, addr, "", "consume", "--topic", "rec", "-f", format, "--max-messages", "100", "--from-beginning")
	gotLines := strings.SplitAfter(all, "\n")
	gotLines = gotLines[:len(gotLines)-1]
	wantLines := strings.SplitAfter(in.String(), "\n")
	wantLines = wantLines[:len(wantLines)-1]
	slices.Sort(gotLines)
	slices.Sort(wantLines)
	if !slices.Equal(gotLines, wantLines) {
		t.Fatalf("consumed %d lines, want the 100 produced", len(gotLines))
	}

	// kgo reads what produce wrote, independently of consume.
	checkWithKgo(t, addr, "rec", 100)

	// The last 2 records of partition 1, by -N; and @TIME before the
	// first record is everything.
	last := mustCLI(t, addr, "", "consume", "rec", "-p", "1", "--offset", "-2", "-e", "-f", `%o %k\n`)
	if last != "31 key-094\n32 key-097\n" {
		t.Errorf("--offset -2 consumed %q", last)
	}
	since := mustCLI(t, addr, "", "consume", "rec", "-p", "2", "--offset", "@1h", "-e", "-f", `%k\n`)
	if strings.Count(since, "\n") != 33 {
		t.Errorf("--offset @1h consumed %d records from partition 2, want 33", strings.Count(since, "\n"))
	}

	// A binary value and a key-delimited line, through --json into a copy.
	binary := []byte{0xff, 0x00, 0xfe, '\n'}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rec", Partition: 0, Key: []byte("bin"), Value: binary}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, addr, "", "topic", "create", "copy", "-p", "3")
	js := mustCLI(t, addr, "", "consume", "rec", "--json", "-e")
	if strings.Count(js, "\n") != 101 || !strings.Contains(js, `"value_base64":"/wD+Cg=="`) {
		t.Fatalf("consume --json: %d lines\n%s", strings.Count(js, "\n"), js[:min(len(js), 500)])
	}
	mustCLI(t, addr, js, "produce", "copy", "--json")
	copied := consumeAll(t, addr, "copy", 101)
	if r := copied["bin"]; r == nil || !bytes.Equal(r.Value, binary) || r.Partition != 0 {
		t.Errorf("binary record copied as %+v", r)
	}
	if r := copied["key-050"]; r == nil || string(r.Value) != "value 50 with spaces\t&tab" || len(r.Headers) != 2 || r.Partition != 2 {
		t.Errorf("record key-050 copied as %+v", r)
	}

	// --acks 1 and a compression codec: the records arrive the same.
	mustCLI(t, addr, "a\nb\n", "produce", "copy", "-p", "2", "--acks", "1", "-z", "zstd")
	if got := mustCLI(t, addr, "", "consume", "copy", "-p", "2", "--offset", "-2", "-e"); got != "a\nb\n" {
		t.Errorf("--acks 1 -z zstd round trip: %q", got)
	}
	if r := runCLI(t, addr, "x\n", "produce", "copy", "--acks", "2"); r.code != 2 || !strings.Contains(r.err, "want all, 1 or 0") {
		t.Errorf("--acks 2: exit %d %s", r.code, r.err)
	}

	// -k splits at the first delimiter; -H adds headers to each record.
	mustCLI(t, addr, "k1:v:1\nk2:v2\n", "produce", "copy", "-k", ":", "-H", "src=cli", "-p", "1")
	kd := mustCLI(t, addr, "", "consume", "copy", "-p", "1", "--offset", "-2", "-e", "-f", `%k=%v;%h\n`)
	if kd != "k1=v:1;src=cli\nk2=v2;src=cli\n" {
		t.Errorf("-k/-H round trip: %q", kd)
	}

	// As a group member: what is printed is committed, and the next run
	// starts after it.
	grouped := mustCLI(t, addr, "", "consume", "rec", "-g", "cg", "-n", "60", "-f", `%k\n`)
	if strings.Count(grouped, "\n") != 60 {
		t.Fatalf("consume -g -n 60 printed %d records", strings.Count(grouped, "\n"))
	}
	if n := committedSum(t, adm, "cg"); n != 60 {
		t.Errorf("group cg committed %d records after printing 60", n)
	}
	rest := mustCLI(t, addr, "", "consume", "rec", "-g", "cg", "-e", "-f", `%k\n`)
	if strings.Count(rest, "\n") != 41 || strings.Contains(rest, strings.SplitN(grouped, "\n", 2)[0]+"\n") {
		t.Errorf("second consume -g -e printed %d records, want the other 41", strings.Count(rest, "\n"))
	}
	if n := committedSum(t, adm, "cg"); n != 101 {
		t.Errorf("group cg committed %d records, want 101", n)
	}

	// --timeout-ms: nothing arrives after the end, so it stops.
	start := time.Now()
	if got := mustCLI(t, addr, "", "consume", "rec", "--offset", "end", "--timeout-ms", "300"); got != "" || time.Since(start) > 30*time.Second {
		t.Errorf("consume from the end with --timeout-ms printed %q after %v", got, time.Since(start))
	}

	var offs []partitionOffsets
	cliJSON(t, addr, &offs, "offsets", "rec", "--time", "1h")
	ends, err := adm.ListEndOffsets(ctx, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 3 {
		t.Fatalf("offsets: %+v", offs)
	}
	for _, o := range offs {
		end, _ := ends.Lookup("rec", o.Partition)
		if o.LogStartOffset != 0 || o.HighWatermark != end.Offset || o.AtTime == nil || *o.AtTime != 0 {
			t.Errorf("offsets row %+v, want start 0, end %d, at-time 0", o, end.Offset)
		}
	}
}

// checkWithKgo reads n records of topic with kgo and checks each key's
// partition, headers and value against what the test produced.
func checkWithKgo(t *testing.T, addr, topic string, n int) {
	t.Helper()
	for key, r := range consumeAll(t, addr, topic, n) {
		i, err := strconv.Atoi(strings.TrimPrefix(key, "key-"))
		if err != nil {
			t.Fatalf("key %q", key)
		}
		wantHeaders := []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}, {Key: "kind", Value: []byte("test")}}
		if r.Partition != int32(i%3) || string(r.Value) != fmt.Sprintf("value %d with spaces\t&tab", i) || !slices.EqualFunc(r.Headers, wantHeaders, func(a, b kgo.RecordHeader) bool {
			return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
		}) {
			t.Errorf("record %s: partition %d value %q headers %v", key, r.Partition, r.Value, r.Headers)
		}
	}
}

// consumeAll reads n records of topic from the start with kgo, by key.
func consumeAll(t *testing.T, addr, topic string, n int) map[string]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	out := map[string]*kgo.Record{}
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out[string(r.Key)] = r })
	}
	return out
}
