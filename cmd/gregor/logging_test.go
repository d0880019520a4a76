package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLoggerOneComponent: loggers nested with their own component (the
// quorum's transport in the broker's, raft's lines in the node's) write
// one component key, the innermost, in text and in JSON; lines of the
// broker itself say component=broker; the level filters.
func TestLoggerOneComponent(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("plain", "k", 1)
	q := log.With("component", "quorum", "node", 1)
	q.Info("nested", "component", "raft")
	q.With("component", "raftmeta-transport").Warn("deeper")
	log.Debug("hidden")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"component=broker", "component=raft", "component=raftmeta-transport"}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", buf.String())
	}
	for i, l := range lines {
		if strings.Count(l, "component=") != 1 || !strings.HasSuffix(l, want[i]) {
			t.Errorf("line %d: %q, want one %s, last", i, l, want[i])
		}
	}

	buf.Reset()
	log, err = newLogger(&buf, "DEBUG", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.With("component", "groups").With("component", "coordinator-shard").Debug("rebalance", "group", "g")
	var obj map[string]any
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil || obj["component"] != "coordinator-shard" || obj["group"] != "g" || obj["level"] != "DEBUG" {
		t.Errorf("json line %s: %v", buf.String(), err)
	}
	if strings.Count(buf.String(), `"component"`) != 1 {
		t.Errorf("json line with more than one component: %s", buf.String())
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := newLogger(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("newLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// TestServeLogSettings: gregor serve writes JSON lines with log.format=json
// (each with one component) and refuses an unknown log.format or
// --log-level at start, naming the property; --log-level info writes no
// DEBUG line.
func TestServeLogSettings(t *testing.T) {
	p := launchServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "log.format=json", "--log-level", "info")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.log(), `"msg":"gregor started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no JSON start line:\n%s", p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	for _, l := range strings.Split(strings.TrimSpace(p.log()), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		if _, ok := obj["component"]; !ok || strings.Count(l, `"component"`) != 1 {
			t.Errorf("line without one component: %q", l)
		}
		if obj["level"] == "DEBUG" {
			t.Errorf("DEBUG line under --log-level info: %q", l)
		}
	}
	for _, bad := range []struct {
		args []string
		key  string
	}{
		{[]string{"--override", "log.format=xml"}, "log.format"},
		{[]string{"--log-level", "loud"}, "log.level"},
	} {
		p := launchServe(t, append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, bad.args...)...)
		if code, out := p.waitExit(20 * time.Second); code == 0 || !strings.Contains(out, bad.key) {
			t.Errorf("serve %v: exit %d\n%s", bad.args, code, out)
		}
	}
}
