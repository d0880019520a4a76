package controller

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tiny datadriven runner in the style of etcd raft's testdata: a script
// is a sequence of cases
//
//	# comments
//	command key=value flag
//	input line
//	----
//	expected output
//	<blank line>
//
// Run with -rewrite to regenerate the expected output, then review the diff.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

type scriptCase struct {
	comments []string
	line     int
	raw      string
	cmd      string
	args     map[string]string
	input    []string
	want     string
}

func (c *scriptCase) has(flag string) bool { _, ok := c.args[flag]; return ok }

func parseScript(t *testing.T, path string) []*scriptCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []*scriptCase
	var cur *scriptCase
	var comments []string
	inWant := false
	var want []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case inWant && line == "":
			cur.want = strings.Join(want, "\n")
			cases = append(cases, cur)
			cur, want, inWant = nil, nil, false
		case inWant:
			want = append(want, line)
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
			comments = append(comments, line)
		case cur == nil:
			fields := strings.Fields(line)
			cur = &scriptCase{comments: comments, line: n, raw: line, cmd: fields[0], args: parseArgs(fields[1:])}
			comments = nil
		case line == "----":
			inWant = true
		default:
			cur.input = append(cur.input, line)
		}
	}
	if cur != nil {
		if !inWant {
			t.Fatalf("%s:%d: case without ----", path, cur.line)
		}
		cur.want = strings.Join(want, "\n")
		cases = append(cases, cur)
	}
	return cases
}

func parseArgs(fields []string) map[string]string {
	args := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	return args
}

func runScript(t *testing.T, path string, run func(c *scriptCase) string) {
	cases := parseScript(t, path)
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(run(c), "\n")
		if !*rewrite && got != c.want {
			t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", filepath.Base(path), c.line, c.cmd, got, c.want)
		}
		for _, l := range c.comments {
			fmt.Fprintln(&out, l)
		}
		fmt.Fprintln(&out, c.raw)
		for _, l := range c.input {
			fmt.Fprintln(&out, l)
		}
		fmt.Fprintf(&out, "----\n%s\n\n", got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
