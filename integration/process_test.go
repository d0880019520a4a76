// Package integration runs real gregor processes: built from ./cmd/gregor,
// started on loopback ports, stopped with SIGTERM or SIGKILL, restarted,
// and checked with franz-go for every acknowledged record.
package integration

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var gregorBin string

func TestMain(m *testing.M) {
	// The test binary is also the share consumer process of
	// TestShareGroupHistoryCluster (share_history_test.go).
	if spec := os.Getenv(shareConsumerEnv); spec != "" {
		os.Exit(shareConsumerMain(spec))
	}
	dir, err := os.MkdirTemp("", "gregor-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gregorBin = filepath.Join(dir, "gregor")
	// The race detector's shadow memory would swamp the soak's RSS
	// figures, so the soak measures the binary as it ships.
	flag.Parse()
	buildArgs := []string{"build", "-race", "-o", gregorBin, "../cmd/gregor"}
	if *soakDuration > 0 {
		buildArgs = []string{"build", "-o", gregorBin, "../cmd/gregor"}
	}
	build := exec.Command("go", buildArgs...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gregor:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running gregor.
type process struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	done    chan struct{}
	started chan string
	mu      sync.Mutex
	output  strings.Builder
}

var startedRE = regexp.MustCompile(`msg="gregor started" addr=(\S+)`)

// freePort returns a loopback port that was free a moment ago, for a
// gregor process to listen on. It is picked below Linux's ephemeral range
// (32768-60999): a port the kernel hands out for ":0" (the fault proxies'
// listeners, every client socket) could otherwise take it between this
// check and gregor's bind. No port is handed out twice in one test binary.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatal("no free loopback port in 20000-31999")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = make(map[int]bool)
)

// startGregor runs `gregor serve` with its data in dir on port and waits
// for its start-up line.
func startGregor(t *testing.T, dir string, port int, extra ...string) *process {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, extra...)
	return startGregorArgs(t, args...)
}

// startGregorArgs runs gregor with args and waits for its start-up line.
func startGregorArgs(t *testing.T, args ...string) *process {
	t.Helper()
	p := launchGregor(t, args...)
	p.waitStarted()
	return p
}

// launchGregor starts gregor without waiting: the nodes of a cluster start
// only once a quorum of them is up.
func launchGregor(t *testing.T, args ...string) *process {
	t.Helper()
	return launchCmd(t, exec.Command(gregorBin, args...), 0)
}

// launchCmd starts cmd, a gregor process or a wrapper running one, and
// collects its output: all of it, or its first maxOutput bytes when that
// is not 0 (a process out of descriptors logs every refused accept).
func launchCmd(t *testing.T, cmd *exec.Cmd, maxOutput int) *process {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, cmd: cmd, done: make(chan struct{}), started: make(chan string, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if maxOutput == 0 || p.output.Len() < maxOutput {
				p.output.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if m := startedRE.FindStringSubmatch(line); m != nil {
				select {
				case p.started <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%v output:\n%s", cmd.Args, p.log())
		}
	})
	return p
}

// waitStarted waits for the start-up line and takes the address from it.
func (p *process) waitStarted() {
	p.t.Helper()
	select {
	case p.addr = <-p.started:
	case <-p.done:
		p.t.Fatalf("gregor exited before starting:\n%s", p.log())
	case <-time.After(60 * time.Second):
		p.t.Fatalf("gregor did not start:\n%s", p.log())
	}
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("gregor did not stop on SIGTERM:\n%s", p.log())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("gregor exited with %d after SIGTERM:\n%s", code, p.log())
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
