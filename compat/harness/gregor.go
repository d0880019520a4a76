// Package harness runs the compatibility suite's moving parts: it builds
// and starts real gregor processes, keeps the (client, scenario) results,
// compares them with the expected table committed in the repo, and reads
// the API-versions data that docs/compatibility.md is generated from.
package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Build compiles cmd/gregor of the module at root into dir and returns the
// binary's path. race builds it with the race detector, so a data race in
// the broker under a real client is reported by the process itself.
func Build(ctx context.Context, root, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "gregor")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/gregor")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build gregor: %w\n%s", err, out)
	}
	return bin, nil
}

// Options configure one gregor process.
type Options struct {
	// Listen is the PLAINTEXT listener's host:port; empty means a free
	// loopback port (127.0.0.1:0).
	Listen string
	// Props are server.properties overrides (--override name=value).
	Props map[string]string
	// StartTimeout bounds the wait for the "gregor started" line.
	StartTimeout time.Duration
}

// Gregor is a running gregor process with its data in a private directory.
type Gregor struct {
	// Addr is the address clients bootstrap from (host:port).
	Addr string
	// LogPath is the file that holds the process's stderr.
	LogPath string

	cmd      *exec.Cmd
	dir      string
	done     chan struct{}
	waitErr  error
	once     sync.Once
	closeErr error
	// killed is set by Kill: the exit status is the SIGKILL's and the
	// data directory belongs to the process Restart starts on it.
	killed atomic.Bool
	// restarts counts the processes Restart started on dir, naming
	// their logs.
	restarts int
}

var startedRE = regexp.MustCompile(`msg="gregor started" addr=(\S+)`)

// Start runs bin as `gregor serve` in a new data directory under parent
// and waits until it listens.
func Start(bin, parent string, o Options) (*Gregor, error) {
	dir, err := os.MkdirTemp(parent, "gregor-")
	if err != nil {
		return nil, fmt.Errorf("start gregor: %w", err)
	}
	listen := o.Listen
	if listen == "" {
		// A port chosen here, not port 0: gregor serve advertises the
		// configured port, so with 0 clients would be sent to port 0.
		if listen, err = freePort(); err != nil {
			return nil, fmt.Errorf("start gregor: %w", err)
		}
	}
	return startIn(bin, dir, "gregor.log", listen, o)
}

// Restart starts bin again on the data directory and address of g, which
// must have exited (Kill), the way an operator restarts a crashed broker:
// same node, same files, same port. Its log goes to a new file in the
// same directory; the new process owns the directory from now on.
func Restart(bin string, g *Gregor, o Options) (*Gregor, error) {
	select {
	case <-g.done:
	default:
		return nil, fmt.Errorf("restart gregor at %s: the process is still running", g.Addr)
	}
	g.restarts++
	ng, err := startIn(bin, g.dir, fmt.Sprintf("gregor-restart-%d.log", g.restarts), g.Addr, o)
	if err != nil {
		return nil, err
	}
	ng.restarts = g.restarts
	return ng, nil
}

func startIn(bin, dir, logName, listen string, o Options) (*Gregor, error) {
	args := []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", listen}
	for k, v := range o.Props {
		args = append(args, "--override", k+"="+v)
	}
	logPath := filepath.Join(dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start gregor: %w", err)
	}
	pr, pw := io.Pipe()
	cmd := exec.Command(bin, args...)
	// The process dies with the test binary, even on a test timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = logFile
	// The log goes to the file and, until the start line, to the scanner.
	cmd.Stderr = io.MultiWriter(logFile, pw)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start gregor: %w", err)
	}
	g := &Gregor{LogPath: logPath, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		g.waitErr = cmd.Wait()
		pw.Close()
		logFile.Close()
		close(g.done)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := startedRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		// Drain so that the process never blocks on a full pipe.
		io.Copy(io.Discard, pr)
	}()
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	select {
	case a := <-addr:
		g.Addr = a
		return g, nil
	case <-g.done:
		return nil, fmt.Errorf("start gregor: exited before listening (%v): %s", g.waitErr, tail(logPath, 2000))
	case <-time.After(timeout):
		g.Close()
		return nil, fmt.Errorf("start gregor: not listening after %v: %s", timeout, tail(logPath, 2000))
	}
}

// Kill ends the process with SIGKILL, as a crash would (no shutdown, no
// flush of what gregor holds in memory), and waits for it to exit. The
// data directory stays for Restart; Close of a killed process checks its
// log only.
func (g *Gregor) Kill() error {
	g.killed.Store(true)
	if err := g.cmd.Process.Kill(); err != nil {
		select {
		case <-g.done:
		default:
			return fmt.Errorf("kill gregor at %s: %w", g.Addr, err)
		}
	}
	<-g.done
	return nil
}

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Close stops the process with SIGTERM (SIGKILL after 10 s), removes its
// data and returns an error when it did not stop cleanly or the race
// detector reported a data race.
func (g *Gregor) Close() error {
	g.once.Do(func() {
		g.closeErr = g.stop()
	})
	return g.closeErr
}

func (g *Gregor) stop() error {
	select {
	case <-g.done:
	default:
		g.cmd.Process.Signal(os.Interrupt)
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			g.cmd.Process.Kill()
			<-g.done
			return fmt.Errorf("gregor did not stop within 10s of SIGINT: %s", tail(g.LogPath, 2000))
		}
	}
	log, _ := os.ReadFile(g.LogPath)
	var errs []error
	if strings.Contains(string(log), "WARNING: DATA RACE") {
		errs = append(errs, fmt.Errorf("gregor reported a data race: %s", firstRace(string(log))))
	}
	if strings.Contains(string(log), "panic:") {
		errs = append(errs, fmt.Errorf("gregor panicked: %s", tail(g.LogPath, 3000)))
	}
	if g.killed.Load() {
		return errors.Join(errs...)
	}
	if g.waitErr != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("gregor exited with %v: %s", g.waitErr, tail(g.LogPath, 2000)))
	}
	if len(errs) == 0 {
		os.RemoveAll(g.dir)
	}
	return errors.Join(errs...)
}

// Pid is the process id of the running gregor, for reading its CPU time
// and memory from /proc.
func (g *Gregor) Pid() int { return g.cmd.Process.Pid }

// Tail returns the last n bytes of the process's log, for failure reports.
func (g *Gregor) Tail(n int) string { return tail(g.LogPath, n) }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// firstRace returns the first race report of a log, which names both
// goroutines' stacks.
func firstRace(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	rest := log[i:]
	if j := strings.Index(rest, "=================="); j > 0 {
		rest = rest[:j]
	}
	if len(rest) > 4000 {
		rest = rest[:4000]
	}
	return rest
}
