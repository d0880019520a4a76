package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cliResult is one run of the gregor command as a process.
type cliResult struct {
	out, err string
	code     int
}

// runCLI runs `gregor args...` as a child process with stdin, pointed at
// addr through GREGOR_BROKERS (so that variable is what every test
// relies on), and returns its output and exit code.
func runCLI(t *testing.T, addr, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "GREGOR_BROKERS="+addr)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gregor %v did not finish; stdout:\n%s\nstderr:\n%s", args, out.String(), errOut.String())
	}
	return cliResult{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
}

// mustCLI runs the command and fails the test unless it exits 0.
func mustCLI(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	r := runCLI(t, addr, stdin, args...)
	if r.code != 0 {
		t.Fatalf("gregor %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.out, r.err)
	}
	return r.out
}

// cliJSON runs the command with --json and decodes its output into v.
func cliJSON(t *testing.T, addr string, v any, args ...string) {
	t.Helper()
	out := mustCLI(t, addr, "", append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("gregor %v --json: %v\n%s", args, err, out)
	}
}

// cliCluster starts `gregor serve` and returns its address and an admin
// client on it.
func cliCluster(t *testing.T) (string, *kgo.Client, *kadm.Client) {
	t.Helper()
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--override", "group.initial.rebalance.delay.ms=0")
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return p.addr, cl, kadm.NewClient(cl)
}

// TestCLITopic: every topic verb against a real gregor, each change read
// back with kadm.
func TestCLITopic(t *testing.T) {
	addr, cl, adm := cliCluster(t)
	ctx := testCtx(t, 2*time.Minute)

	// Kafka's flag names work too: --topic for the argument.
	out := mustCLI(t, addr, "", "topic", "create", "--topic", "t1", "--partitions", "3", "-r", "1", "-c", "retention.ms=1000")
	if !strings.Contains(out, "t1") || !strings.Contains(out, "OK") {
		t.Fatalf("create output:\n%s", out)
	}
	// Again: the topic exists, exit 1 with the broker's reason; with
	// --if-not-exists that is success.
	if r := runCLI(t, addr, "", "topic", "create", "t1"); r.code != 1 || !strings.Contains(r.out, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create again: exit %d\n%s%s", r.code, r.out, r.err)
	}
	mustCLI(t, addr, "", "topic", "create", "t1", "--if-not-exists")

	var described []topicDescription
	cliJSON(t, addr, &described, "topic", "describe", "t1")
	if len(described) != 1 || len(described[0].Partitions) != 3 {
		t.Fatalf("describe: %+v", described)
	}
	for i, p := range described[0].Partitions {
		if p.Partition != int32(i) || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) || p.HighWatermark != 0 || p.SizeBytes < 0 {
			t.Errorf("partition row %+v", p)
		}
	}
	checkConfig(t, described[0].Configs, "retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG")
	checkConfig(t, described[0].Configs, "cleanup.policy", "delete", "DEFAULT_CONFIG")
	// The table shows the same, aligned.
	table := mustCLI(t, addr, "", "topic", "describe", "t1")
	if !regexpMatch(`retention\.ms +1000 +DYNAMIC_TOPIC_CONFIG`, table) || !regexpMatch(`(?m)^2 +1 +\d+ +1 +1 +0 +0 `, table) {
		t.Errorf("describe table:\n%s", table)
	}

	var listed []struct {
		Topic      string `json:"topic"`
		Partitions int    `json:"partitions"`
	}
	cliJSON(t, addr, &listed, "topic", "list")
	if len(listed) != 1 || listed[0].Topic != "t1" || listed[0].Partitions != 3 {
		t.Fatalf("list: %+v", listed)
	}

	mustCLI(t, addr, "", "topic", "alter-config", "t1", "--add-config", "retention.ms=2000", "--add-config", "max.message.bytes=4096")
	rcs, err := adm.DescribeTopicConfigs(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	rc, _ := rcs.On("t1", nil)
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.ms"] != "2000" || got["max.message.bytes"] != "4096" {
		t.Errorf("after alter-config: retention.ms %q, max.message.bytes %q", got["retention.ms"], got["max.message.bytes"])
	}

	mustCLI(t, addr, "", "topic", "add-partitions", "t1", "--partitions", "5")
	if n := waitPartitions(t, adm, "t1", 5); n != 5 {
		t.Errorf("after add-partitions: %d partitions, want 5", n)
	}
	mustCLI(t, addr, "", "topic", "add-partitions", "t1", "-n", "1")
	if n := waitPartitions(t, adm, "t1", 6); n != 6 {
		t.Errorf("after add-partitions -n 1: %d partitions, want 6", n)
	}

	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t1", Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out = mustCLI(t, addr, "", "topic", "trim-prefix", "t1", "--offset", "4", "-p", "0")
	if !regexpMatch(`t1 +0 +4 +OK`, out) {
		t.Errorf("trim-prefix output:\n%s", out)
	}
	starts, err := adm.ListStartOffsets(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("t1", 0); o.Offset != 4 {
		t.Errorf("log start offset after trim-prefix: %d, want 4", o.Offset)
	}

	mustCLI(t, addr, "", "topic", "delete", "t1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ts, err := adm.ListTopics(ctx)
		if err == nil && !ts.Has("t1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after delete: %v %v", ts.Names(), err)
		}
	}
}

