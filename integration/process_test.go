// Package integration runs real gregor processes: built from ./cmd/gregor,
// started on loopback ports, stopped with SIGTERM or SIGKILL, restarted,
// and checked with franz-go for every acknowledged record.
package integration

import (
	"bufio"
	"context"
	"fmt"
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
	dir, err := os.MkdirTemp("", "gregor-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gregorBin = filepath.Join(dir, "gregor")
	build := exec.Command("go", "build", "-race", "-o", gregorBin, "../cmd/gregor")
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
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	done   chan struct{}
	mu     sync.Mutex
	output strings.Builder
}

var startedRE = regexp.MustCompile(`msg="gregor started" addr=(\S+)`)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

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
	cmd := exec.Command(gregorBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			if m := startedRE.FindStringSubmatch(line); m != nil {
				select {
				case started <- m[1]:
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
			t.Logf("gregor output:\n%s", p.log())
		}
	})
	select {
	case p.addr = <-started:
	case <-p.done:
		t.Fatalf("gregor exited before starting:\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("gregor did not start:\n%s", p.log())
	}
	return p
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
