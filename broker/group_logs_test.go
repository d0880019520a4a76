package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// logRecords decodes the JSON log lines captured so far that carry msg and
// every attribute of want.
func logRecords(t *testing.T, logs *slogCapture, msg string, want map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if rec[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// TestClassicRebalanceLogged: two kgo consumers joining one classic group
// and one leaving produce the coordinator's INFO lines an operator follows
// a rebalance by: members added with their client id, "preparing to
// rebalance" with state, old generation and reason, "stabilized group"
// with generation, protocol and member count, and the member removed with
// its reason.
func TestClassicRebalanceLogged(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.GroupInitialRebalanceDelayMs = 0
	logs := &slogCapture{}
	s, err := New(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := &testServer{Server: s, dir: dir, addr: s.Addr().String()}
	createTopic(t, ts.admin(t), "logged", 4, nil)

	const group = "logged-group"
	consumer := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ClientID(id), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics("logged"), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.Balancers(kgo.RangeBalancer()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	poll := func(cl *kgo.Client) {
		ctx := testContext(t)
		for range 3 {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollFetches(pctx)
			cancel()
		}
	}
	c1 := consumer("first-consumer")
	defer c1.Close()
	waitFor(t, "the first generation", func() bool {
		poll(c1)
		return len(logRecords(t, logs, "stabilized group", map[string]any{"group": group, "generation": 1.0})) > 0
	})
	c2 := consumer("second-consumer")
	defer c2.Close()
	waitFor(t, "a generation of two members", func() bool {
		poll(c1)
		poll(c2)
		return len(logRecords(t, logs, "stabilized group", map[string]any{"group": group, "members": 2.0})) > 0
	})

	for _, client := range []string{"first-consumer", "second-consumer"} {
		added := logRecords(t, logs, "added member to group", map[string]any{"group": group, "client_id": client, "level": "INFO", "component": "group-coordinator"})
		if len(added) != 1 {
			t.Fatalf("%d \"added member\" lines for %s:\n%s", len(added), client, logs)
		}
		if m := added[0]["member"].(string); !strings.HasPrefix(m, client+"-") {
			t.Fatalf("member id %q of %s", m, client)
		}
	}
	// The second member's arrival rebalanced the stable first generation.
	prep := logRecords(t, logs, "preparing to rebalance group", map[string]any{"group": group, "state": "Stable", "generation": 1.0})
	if len(prep) == 0 || !strings.Contains(prep[0]["reason"].(string), "joined") {
		t.Fatalf("no rebalance of the stable generation 1 with a reason:\n%s", logs)
	}
	stab := logRecords(t, logs, "stabilized group", map[string]any{"group": group, "members": 2.0})[0]
	if stab["generation"].(float64) < 2 || stab["protocol_type"] != "consumer" || stab["protocol"] != "range" || stab["component"] != "group-coordinator" {
		t.Fatalf("stabilized line %v", stab)
	}

	t.Logf("%v\n%v", prep[0], stab)
	c2.Close()
	waitFor(t, "the second member's removal", func() bool {
		poll(c1)
		return len(logRecords(t, logs, "removed member from group", map[string]any{"group": group, "client_id": "second-consumer"})) > 0
	})
	rm := logRecords(t, logs, "removed member from group", map[string]any{"group": group, "client_id": "second-consumer"})[0]
	if !strings.Contains(rm["reason"].(string), "LeaveGroup") {
		t.Fatalf("removal reason %v", rm)
	}
	waitFor(t, "the rebalance after the leave", func() bool {
		poll(c1)
		return len(logRecords(t, logs, "preparing to rebalance group", map[string]any{"group": group, "reason": "members left by LeaveGroup"})) > 0
	})
}
