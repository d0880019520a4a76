package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// transferProcess is a gregor command run as a child process whose
// stdout and stderr are read line by line as they come.
type transferProcess struct {
	t        *testing.T
	cmd      *exec.Cmd
	mu       sync.Mutex
	out, err []string
	done     chan struct{}
}

// startTransfer runs `gregor args...` with the progress interval set to
// interval and stdin from in (nil: none).
func startTransfer(t *testing.T, interval string, in io.Reader, args ...string) *transferProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", progressEnv+"="+interval)
	cmd.Stdin = in
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &transferProcess{t: t, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	collect := func(r io.Reader, into *[]string) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			*into = append(*into, sc.Text())
			p.mu.Unlock()
		}
	}
	readers.Add(2)
	go collect(stdout, &p.out)
	go collect(stderr, &p.err)
	go func() {
		readers.Wait()
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("gregor %v\nstdout:\n%s\nstderr:\n%s", args, strings.Join(p.lines(false), "\n"), strings.Join(p.lines(true), "\n"))
		}
	})
	return p
}

// lines returns what the process wrote so far on stderr (or stdout).
func (p *transferProcess) lines(stderr bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]string(nil), p.err...)
	}
	return append([]string(nil), p.out...)
}

// waitLine waits for a stderr line that ok accepts and returns it.
func (p *transferProcess) waitLine(what string, d time.Duration, ok func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, l := range p.lines(true) {
			if ok(l) {
				return l
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s: the process ended without it", what)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not on stderr within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// interrupt sends SIGINT and returns the exit status.
func (p *transferProcess) interrupt() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no exit within 30 s of SIGINT")
	}
	return p.cmd.ProcessState.ExitCode()
}

var (
	perfProduceWindowRE = regexp.MustCompile(`^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency\.$`)
	perfConsumeWindowRE = regexp.MustCompile(`^(\d+) records consumed, [\d.]+ records/sec \([\d.]+ MB/sec\)\.$`)
	perfProduceTotalRE  = regexp.MustCompile(`^interrupted: (\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, [\d.]+ ms 50th`)
	perfConsumeTotalRE  = regexp.MustCompile(`^interrupted: (\d+) records consumed \([\d.]+ MB\) in [\d.]+ s`)
	perfE2EWindowRE     = regexp.MustCompile(`^(\d+) records read back, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency from due time\.$`)
	perfE2ETotalRE      = regexp.MustCompile(`^interrupted: (\d+) records read back of (\d+) sent at`)
	cliProgressRE       = regexp.MustCompile(`^(\d+) records (acknowledged|consumed), [\d.]+ records/sec \([\d.]+ MB/sec\), (\d+) in all\.$`)
)

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// endOffset is the log end offset of partition 0 of topic.
func endOffset(t *testing.T, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

// TestPerfProgressAndInterrupt runs `gregor perf produce`, `perf
// consume` and `perf e2e` as processes with a 300 ms progress interval: each prints
// Kafka's window line on stderr at that interval while it runs; SIGINT
// ends it with exit status 130 after a summary on stdout, marked
// interrupted, whose record count is exactly what reached the log
// (produce: the partition's end offset; consume, caught up: the same).
func TestPerfProgressAndInterrupt(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	const topic = "perf-progress"
	mustCLI(t, p.addr, "", "topic", "create", topic, "-p", "1")

	prod := startTransfer(t, "300ms", nil, "perf", "produce", "--bootstrap", p.addr, "--topic", topic,
		"--records", "100000000", "--throughput", "2000", "--record-size", "100")
	var windows []string
	prod.waitLine("three produce progress lines, one with records", 30*time.Second, func(string) bool {
		windows = windows[:0]
		sent := false
		for _, l := range prod.lines(true) {
			if m := perfProduceWindowRE.FindStringSubmatch(l); m != nil {
				windows = append(windows, l)
				sent = sent || m[1] != "0"
			}
		}
		return len(windows) >= 3 && sent
	})
	if code := prod.interrupt(); code != interruptedExit {
		t.Fatalf("perf produce after SIGINT: exit %d, want %d", code, interruptedExit)
	}
	out := prod.lines(false)
	if len(out) != 1 || !perfProduceTotalRE.MatchString(out[0]) {
		t.Fatalf("perf produce stdout after SIGINT: %q, want one interrupted summary", out)
	}
	acked := atoi64(t, perfProduceTotalRE.FindStringSubmatch(out[0])[1])
	if end := endOffset(t, p.addr, topic); acked == 0 || acked != end {
		t.Errorf("interrupted perf produce says %d records sent; the log ends at %d", acked, end)
	}
	if last := prod.lines(true); !strings.Contains(strings.Join(last, "\n"), fmt.Sprintf("gregor: perf produce: interrupted after %d records acknowledged of", acked)) {
		t.Errorf("no interrupted error on stderr")
	}

	cons := startTransfer(t, "300ms", nil, "perf", "consume", "--bootstrap", p.addr, "--topic", topic, "--records", "100000000")
	// A window with records, then an empty one: caught up.
	cons.waitLine("consume progress lines, caught up", 30*time.Second, func(string) bool {
		got := false
		for _, l := range cons.lines(true) {
			if m := perfConsumeWindowRE.FindStringSubmatch(l); m != nil {
				if m[1] != "0" {
					got = true
				} else if got {
					return true
				}
			}
		}
		return false
	})
	if code := cons.interrupt(); code != interruptedExit {
		t.Fatalf("perf consume after SIGINT: exit %d, want %d", code, interruptedExit)
	}
	out = cons.lines(false)
	if len(out) != 1 || !perfConsumeTotalRE.MatchString(out[0]) {
		t.Fatalf("perf consume stdout after SIGINT: %q, want one interrupted summary", out)
	}
	if got := atoi64(t, perfConsumeTotalRE.FindStringSubmatch(out[0])[1]); got != acked {
		t.Errorf("interrupted perf consume read %d records, the log holds %d", got, acked)
	}

	e2e := startTransfer(t, "300ms", nil, "perf", "e2e", "--bootstrap", p.addr, "--topic", topic,
		"--records", "100000000", "--throughput", "500", "--record-size", "100")
	e2e.waitLine("an e2e progress line with records", 30*time.Second, func(l string) bool {
		m := perfE2EWindowRE.FindStringSubmatch(l)
		return m != nil && m[1] != "0"
	})
	if code := e2e.interrupt(); code != interruptedExit {
		t.Fatalf("perf e2e after SIGINT: exit %d, want %d", code, interruptedExit)
	}
	if out := e2e.lines(false); len(out) != 1 || !perfE2ETotalRE.MatchString(out[0]) {
		t.Fatalf("perf e2e stdout after SIGINT: %q, want one interrupted summary", out)
	} else if m := perfE2ETotalRE.FindStringSubmatch(out[0]); atoi64(t, m[1]) == 0 || atoi64(t, m[1]) > atoi64(t, m[2]) {
		t.Errorf("interrupted e2e: %s records read back of %s sent", m[1], m[2])
	}
}

// TestProduceConsumeProgressAndInterrupt: `gregor produce` fed 5,000
// lines on a stdin left open shows a progress line on stderr with all
// 5,000 acknowledged, and on SIGINT (its read still blocked) prints its
// summary on stdout and exits with 130; `gregor consume` into a pipe
// shows its progress on stderr only — stdout holds the 5,000 values and
// nothing else — and on SIGINT prints its summary on stderr and exits 0.
func TestProduceConsumeProgressAndInterrupt(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	const topic, n = "cli-progress", 5000
	mustCLI(t, p.addr, "", "topic", "create", topic, "-p", "1")

	// A real pipe, so that the child's read blocks in the child (with an
	// io.Pipe, exec's copying goroutine would hold Wait).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	prod := startTransfer(t, "300ms", pr, "produce", topic, "-b", p.addr)
	pr.Close()
	go func() {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "value-%d\n", i)
		}
		pw.Write([]byte(b.String())) // and left open: the read blocks
	}()
	t.Cleanup(func() { pw.Close() })
	prod.waitLine("a produce progress line with every record", 30*time.Second, func(l string) bool {
		m := cliProgressRE.FindStringSubmatch(l)
		return m != nil && m[2] == "acknowledged" && m[3] == strconv.Itoa(n)
	})
	if code := prod.interrupt(); code != interruptedExit {
		t.Fatalf("produce after SIGINT: exit %d, want %d", code, interruptedExit)
	}
	if out := strings.Join(prod.lines(false), "\n"); !strings.Contains(out, fmt.Sprintf("produced %d records", n)) {
		t.Errorf("produce summary after SIGINT: %q", out)
	}
	if errs := strings.Join(prod.lines(true), "\n"); !strings.Contains(errs, fmt.Sprintf("produce: interrupted: %d of the %d records read were acknowledged", n, n)) {
		t.Errorf("produce's interrupted line missing")
	}
	if end := endOffset(t, p.addr, topic); end != n {
		t.Errorf("log end %d, want %d", end, n)
	}

	cons := startTransfer(t, "300ms", nil, "consume", topic, "-b", p.addr)
	cons.waitLine("a consume progress line with every record", 30*time.Second, func(l string) bool {
		m := cliProgressRE.FindStringSubmatch(l)
		return m != nil && m[2] == "consumed" && m[3] == strconv.Itoa(n)
	})
	if code := cons.interrupt(); code != 0 {
		t.Fatalf("consume after SIGINT: exit %d, want 0", code)
	}
	out := cons.lines(false)
	if len(out) != n {
		t.Fatalf("consume wrote %d lines on stdout, want the %d values alone", len(out), n)
	}
	for i, l := range out {
		if l != fmt.Sprintf("value-%d", i) {
			t.Fatalf("stdout line %d is %q: only records belong there", i, l)
		}
	}
	if errs := strings.Join(cons.lines(true), "\n"); !strings.Contains(errs, fmt.Sprintf("interrupted: %d records consumed (", n)) {
		t.Errorf("consume's summary line missing on stderr")
	}
}

// TestProgressInterval: 5 s unless GREGOR_PROGRESS_INTERVAL says
// otherwise; 0 turns the lines off; a value that is not a duration keeps
// 5 s and says so.
func TestProgressInterval(t *testing.T) {
	var log strings.Builder
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"", 5 * time.Second}, {"250ms", 250 * time.Millisecond}, {"0", 0}, {"soon", 5 * time.Second}} {
		t.Setenv(progressEnv, c.env)
		log.Reset()
		if got := progressInterval(&log); got != c.want {
			t.Errorf("%s=%q: %v, want %v", progressEnv, c.env, got, c.want)
		}
		if (c.env == "soon") != strings.Contains(log.String(), "not a duration") {
			t.Errorf("%s=%q: said %q", progressEnv, c.env, log.String())
		}
	}
	calls := make(chan time.Duration, 10)
	stop := reportEvery(50*time.Millisecond, func(w time.Duration) { calls <- w })
	time.Sleep(180 * time.Millisecond)
	stop()
	if n := len(calls); n < 2 || n > 4 {
		t.Errorf("%d reports in 180 ms at a 50 ms interval", n)
	}
	stop() // twice is harmless
}
