package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// connectLineNumber reads the number of a line connectLines wrote
// (checked cheaply: the long run checks a million lines five times a
// second).
func connectLineNumber(l string) (int, bool) {
	digits, ok1 := strings.CutPrefix(l, "line ")
	digits, ok2 := strings.CutSuffix(digits, " of the connect test")
	// Zero-padded to six digits, as %06d writes them: past six, no
	// leading zero.
	if !ok1 || !ok2 || len(digits) < 6 || len(digits) > 6 && digits[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1
}

// atLeastOnce is what a sink file shows of Connect's at-least-once
// delivery across worker kills.
type atLeastOnce struct {
	max     int // the highest line number seen; every line up to it is there
	rewinds int // places where the file goes back to a line already seen
	dups    int // lines seen before, in all
}

// checkAtLeastOnce checks a sink file's lines against the rule of
// Connect's at-least-once delivery, strictly: a worker killed with
// SIGKILL resumes each task from the last offsets it committed (the
// source from the file position in the offsets topic, the sink from its
// group's committed offset), so what it had moved since is moved again,
// in order. Hence, reading the file from its start:
//   - every line is the successor of the line before it (the first is
//     line 1), or a rewind: a line at or before the one before it, from
//     which the file again goes on line by line; any other line (a jump
//     forward) is a loss, and fails;
//   - each rewind is one task resuming: at most three per kill (the
//     source's resume, the sink's, and the source's repeated by the
//     sink's when the sink's replay spans it);
//   - so every line from 1 to the highest appears, in order, and the
//     only duplicates are those replays.
func checkAtLeastOnce(lines []string, maxRewinds int) (atLeastOnce, error) {
	var s atLeastOnce
	prev := 0
	seen := make(map[int]bool, len(lines))
	for i, l := range lines {
		n, ok := connectLineNumber(l)
		switch {
		case !ok:
			return s, fmt.Errorf("sink line %d is %q: not a line of the source", i+1, l)
		case n == prev+1 && !seen[n]:
		case n == prev+1:
			s.dups++
		case n <= prev:
			s.rewinds++
			s.dups++
			if s.rewinds > maxRewinds {
				return s, fmt.Errorf("sink line %d goes back to line %d after line %d: rewind %d, at most %d allowed", i+1, n, prev, s.rewinds, maxRewinds)
			}
		default:
			// Forward past the successor: a loss, or a replay that
			// skipped lines (Connect replays a contiguous range).
			return s, fmt.Errorf("sink line %d is line %d after line %d: lines %d to %d skipped", i+1, n, prev, prev+1, n-1)
		}
		seen[n] = true
		prev = n
		s.max = max(s.max, n)
	}
	return s, nil
}

// TestCheckAtLeastOnce: the checker accepts the replays a resumed task
// makes and refuses losses, reorderings and more rewinds than allowed.
func TestCheckAtLeastOnce(t *testing.T) {
	seq := func(ranges ...[2]int) []string {
		var out []string
		for _, r := range ranges {
			out = append(out, connectLines(r[0], r[1]-r[0]+1)...)
		}
		return out
	}
	// Line numbers past six digits, as the long run writes them.
	for _, n := range []int{1, 999_999, 1_000_000, 12_345_678} {
		if got, ok := connectLineNumber(connectLines(n, 1)[0]); !ok || got != n {
			t.Errorf("line %d read as %d, %v", n, got, ok)
		}
	}
	for _, l := range []string{"line 0000001 of the connect test", "line +00001 of the connect test", "line 000000 of the connect test"} {
		if n, ok := connectLineNumber(l); ok {
			t.Errorf("%q read as line %d", l, n)
		}
	}
	for _, c := range []struct {
		name    string
		lines   []string
		rewinds int
		ok      bool
	}{
		{"exact", seq([2]int{1, 100}), 0, true},
		{"source replay", seq([2]int{1, 60}, [2]int{41, 100}), 1, true},
		{"source and sink replays", seq([2]int{1, 60}, [2]int{41, 70}, [2]int{55, 100}), 2, true},
		{"loss", seq([2]int{1, 60}, [2]int{62, 100}), 0, false},
		{"does not start at 1", seq([2]int{2, 100}), 0, false},
		{"reordered", seq([2]int{1, 10}, [2]int{12, 12}, [2]int{11, 11}, [2]int{13, 20}), 0, false},
		{"too many rewinds", seq([2]int{1, 10}, [2]int{5, 10}, [2]int{5, 10}, [2]int{5, 10}, [2]int{5, 20}), 4, false},
		{"a skip inside a replay", seq([2]int{1, 60}, [2]int{41, 50}, [2]int{52, 100}), 1, false},
		{"not a source line", append(seq([2]int{1, 5}), "line 6"), 0, false},
		{"not zero-padded as the source", append(seq([2]int{1, 5}), "line 6 of the connect test"), 0, false},
	} {
		s, err := checkAtLeastOnce(c.lines, 3)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.ok && (s.rewinds != c.rewinds || s.max != 100) {
			t.Errorf("%s: %+v, want %d rewinds to line 100", c.name, s, c.rewinds)
		}
	}
}

// connectKillSize is how many lines TestConnectDistributed moves and
// how many times it kills the worker; COMPAT_LONG=1 (make compat-long)
// moves 1,000,000 with three kills.
func connectKillSize() (lines, kills int) {
	if os.Getenv("COMPAT_LONG") != "" {
		return 1_000_000, 3
	}
	return 100_000, 1
}

// TestConnectDistributed: a distributed worker keeps its connector
// configs, offsets and statuses in three topics of the broker, which it
// creates compacted; the file source and sink connectors, created over
// its REST API, move 100,000 lines (FileStreamSource into a topic,
// FileStreamSink out of it; the source file written at 10,000 lines a
// second from the worker's start). The worker is SIGKILLed mid-flight,
// once the sink is past a third of the lines and never after all have
// moved, and started again on the same topics. The sink file must then
// hold every line, in order, up to line 100,000 at least (the source
// file keeps growing slowly until it does: see the writer), duplicates
// only as Connect's at-least-once delivery allows (checkAtLeastOnce
// states the rule), and both
// connectors and their tasks report RUNNING. Against gregor and the
// Kafka reference.
func TestConnectDistributed(t *testing.T) {
	total, kills := connectKillSize()
	forEachTarget(t, nil, func(t *testing.T, addr string) {
		dir := t.TempDir()
		name := uniqueName("connect-kill")
		_, adm := appAdmin(t, addr)
		topic := name + "-data"
		internal := map[string]string{"config.storage.topic": name + "-configs", "offset.storage.topic": name + "-offsets", "status.storage.topic": name + "-status"}
		if _, err := adm.CreateTopic(appCtx(t, 30*time.Second), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		rest := "http://127.0.0.1:" + strconv.Itoa(freeLoopbackPort(t))
		worker := filepath.Join(dir, "worker.properties")
		props := map[string]string{
			"bootstrap.servers":                 addr,
			"group.id":                          name,
			"key.converter":                     connectStringConverter,
			"value.converter":                   connectStringConverter,
			"config.storage.replication.factor": "1",
			"offset.storage.replication.factor": "1",
			"status.storage.replication.factor": "1",
			"offset.storage.partitions":         "3",
			"status.storage.partitions":         "1",
			// Offsets committed every second: what a kill replays.
			"offset.flush.interval.ms": "1000",
			// The killed incarnation leaves the group after its session,
			// and its tasks go back to the restarted worker (the same
			// worker id, its REST address) without the 5-minute wait
			// for a lost worker.
			"session.timeout.ms":               "6000",
			"heartbeat.interval.ms":            "2000",
			"scheduled.rebalance.max.delay.ms": "2000",
			"listeners":                        rest,
			"plugin.discovery":                 "service_load",
		}
		for k, v := range internal {
			props[k] = v
		}
		writeProps(t, worker, props)
		hc := &http.Client{Timeout: 10 * time.Second}
		startWorker := func(n int) *jvmApp {
			w := startJVM(t, dir, fmt.Sprintf("worker-%d", n), connectClasspath(t), classConnectDistributed, worker)
			waitJVM(t, 120*time.Second, w, "the worker's REST API", func() (bool, string) {
				resp, err := hc.Get(rest + "/connectors")
				if err != nil {
					return false, err.Error()
				}
				resp.Body.Close()
				return resp.StatusCode == 200, resp.Status
			})
			return w
		}
		w := startWorker(1)

		// The source file grows while the worker runs, is killed and
		// comes back: 10,000 lines a second (20,000 in the long run) up
		// to the lines to move, then a trickle of 200 a second until the
		// sink has them all. FileStreamSource returns a full batch
		// (batch.size lines) even when its reader has reached the end of
		// the file, and reads the lines left in its buffer only once the
		// file grows: without the trickle, the last lines of a backlog
		// could wait forever. The trickle's lines are not waited for.
		src, sink := filepath.Join(dir, "source.txt"), filepath.Join(dir, "sink.txt")
		chunk := 500
		if total > 100_000 {
			chunk = 1000
		}
		var written atomic.Int64
		var enough atomic.Bool // the sink has every line up to total
		writerDone := make(chan struct{})
		stopWriter := make(chan struct{})
		go func() {
			defer close(writerDone)
			f, err := os.OpenFile(src, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; {
				size := min(chunk, total-n)
				if n >= total {
					if enough.Load() {
						return
					}
					size = 10
				}
				// One write a chunk: the source never reads half a line
				// that is not followed by the rest.
				if _, err := f.WriteString(strings.Join(connectLines(n+1, size), "\n") + "\n"); err != nil {
					t.Error(err)
					return
				}
				n += size
				written.Store(int64(n))
				select {
				case <-tick.C:
				case <-stopWriter:
					return
				}
			}
		}()
		t.Cleanup(func() { close(stopWriter); <-writerDone })
		for _, c := range []struct {
			name string
			cfg  map[string]string
		}{
			{"file-source", map[string]string{"connector.class": "FileStreamSource", "tasks.max": "1", "file": src, "topic": topic}},
			{"file-sink", map[string]string{"connector.class": "FileStreamSink", "tasks.max": "1", "file": sink, "topics": topic,
				"consumer.override.auto.offset.reset": "earliest"}},
		} {
			body, _ := json.Marshal(map[string]any{"name": c.name, "config": c.cfg})
			resp, err := hc.Post(rest+"/connectors", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /connectors %s: %s %s", c.name, resp.Status, b)
			}
		}

		maxRewinds := 3 * kills
		check := func() (atLeastOnce, string) {
			lines := fileLines(sink)
			s, err := checkAtLeastOnce(lines, maxRewinds)
			if err != nil {
				t.Fatalf("sink file of %d lines: %v", len(lines), err)
			}
			return s, fmt.Sprintf("%d lines, up to line %d, %d rewinds, %d source lines written (%d to move)", len(lines), s.max, s.rewinds, written.Load(), total)
		}
		for k := 1; k <= kills; k++ {
			// Killed once the sink is past this kill's share of the
			// lines: lines are then in the source file, the topic and
			// the sink task at once, none of them all moved.
			mark := total * k / (kills + 2)
			waitJVM(t, 180*time.Second, w, fmt.Sprintf("the sink past line %d before kill %d", mark, k), func() (bool, string) {
				s, state := check()
				return s.max >= mark, state
			})
			w.kill()
			s, state := check()
			t.Logf("kill %d: worker SIGKILLed with %s", k, state)
			if s.max >= total {
				t.Fatalf("kill %d came after every line had moved: not mid-flight", k)
			}
			w = startWorker(k + 1)
		}
		waitJVM(t, 300*time.Second, w, "every line in the sink", func() (bool, string) {
			s, state := check()
			return s.max >= total, state
		})
		enough.Store(true)
		// Both connectors and their task report RUNNING through the
		// status topic; meanwhile late replays may show.
		for _, c := range []string{"file-source", "file-sink"} {
			waitJVM(t, 30*time.Second, w, c+"'s status", func() (bool, string) {
				resp, err := hc.Get(rest + "/connectors/" + c + "/status")
				if err != nil {
					return false, err.Error()
				}
				defer resp.Body.Close()
				var st struct {
					Connector struct{ State string }   `json:"connector"`
					Tasks     []struct{ State string } `json:"tasks"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
					return false, err.Error()
				}
				return st.Connector.State == "RUNNING" && len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING", fmt.Sprintf("%+v", st)
			})
		}
		time.Sleep(2 * time.Second)
		w.stop(60 * time.Second)
		s, state := check()
		t.Logf("after %d kill(s): %s; %d duplicate lines", kills, state, s.dups)
		if s.max < total {
			t.Errorf("sink ends at line %d, want %d or more", s.max, total)
		}
		checkConnectTopics(t, adm, internal)
	})
}

// checkConnectTopics checks a distributed worker's three topics: created
// compacted, as Connect requires of them; the configs topic holding both
// connectors' configs, the offsets topic the source's position.
func checkConnectTopics(t *testing.T, adm *kadm.Client, internal map[string]string) {
	t.Helper()
	var names []string
	for _, n := range internal {
		names = append(names, n)
	}
	slices.Sort(names)
	rcs, err := adm.DescribeTopicConfigs(appCtx(t, 30*time.Second), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		rc, err := rcs.On(n, nil)
		if err != nil || rc.Err != nil {
			t.Errorf("topic %s: %v %v", n, err, rc.Err)
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
				t.Errorf("topic %s: cleanup.policy %q, want compact", n, c.MaybeValue())
			}
		}
	}
	end, err := adm.ListEndOffsets(appCtx(t, 30*time.Second), internal["config.storage.topic"], internal["offset.storage.topic"])
	if err != nil {
		t.Fatal(err)
	}
	var cfgRecs, offRecs int64
	end.Each(func(o kadm.ListedOffset) {
		switch o.Topic {
		case internal["config.storage.topic"]:
			cfgRecs += o.Offset
		case internal["offset.storage.topic"]:
			offRecs += o.Offset
		}
	})
	if cfgRecs < 2 || offRecs < 1 {
		t.Errorf("configs topic holds %d records, offsets topic %d; want at least 2 and 1", cfgRecs, offRecs)
	}
}
