package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/compat/harness"
)

// The JVM applications built on Kafka's client (Kafka Connect's workers,
// a Kafka Streams application) run as their own processes, started,
// stopped and killed by the tests, against a gregor and against the
// Kafka reference in turn: each check must hold on both.

// forEachTarget runs fn as a subtest against a fresh gregor (props set)
// and against the run's Kafka reference (COMPAT_KAFKA_BOOTSTRAP, when
// set, names a running reference to use instead). The two run one after
// the other: each starts JVMs, and the machine is small.
func forEachTarget(t *testing.T, props map[string]string, fn func(t *testing.T, addr string)) {
	forEachTargetCrash(t, props, func(t *testing.T, addr string, _ func(*testing.T)) { fn(t, addr) })
}

// forEachTargetCrash is forEachTarget whose fn also gets a function that
// SIGKILLs the broker and starts it again on the same data directory and
// address: the gregor process; on Kafka, with COMPAT_LONG set (make
// compat-long), a reference of the test's own (the run's shared ones
// serve other tests), started with props. Otherwise on Kafka it is nil:
// a reference of its own costs a JVM boot and a recovery, minutes on the
// CI machine.
func forEachTargetCrash(t *testing.T, props map[string]string, fn func(t *testing.T, addr string, crash func(*testing.T))) {
	if testing.Short() {
		t.Skip("starts JVMs; not under -short")
	}
	// The JVM application tests run beside each other (after the
	// suite's sequential tests): most of their time is waiting on
	// workers and groups, not CPU.
	t.Parallel()
	if err := javaAvailable(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	targets := []string{harness.TargetGregor}
	if useKafka() || os.Getenv("COMPAT_KAFKA_BOOTSTRAP") != "" {
		if os.Getenv("COMPAT_KAFKA_BOOTSTRAP") == "" {
			startKafkaRefs()
		}
		targets = append(targets, harness.TargetKafka)
	}
	for _, tg := range targets {
		t.Run(tg, func(t *testing.T) {
			addr := os.Getenv("COMPAT_KAFKA_BOOTSTRAP")
			var crash func(*testing.T)
			if tg == harness.TargetGregor {
				g := startGregor(t, props)
				addr = g.Addr
				crash = func(t *testing.T) {
					if err := g.Kill(); err != nil {
						t.Fatal(err)
					}
					ng, err := harness.Restart(gregorBin, g, harness.Options{Props: props, StartTimeout: 60 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						if err := ng.Close(); err != nil {
							t.Errorf("gregor restarted at %s: %v", ng.Addr, err)
						}
					})
					g = ng
				}
			} else if addr == "" && os.Getenv("COMPAT_LONG") == "" {
				addr = kafkaReference(t).main.Addr
			} else if addr == "" {
				kafkaReference(t) // the run's references started: the JVMs are there
				k := ownKafkaRef(t, props)
				addr = k.Addr
				crash = func(t *testing.T) {
					if err := k.Kill(); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
					defer cancel()
					if err := k.Resume(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			fn(t, addr, crash)
		})
	}
}

// ownKafkaRef starts a single-node Kafka reference for one test, in the
// run's work dir, stopped when the test ends; its server.log is kept in
// the test's output when the test fails.
func ownKafkaRef(t *testing.T, props map[string]string) *harness.KafkaRef {
	t.Helper()
	script, _ := filepath.Abs("kafka-ref/kafka-ref.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	k, err := startKafkaRef(ctx, script, name, props)
	if err != nil {
		t.Fatalf("a Kafka reference of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Kafka reference's log ends:\n%s", k.Tail(4000))
		}
		if err := k.Close(); err != nil {
			t.Error(err)
		}
	})
	return k
}

// jvmApp is one JVM the test started, its output in a file.
type jvmApp struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startJVM runs class with args on classpath cp (javaBuilt.cp: the
// runner's classes and Kafka's jars; connectClasspath: Kafka Connect's),
// its stdout and stderr in a file of dir. The process is killed when the
// test ends, if it still runs.
func startJVM(t *testing.T, dir, name, cp, class string, args ...string) *jvmApp {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jargs := append([]string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)
	cmd := exec.Command("java", jargs...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	a := &jvmApp{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() { a.kill() })
	return a
}

// kill ends the JVM at once (SIGKILL) and waits for it.
func (a *jvmApp) kill() {
	select {
	case <-a.done:
		return
	default:
	}
	a.cmd.Process.Kill()
	<-a.done
}

// stop asks the JVM to end (SIGTERM, which runs Kafka's shutdown hooks)
// and waits up to d before killing it; it reports whether it ended by
// itself.
func (a *jvmApp) stop(d time.Duration) bool {
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return true
	case <-time.After(d):
		a.kill()
		return false
	}
}

// exited reports whether the JVM has ended.
func (a *jvmApp) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// tail is the last n bytes of the JVM's output, for failure messages.
func (a *jvmApp) tail(n int) string {
	b, _ := os.ReadFile(a.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitJVM polls cond every 200 ms until it holds, the app dies or d
// passes; it fails the test with what cond last said.
func waitJVM(t *testing.T, d time.Duration, app *jvmApp, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if app != nil && app.exited() {
			t.Fatalf("%s: the JVM ended (%v) with %s; its output ends:\n%s", what, app.err, state, app.tail(3000))
		}
		if time.Now().After(deadline) {
			tail := ""
			if app != nil {
				tail = "; the JVM's output ends:\n" + app.tail(3000)
			}
			t.Fatalf("%s: not after %v: %s%s", what, d, state, tail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freeLoopbackPort is a TCP port on 127.0.0.1 nothing listened on a
// moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeProps writes a .properties file.
func writeProps(t *testing.T, path string, props map[string]string) {
	t.Helper()
	var b strings.Builder
	for k, v := range props {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileLines reads a text file's lines (none when it does not exist yet).
func fileLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// appendLines appends lines to a text file.
func appendLines(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// appAdmin is a franz-go admin client for addr, closed at test end.
func appAdmin(t *testing.T, addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// appCtx is a context for one test's admin calls.
func appCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName is a name for this run's topics and groups on a shared
// reference broker.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// connectJars is Kafka Connect's classpath (java/classpath.sh connect),
// resolved once per run.
var connectJars struct {
	once sync.Once
	cp   string
	err  error
}

// connectClasspath is Kafka Connect's classpath, or fails the test.
func connectClasspath(t *testing.T) string {
	t.Helper()
	connectJars.once.Do(func() {
		out, err := exec.Command("bash", filepath.Join("java", "classpath.sh"), "connect").Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, lastLines(ee.Stderr, 6))
			}
			connectJars.err = fmt.Errorf("resolve Kafka Connect's jars (java/classpath.sh connect): %w", err)
			return
		}
		connectJars.cp = strings.TrimSpace(string(out))
	})
	if connectJars.err != nil {
		t.Fatal(connectJars.err)
	}
	return connectJars.cp
}