func checkConfig(t *testing.T, cs []configEntry, name, value, source string) {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			if c.Value != value || c.Source != source {
				t.Errorf("config %s = %q from %s, want %q from %s", name, c.Value, c.Source, value, source)
			}
			return
		}
	}
	t.Errorf("no config %s in %+v", name, cs)
}

// waitPartitions polls the topic's partition count until it is want (or
// 10s pass) and returns the last count: like Kafka, a broker answers
// CreatePartitions once the controller has it, and its metadata follows
// a moment later.
func waitPartitions(t *testing.T, adm *kadm.Client, topic string, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts, err := adm.ListTopics(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		n := len(ts[topic].Partitions)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCLIErrors: a typo gets the nearest command or flag, a broker that is
// down is named in plain words with exit 1, mistakes exit 2, and -h shows
// examples with exit 0.
func TestCLIErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now

	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topc", "list"}, 2, `unknown command "topc" for gregor; did you mean "topic"?`},
		{[]string{"topic", "lst"}, 2, `unknown command "lst" for gregor topic; did you mean "list"?`},
		{[]string{"group", "reset-ofsets", "g"}, 2, `did you mean "reset-offsets"?`},
		{[]string{"topic", "create", "x", "--partitons", "3"}, 2, "unknown flag --partitons; did you mean --partitions?"},
		{[]string{"consume"}, 2, "consume needs TOPIC"},
		{[]string{"topic", "list"}, 1, "cannot reach a broker at " + down + " (connection refused)"},
		{[]string{"consume", "t", "-n", "1"}, 1, "Is gregor running there?"},
		{[]string{"cluster", "health"}, 1, "point at another with -b HOST:PORT or GREGOR_BROKERS"},
	}
	for _, tt := range tests {
		r := runCLI(t, down, "", tt.args...)
		if r.code != tt.code || !strings.Contains(r.err, tt.want) {
			t.Errorf("gregor %v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.err, tt.code, tt.want)
		}
		if strings.Contains(r.err, "dial tcp") {
			t.Errorf("gregor %v: raw dial error in %q", tt.args, r.err)
		}
	}
	// -b wins over GREGOR_BROKERS.
	if r := runCLI(t, "127.0.0.1:1", "", "topic", "list", "-b", down); !strings.Contains(r.err, down) {
		t.Errorf("-b ignored: %q", r.err)
	}
	// Every leaf has examples in its help.
	for _, noun := range commands() {
		for _, v := range noun.sub {
			r := runCLI(t, down, "", noun.name, v.name, "-h")
			if r.code != 0 || !strings.Contains(r.out, "examples:\n  gregor "+noun.name+" "+v.name) || !strings.Contains(r.out, "-b, --brokers") {
				t.Errorf("gregor %s %s -h: exit %d\n%s", noun.name, v.name, r.code, r.out)
			}
		}
		if noun.run != nil {
			r := runCLI(t, down, "", noun.name, "-h")
			if r.code != 0 || !strings.Contains(r.out, "examples:\n  ") {
				t.Errorf("gregor %s -h: exit %d\n%s", noun.name, r.code, r.out)
			}
		}
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
