package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The memory and metadata targets of the performance issue, which
// -memory measures on gregor alone.
const (
	targetIdleRSSMiB       = 30
	targetPartitionsRSSMiB = 64
	targetPartitionsFDs    = 1000
	targetConnsRSSMiB      = 100
	targetCreatesPerSec    = 1000
)

// memoryOptions size the -memory run.
type memoryOptions struct {
	partitions int           // idle partitions
	conns      int           // idle connections
	topics     int           // one-partition topics created for CreateTopics/s
	idle       time.Duration // how long the broker idles before each reading
	// profile, when set, is a directory into which each reading also
	// saves the broker's heap profile (http.pprof.enable), so that a
	// figure comes with what holds it.
	profile string
}

// figure is one line of the -memory report.
type figure struct {
	What   string
	Value  string
	Target string
	Met    string // "yes", "no" or "" when there is no target
}

// procFigures reads a process's resident memory and open descriptors.
func procFigures(pid int) (rssMiB float64, fds int, err error) {
	rss, err := procRSS(pid)
	if err != nil {
		return 0, 0, err
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("open descriptors: %w", err)
	}
	return float64(rss) / 1024, len(ents), nil
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// gregorProc is a gregor serve process on a data directory that
// outlives it, so that it can be stopped cleanly and started again.
type gregorProc struct {
	cmd  *exec.Cmd
	addr string
	// httpAddr is its http.listener when started with profiles on.
	httpAddr string
	done     chan struct{}
}

// startGregorOn runs `gregor serve` on dataDir at listen and waits for
// its start-up line; the log goes to logPath. With pprof, the broker
// also serves its profiles on an http.listener of its choosing.
func startGregorOn(bin, dataDir, listen, logPath string, pprof bool) (*gregorProc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start gregor: %w", err)
	}
	args := []string{"serve", "--data-dir", dataDir, "--listen", listen}
	if pprof {
		args = append(args, "--override", "http.listener=127.0.0.1:0", "--override", "http.pprof.enable=true")
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = logFile
	cmd.Stderr = io.MultiWriter(logFile, pw)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start gregor: %w", err)
	}
	g := &gregorProc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); pw.Close(); logFile.Close(); close(g.done) }()
	started := make(chan string, 1)
	httpAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), `msg="http listener" addr=`); ok {
				httpAddr <- strings.Fields(rest)[0]
			}
			if _, rest, ok := strings.Cut(sc.Text(), `msg="gregor started" addr=`); ok {
				started <- strings.Fields(rest)[0]
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case g.addr = <-started:
		select {
		case g.httpAddr = <-httpAddr:
		default:
		}
		return g, nil
	case <-g.done:
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("start gregor: exited: %s", truncate(log, 2000))
	case <-time.After(5 * time.Minute):
		g.stop()
		return nil, errors.New("start gregor: not started within 5 minutes")
	}
}

// startFreshGregor starts a gregor on an empty data directory,
// work/name/data, at a free loopback port, its log in work/name/gregor.log,
// and returns it with its data directory. pprof is startGregorOn's.
func startFreshGregor(bin, work, name string, pprof bool) (*gregorProc, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("start gregor %s: pick a port: %w", name, err)
	}
	listen := l.Addr().String()
	l.Close()
	data := filepath.Join(work, name, "data")
	if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
		return nil, "", fmt.Errorf("start gregor %s: %w", name, err)
	}
	g, err := startGregorOn(bin, data, listen, filepath.Join(work, name, "gregor.log"), pprof)
	return g, data, err
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after
// two minutes: a broker of thousands of partitions flushes each).
func (g *gregorProc) stop() error {
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		return nil
	case <-time.After(2 * time.Minute):
		g.cmd.Process.Kill()
		<-g.done
		return errors.New("gregor did not stop within 2 minutes of SIGTERM")
	}
}

