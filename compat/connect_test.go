package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Kafka Connect (4.3.1, runtime and file connectors: java/connect/pom.xml
// says why not 4.4.0) with a broker under it: lines written to a file go
// through a topic into another file, each exactly once and in order.

const (
	classConnectStandalone  = "org.apache.kafka.connect.cli.ConnectStandalone"
	classConnectDistributed = "org.apache.kafka.connect.cli.ConnectDistributed"
	connectStringConverter  = "org.apache.kafka.connect.storage.StringConverter"
)

// connectLines are n distinct lines, numbered from first.
func connectLines(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("line %06d of the connect test", first+i)
	}
	return out
}

// waitSink waits until the sink file holds exactly want, failing on a
// line that differs (a duplicate, a loss, a reordering).
func waitSink(t *testing.T, app *jvmApp, path string, want []string, d time.Duration) {
	t.Helper()
	waitJVM(t, d, app, "the sink file", func() (bool, string) {
		got := fileLines(path)
		for i, l := range got {
			if i >= len(want) || l != want[i] {
				t.Fatalf("sink line %d is %q, want %q (%d lines)", i+1, l, at(want, i), len(got))
			}
		}
		return len(got) == len(want), fmt.Sprintf("%d of %d lines", len(got), len(want))
	})
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

// TestConnectStandalone: a standalone worker runs FileStreamSource (a file
// into a topic) and FileStreamSink (the topic into another file); the
// sink file holds every line once, in order, across a restart of the
// worker with more lines written while it was down.
func TestConnectStandalone(t *testing.T) {
	forEachTarget(t, nil, func(t *testing.T, addr string) {
		dir := t.TempDir()
		topic := uniqueName("connect-standalone")
		_, adm := appAdmin(t, addr)
		if _, err := adm.CreateTopic(appCtx(t, 30*time.Second), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		src, sink := filepath.Join(dir, "source.txt"), filepath.Join(dir, "sink.txt")
		worker, srcProps, sinkProps := filepath.Join(dir, "worker.properties"), filepath.Join(dir, "source.properties"), filepath.Join(dir, "sink.properties")
		writeProps(t, worker, map[string]string{
			"bootstrap.servers":            addr,
			"key.converter":                connectStringConverter,
			"value.converter":              connectStringConverter,
			"offset.storage.file.filename": filepath.Join(dir, "offsets"),
			"offset.flush.interval.ms":     "1000",
			"listeners":                    "http://127.0.0.1:" + strconv.Itoa(freeLoopbackPort(t)),
			"plugin.discovery":             "service_load",
		})
		writeProps(t, srcProps, map[string]string{
			"name": "file-source", "connector.class": "FileStreamSource", "tasks.max": "1",
			"file": src, "topic": topic,
		})
		writeProps(t, sinkProps, map[string]string{
			"name": "file-sink", "connector.class": "FileStreamSink", "tasks.max": "1",
			"file": sink, "topics": topic,
			"consumer.override.auto.offset.reset": "earliest",
		})
		const half = 5000
		want := connectLines(1, half)
		appendLines(t, src, want)
		w := startJVM(t, dir, "standalone-1", connectClasspath(t), classConnectStandalone, worker, srcProps, sinkProps)
		waitSink(t, w, sink, want, 120*time.Second)
		// A clean stop commits both connectors' offsets (the source's
		// file position in the offsets file, the sink's in its group),
		// so the restarted worker neither repeats nor skips a line.
		if !w.stop(60 * time.Second) {
			t.Fatalf("the worker did not stop within 60s; its output ends:\n%s", w.tail(3000))
		}
		more := connectLines(half+1, half)
		appendLines(t, src, more)
		want = append(want, more...)
		w = startJVM(t, dir, "standalone-2", connectClasspath(t), classConnectStandalone, worker, srcProps, sinkProps)
		waitSink(t, w, sink, want, 120*time.Second)
		w.stop(60 * time.Second)
		end, err := adm.ListEndOffsets(appCtx(t, 30*time.Second), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := end.Lookup(topic, 0); o.Offset != int64(len(want)) {
			t.Errorf("the topic holds %d records, want %d (one per line)", o.Offset, len(want))
		}
	})
}

// TestConnectDistributed: a distributed worker keeps its connector
// configs, offsets and statuses in three topics of the broker, which it
// creates compacted; the file source and sink connectors created over its
// REST API move every line once, in order.
func TestConnectDistributed(t *testing.T) {
	forEachTarget(t, nil, func(t *testing.T, addr string) {
		dir := t.TempDir()
		name := uniqueName("connect-dist")
		_, adm := appAdmin(t, addr)
		topic := name + "-data"
		if _, err := adm.CreateTopic(appCtx(t, 30*time.Second), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		port := freeLoopbackPort(t)
		rest := "http://127.0.0.1:" + strconv.Itoa(port)
		internal := map[string]string{"config.storage.topic": name + "-configs", "offset.storage.topic": name + "-offsets", "status.storage.topic": name + "-status"}
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
			"offset.flush.interval.ms":          "1000",
			"listeners":                         rest,
			"plugin.discovery":                  "service_load",
		}
		for k, v := range internal {
			props[k] = v
		}
		worker := filepath.Join(dir, "worker.properties")
		writeProps(t, worker, props)
		w := startJVM(t, dir, "distributed", connectClasspath(t), classConnectDistributed, worker)
		hc := &http.Client{Timeout: 10 * time.Second}
		waitJVM(t, 120*time.Second, w, "the worker's REST API", func() (bool, string) {
			resp, err := hc.Get(rest + "/connectors")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == 200, resp.Status
		})

		src, sink := filepath.Join(dir, "source.txt"), filepath.Join(dir, "sink.txt")
		want := connectLines(1, 5000)
		appendLines(t, src, want)
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
		waitSink(t, w, sink, want, 120*time.Second)

		// Both connectors and their task report RUNNING through the
		// status topic.
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
		w.stop(60 * time.Second)

		// The worker created its three topics compacted, as Connect
		// requires of them.
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
		// The configs topic holds both connectors' configs; the offsets
		// topic the source's position.
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
	})
}
