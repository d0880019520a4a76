package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runMainEnv makes the test binary act as the gregor command: the
// process tests run `gregor serve` as a real process without building
// another binary.
const runMainEnv = "GREGOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveProcess is a `gregor serve` run as a child process.
type serveProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	done    chan struct{}
	started chan string
	mu      sync.Mutex
	output  strings.Builder
}

var serveStartedRE = regexp.MustCompile(`msg="gregor started" addr=(\S+)`)

// launchServe starts `gregor serve args...` and returns at once; the
// process is killed when the test ends.
func launchServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	return launchGregor(t, nil, append([]string{"serve"}, args...)...)
}

// launchGregor starts `gregor args...` with env added to the test's
// environment, for commands that serve (serve, container).
func launchGregor(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), env...), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{t: t, cmd: cmd, done: make(chan struct{}), started: make(chan string, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			if m := serveStartedRE.FindStringSubmatch(line); m != nil {
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
			t.Logf("gregor %v output:\n%s", args, p.log())
		}
	})
	return p
}

// startServe starts `gregor serve` and waits for its start-up line.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	p := launchServe(t, args...)
	select {
	case p.addr = <-p.started:
	case <-p.done:
		t.Fatalf("gregor exited before starting:\n%s", p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("gregor did not start:\n%s", p.log())
	}
	return p
}

// waitExit waits for the process to end by itself and returns its exit
// code and output.
func (p *serveProcess) waitExit(d time.Duration) (int, string) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("gregor did not exit within %v:\n%s", d, p.log())
	}
	return p.cmd.ProcessState.ExitCode(), p.log()
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

func (p *serveProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *serveProcess) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code, out := p.waitExit(30 * time.Second); code != 0 {
		p.t.Fatalf("gregor exited with %d after SIGTERM:\n%s", code, out)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