// runMemory measures the memory and metadata targets on fresh gregor
// processes: idle RSS; CreateTopics/s of one-partition topics, one at a
// time and from 8 clients at once; RSS and descriptors with many idle
// partitions, before and after a clean restart (whether segments are
// opened lazily shows in the descriptors); RSS with many idle
// connections, each of which has completed an ApiVersions exchange.
func runMemory(ctx context.Context, o memoryOptions, work, bin string) ([]figure, error) {
	var figs []figure
	fresh := func(name string) (*gregorProc, string, error) {
		return startFreshGregor(bin, work, name, o.profile != "")
	}
	// reading takes a process's figures and, with -memory-profile, saves
	// its heap profile (inuse and alloc, and the runtime's MemStats in
	// the text form) and goroutines next to them, named after the reading.
	reading := func(g *gregorProc, name string) (float64, int, error) {
		rss, fds, err := procFigures(g.cmd.Process.Pid)
		if err != nil || o.profile == "" {
			return rss, fds, err
		}
		for file, path := range map[string]string{
			name + ".heap.pb.gz":     "/debug/pprof/heap",
			name + ".heap.txt":       "/debug/pprof/heap?debug=1",
			name + ".goroutines.txt": "/debug/pprof/goroutine?debug=1",
		} {
			if err := saveProfile(g.httpAddr, path, filepath.Join(o.profile, file)); err != nil {
				return rss, fds, err
			}
		}
		return rss, fds, nil
	}
	idle := func(what string) {
		slog.Info("idling before the reading", "what", what, "for", o.idle)
		select {
		case <-ctx.Done():
		case <-time.After(o.idle):
		}
	}

	// Idle RSS, then CreateTopics/s on the same process.
	g, _, err := fresh("idle")
	if err != nil {
		return nil, err
	}
	idle("idle RSS")
	rss, fds, err := reading(g, "idle")
	if err != nil {
		g.stop()
		return nil, err
	}
	figs = append(figs, figure{"idle RSS after start (empty data dir)", fmt.Sprintf("%.1f MiB, %d fds", rss, fds),
		fmt.Sprintf("≤ %d MiB", targetIdleRSSMiB), met(rss <= targetIdleRSSMiB)})
	for _, workers := range []int{1, 8} {
		rate, err := createTopicsRate(ctx, g.addr, fmt.Sprintf("ct%d-", workers), o.topics, workers)
		if err != nil {
			g.stop()
			return nil, err
		}
		figs = append(figs, figure{fmt.Sprintf("CreateTopics/s, %d one-partition topics, one per request, %d client(s) at once", o.topics, workers),
			fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("≥ %d/s", targetCreatesPerSec), met(rate >= targetCreatesPerSec)})
	}
	if err := g.stop(); err != nil {
		return nil, err
	}

	// Idle partitions, then a clean restart on the same data.
	g, data, err := fresh("partitions")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := createPartitions(ctx, g.addr, o.partitions); err != nil {
		g.stop()
		return nil, err
	}
	took := time.Since(start)
	idle("idle partitions")
	rss, fds, err = reading(g, "partitions")
	if err != nil {
		g.stop()
		return nil, err
	}
	figs = append(figs, figure{fmt.Sprintf("%d idle partitions, empty, just created (%.1f s to create, %.0f partitions/s)", o.partitions, took.Seconds(), float64(o.partitions)/took.Seconds()),
		fmt.Sprintf("%.1f MiB, %d fds", rss, fds),
		fmt.Sprintf("≤ %d MiB, ≤ %d fds", targetPartitionsRSSMiB, targetPartitionsFDs), met(rss <= targetPartitionsRSSMiB && fds <= targetPartitionsFDs)})
	listen := g.addr
	stopStart := time.Now()
	if err := g.stop(); err != nil {
		return nil, err
	}
	stopTook := time.Since(stopStart)
	restart := time.Now()
	if g, err = startGregorOn(bin, data, listen, filepath.Join(work, "partitions", "gregor-restart.log"), o.profile != ""); err != nil {
		return nil, err
	}
	startTook := time.Since(restart)
	idle("idle partitions after a restart")
	rss, fds, err = reading(g, "partitions-restart")
	g.stop()
	if err != nil {
		return nil, err
	}
	figs = append(figs, figure{fmt.Sprintf("the same %d partitions after a clean restart (stop %.1f s, start %.1f s)", o.partitions, stopTook.Seconds(), startTook.Seconds()),
		fmt.Sprintf("%.1f MiB, %d fds", rss, fds),
		fmt.Sprintf("≤ %d MiB, ≤ %d fds", targetPartitionsRSSMiB, targetPartitionsFDs), met(rss <= targetPartitionsRSSMiB && fds <= targetPartitionsFDs)})
	os.RemoveAll(data)

	// Idle connections.
	g, _, err = fresh("conns")
	if err != nil {
		return nil, err
	}
	defer g.stop()
	before, _, err := reading(g, "conns-before")
	if err != nil {
		return nil, err
	}
	conns, err := openIdleConns(ctx, g.addr, o.conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	idle("idle connections")
	rss, fds, err = reading(g, "conns")
	if err != nil {
		return nil, err
	}
	figs = append(figs, figure{fmt.Sprintf("%d idle connections (each after one ApiVersions exchange); %.1f MiB before them", o.conns, before),
		fmt.Sprintf("%.1f MiB, %d fds, %.1f KiB per connection", rss, fds, (rss-before)*1024/float64(o.conns)),
		fmt.Sprintf("≤ %d MiB", targetConnsRSSMiB), met(rss <= targetConnsRSSMiB)})
	return figs, nil
}

// saveProfile writes what the broker's http listener at addr serves at
// path into file.
func saveProfile(addr, path, file string) error {
	if addr == "" {
		return errors.New("profile: the broker logged no http listener")
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", path, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return f.Close()
}

// createTopicsRate creates n one-partition topics named prefix+i, one
// topic per CreateTopics request, from workers clients at once, and
// returns the topics created per second.
func createTopicsRate(ctx context.Context, addr, prefix string, n, workers int) (float64, error) {
	return createTopicsBatched(ctx, []string{addr}, prefix, n, 1, workers, 1)
}

// createPartitions creates topics of up to 1,000 partitions until there
// are n partitions, and waits until every one has a leader.
func createPartitions(ctx context.Context, addr string, n int) error {
	cl, adm, err := adminClient(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := 0; n > 0; i++ {
		p := min(n, 1000)
		if err := createTopic(ctx, adm, fmt.Sprintf("idle-%d", i), p); err != nil {
			return err
		}
		n -= p
	}
	return nil
}

// openIdleConns opens n connections to addr, each of which sends an
// ApiVersions v0 request and reads the answer, so that the broker holds
// an authenticated, fully set-up connection for each.
func openIdleConns(ctx context.Context, addr string, n int) ([]net.Conn, error) {
	// size, api key 18, version 0, correlation id, null client id
	req := make([]byte, 14)
	binary.BigEndian.PutUint32(req[0:], 10)
	binary.BigEndian.PutUint16(req[4:], 18)
	binary.BigEndian.PutUint16(req[6:], 0)
	binary.BigEndian.PutUint16(req[12:], 0xffff)
	var conns []net.Conn
	var d net.Dialer
	for i := range n {
		if ctx.Err() != nil {
			return conns, ctx.Err()
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return conns, fmt.Errorf("connection %d: %w", i, err)
		}
		conns = append(conns, c)
		binary.BigEndian.PutUint32(req[8:], uint32(i))
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(req); err != nil {
			return conns, fmt.Errorf("connection %d: ApiVersions: %w", i, err)
		}
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return conns, fmt.Errorf("connection %d: ApiVersions answer: %w", i, err)
		}
		size := binary.BigEndian.Uint32(hdr[:4])
		if corr := binary.BigEndian.Uint32(hdr[4:]); corr != uint32(i) || size < 6 || size > 1<<20 {
			return conns, fmt.Errorf("connection %d: ApiVersions answer of %d bytes for correlation id %d", i, size, corr)
		}
		rest := make([]byte, size-4)
		if _, err := io.ReadFull(c, rest); err != nil {
			return conns, fmt.Errorf("connection %d: ApiVersions answer: %w", i, err)
		}
		if code := binary.BigEndian.Uint16(rest[:2]); code != 0 {
			return conns, fmt.Errorf("connection %d: ApiVersions error code %d", i, code)
		}
		c.SetDeadline(time.Time{})
		if (i+1)%2000 == 0 {
			slog.Info("idle connections open", "n", i+1)
		}
	}
	return conns, nil
}

// renderTargets writes figures against their targets (-memory and the
// cluster cases) as a markdown table.
func renderTargets(when string, m machine, figs []figure, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s on %d cores, %s; load average %.2f at the start, %.2f at the end.\n\n", when, m.CPUs, m.Model, m.LoadStart, m.LoadEnd)
	if w := m.loadWarning(); w != "" {
		fmt.Fprintf(&b, "**%s**\n\n", w)
	}
	b.WriteString("| what | figure | target | met |\n|---|---|---|---|\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.What, f.Value, f.Target, f.Met)
	}
	fmt.Fprintf(&b, "\n```\n%s\n```\n", command)
	return b.String()
}
