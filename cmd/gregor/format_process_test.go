package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFormatClusterID runs kafka-storage's workflow with real gregor
// processes: a node of a three-node quorum with unformatted dirs stops at
// once and says how to format; `random-uuid` and `format` write
// meta.properties as Kafka does; a node formatted for another cluster
// than the other two stops within seconds with the same advice while the
// two form the cluster; formatted again with the shared id, it joins.
func TestFormatClusterID(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	client, ctrl := freePorts(t, 3), freePorts(t, 3)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	nodeArgs := func(i int) []string {
		props := []string{
			fmt.Sprintf("node.id=%d", i+1),
			"process.roles=broker,controller",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", client[i], ctrl[i]),
			"default.replication.factor=3",
			"offsets.topic.replication.factor=3",
			"transaction.state.log.replication.factor=3",
		}
		args := []string{"--data-dir", dirs[i]}
		for _, p := range props {
			args = append(args, "--override", p)
		}
		return args
	}
	advice := "run `gregor random-uuid` once, then `gregor format --cluster-id"

	// Unformatted, in a multi-node quorum: stop at start, no retrying.
	began := time.Now()
	code, out := launchServe(t, nodeArgs(0)...).waitExit(20 * time.Second)
	if code == 0 || !strings.Contains(out, "not formatted") || !strings.Contains(out, advice) {
		t.Fatalf("unformatted node of a quorum: exit %d\n%s", code, out)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("unformatted node took %v to stop", d)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "meta.properties")); err == nil {
		t.Error("the refused start formatted its dir")
	}

	shared := strings.TrimSpace(mustCLI(t, "", "", "random-uuid"))
	other := strings.TrimSpace(mustCLI(t, "", "", "random-uuid"))
	if len(shared) != 22 || shared == other {
		t.Fatalf("random-uuid printed %q and %q", shared, other)
	}
	for i, id := range []string{shared, shared, other} {
		out := mustCLI(t, "", "", append([]string{"format", "--cluster-id", id}, nodeArgs(i)...)...)
		if !strings.Contains(out, "Formatting "+dirs[i]) {
			t.Errorf("format node %d: %s", i+1, out)
		}
		meta := readProps(t, filepath.Join(dirs[i], "meta.properties"))
		if meta["cluster.id"] != id || meta["node.id"] != fmt.Sprint(i+1) || meta["version"] != "1" || len(meta["directory.id"]) != 22 {
			t.Errorf("node %d meta.properties: %v", i+1, meta)
		}
	}
	// Formatted already: refused, or skipped with --ignore-formatted, but
	// never for another cluster.
	if r := runCLI(t, "", "", append([]string{"format", "-t", other}, nodeArgs(2)...)...); r.code == 0 || !strings.Contains(r.err, "already formatted") || !strings.Contains(r.err, "--ignore-formatted") {
		t.Errorf("format twice: exit %d %s", r.code, r.err)
	}
	if out := mustCLI(t, "", "", append([]string{"format", "-t", other, "--ignore-formatted"}, nodeArgs(2)...)...); !strings.Contains(out, "already formatted") {
		t.Errorf("format --ignore-formatted: %s", out)
	}
	if r := runCLI(t, "", "", append([]string{"format", "-t", shared, "--ignore-formatted"}, nodeArgs(2)...)...); r.code == 0 || !strings.Contains(r.err, "formatted for cluster "+other) {
		t.Errorf("format for another cluster: exit %d %s", r.code, r.err)
	}

	// Node 3 of another cluster: it stops with the advice, well before the
	// 30 s registration timeout; nodes 1 and 2 form the cluster.
	n1, n2 := launchServe(t, nodeArgs(0)...), launchServe(t, nodeArgs(1)...)
	began = time.Now()
	code, out = launchServe(t, nodeArgs(2)...).waitExit(30 * time.Second)
	if code == 0 || !strings.Contains(out, "cannot form a quorum") || !strings.Contains(out, advice) || !strings.Contains(out, shared) {
		t.Fatalf("node of another cluster: exit %d\n%s", code, out)
	}
	if d := time.Since(began); d > 15*time.Second {
		t.Errorf("node of another cluster took %v to stop", d)
	}
	for i, p := range []*serveProcess{n1, n2} {
		select {
		case p.addr = <-p.started:
		case <-p.done:
			t.Fatalf("node %d exited:\n%s", i+1, p.log())
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not start:\n%s", i+1, p.log())
		}
	}

	// Node 3 formatted again, for the shared cluster: it joins.
	if err := os.RemoveAll(dirs[2]); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "", append([]string{"format", "--cluster-id", shared}, nodeArgs(2)...)...)
	n3 := launchServe(t, nodeArgs(2)...)
	select {
	case n3.addr = <-n3.started:
	case <-n3.done:
		t.Fatalf("node 3 exited:\n%s", n3.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("node 3 did not start:\n%s", n3.log())
	}
	var info struct {
		ClusterID string `json:"cluster_id"`
		Brokers   []struct {
			ID int32 `json:"id"`
		} `json:"brokers"`
	}
	cliJSON(t, n1.addr, &info, "cluster", "info")
	if info.ClusterID != shared {
		t.Errorf("cluster info: cluster %q, want %q", info.ClusterID, shared)
	}
}

// readProps reads a properties file written by key=value lines.
func readProps(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}
