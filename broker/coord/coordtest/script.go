package coordtest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The scripts in a coordinator's testdata/*.txt are datadriven tests: each
// case is a command, a line "----" and the expected output, ended by a
// blank line. Run with -rewrite to regenerate the expected output, then
// review the diff.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata scripts with the actual output")

// RunScripts runs every testdata/*.txt script as a subtest. newScript
// starts a fresh coordinator for a script and returns how to run one of
// its commands, which returns the command's output.
func RunScripts(t *testing.T, newScript func(t *testing.T) (run func(line string) string)) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runScript(t, f, newScript(t))
		})
	}
}

type scriptCase struct {
	line    int
	command string
	want    string
}

func parseScript(t *testing.T, path string) (cases []scriptCase, comments map[int][]string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	comments = make(map[int][]string)
	var pending []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			pending = append(pending, l)
			continue
		}
		c := scriptCase{line: i + 1, command: l}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command without ----", path, c.line)
		}
		var out []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		c.want = strings.Join(out, "\n")
		comments[len(cases)] = pending
		pending = nil
		cases = append(cases, c)
	}
	return cases, comments
}

func runScript(t *testing.T, path string, run func(line string) string) {
	cases, comments := parseScript(t, path)
	var rewritten strings.Builder
	for i, c := range cases {
		got := strings.TrimRight(run(c.command), "\n")
		if *rewrite {
			for _, cm := range comments[i] {
				rewritten.WriteString(cm + "\n")
			}
			fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", c.command, got)
			continue
		}
		if got != c.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.command, got, c.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Args is a script command: its name, then positional arguments and
// key=value ones (a key holds no "/", so topic/partition stays
// positional).
type Args struct {
	Name string
	Pos  []string
	KV   map[string]string
	T    *testing.T
	Line string
}

// ParseArgs splits a command line.
func ParseArgs(t *testing.T, line string) Args {
	fields := strings.Fields(line)
	a := Args{Name: fields[0], KV: map[string]string{}, T: t, Line: line}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok && !strings.Contains(k, "/") {
			a.KV[k] = v
		} else {
			a.Pos = append(a.Pos, f)
		}
	}
	return a
}

// Str is argument k, or def when absent.
func (a Args) Str(k, def string) string {
	if v, ok := a.KV[k]; ok {
		return v
	}
	return def
}

// Int is argument k as a number, or def when absent; a value that is not
// a number fails the test.
func (a Args) Int(k string, def int64) int64 {
	v, ok := a.KV[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.T.Fatalf("%s: %s=%q is not a number", a.Line, k, v)
	}
	return n
}

// OptStr is argument k, or nil when absent.
func (a Args) OptStr(k string) *string {
	v, ok := a.KV[k]
	if !ok {
		return nil
	}
	return &v
}

// Requests are the requests a script issued whose answers it prints once
// they arrive.
type Requests struct {
	mu   sync.Mutex
	list []*request
}

type request struct {
	label  string
	answer string
	done   bool
	fresh  bool // issued by the current command
}

// Add tracks a request; answer records its answer (the first one counts)
// from any goroutine.
func (rs *Requests) Add(label string) (answer func(string)) {
	r := &request{label: label, fresh: true}
	rs.mu.Lock()
	rs.list = append(rs.list, r)
	rs.mu.Unlock()
	return func(a string) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if !r.done {
			r.done, r.answer = true, a
		}
	}
}

// Open counts the requests not answered yet.
func (rs *Requests) Open() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, r := range rs.list {
		if !r.done {
			n++
		}
	}
	return n
}

// Report writes "label: answer" for every request answered since the last
// report and "label: waiting" for those the current command issued that
// are not, then forgets the answered ones.
func (rs *Requests) Report(out *strings.Builder) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.list {
		switch {
		case r.done:
			fmt.Fprintf(out, "%s: %s\n", r.label, r.answer)
		case r.fresh:
			fmt.Fprintf(out, "%s: waiting\n", r.label)
		}
		r.fresh = false
	}
	rs.list = slices.DeleteFunc(rs.list, func(r *request) bool { return r.done })
}

// ErrName is a Kafka error code's name as scripts print it: NONE for 0.
func ErrName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && ke.Code == code {
		return ke.Message
	}
	return fmt.Sprint(code)
}

// KafkaError is the Kafka error named name (as ErrName prints it), or nil.
func KafkaError(name string) *kerr.Error {
	for code := int16(-1); code < 200; code++ {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code && e.Message == name {
			return e
		}
	}
	return nil
}

// Duration is positional argument i as a duration ("1500ms"); one that is
// missing or malformed fails the test.
func (a Args) Duration(i int) time.Duration {
	if i >= len(a.Pos) {
		a.T.Fatalf("%s: missing duration", a.Line)
	}
	d, err := time.ParseDuration(a.Pos[i])
	if err != nil {
		a.T.Fatalf("%s: %v", a.Line, err)
	}
	return d
}

// StoreCommand carries out the script command that steers a MemStore:
// "store hold" holds later appends until "store release", "store
// fail=NAME" fails them with errByName(NAME) until "store ok".
func StoreCommand(a Args, s *MemStore, errByName func(name string) error) {
	switch {
	case slices.Contains(a.Pos, "hold"):
		s.Set(true)
	case slices.Contains(a.Pos, "release"):
		s.Set(false)
	case slices.Contains(a.Pos, "ok"):
		s.SetFail(nil)
	case a.KV["fail"] != "":
		s.SetFail(errByName(a.KV["fail"]))
	}
}
