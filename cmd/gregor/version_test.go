package main

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestRunVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	var out strings.Builder
	if err := runVersion(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("output %q has fewer than 3 lines", out.String())
	}
	want := []string{
		"gregor v1.2.3",
		"go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"protocol: Kafka 4.2 protocol",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i+1, lines[i], w)
		}
	}
	if len(lines) == 4 && !strings.HasPrefix(lines[3], "commit: ") {
		t.Errorf("line 4 = %q, want a commit", lines[3])
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRunVersionWriteError(t *testing.T) {
	if err := runVersion(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("runVersion to a failing writer = %v, want its error", err)
	}
}
