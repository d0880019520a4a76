package compat

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/compat/harness"
)

var (
	flagResults  = flag.String("compat.results", "", "write the (client, scenario) results to this file (tab-separated)")
	flagUpdate   = flag.Bool("compat.update", false, "rewrite expected.txt with this run's outcomes")
	flagVersions = flag.String("compat.versions", "", "write the API versions Gregor advertises to this file")
)

// gregorBin is the gregor binary built once for the whole run.
var gregorBin string

// workDir holds the binary and every gregor's data; removed at the end.
var workDir string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "gregor-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if bin := os.Getenv("GREGOR_BIN"); bin != "" {
		gregorBin = bin
	} else {
		root, _ := filepath.Abs("..")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		gregorBin, err = harness.Build(ctx, root, workDir, raceEnabled)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// startGregor runs a gregor process for the test, stopped at its end; a
// data race or panic in the broker fails the test.
func startGregor(t testing.TB, props map[string]string) *harness.Gregor {
	t.Helper()
	g, err := harness.Start(gregorBin, workDir, harness.Options{Props: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("gregor at %s: %v", g.Addr, err)
		}
	})
	return g
}
