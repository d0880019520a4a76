package compat

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Kafka Connect (4.3.1, runtime and file connectors: java/connect/pom.xml
// says why not 4.4.0) with a broker under it: lines written to a file go
// through a topic into another file, each exactly once and in order
// across a clean restart; across a SIGKILL (connect_kill_test.go), at
// least once, in order.

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
		const half = 50000 // 100,000 lines in all, as the issue asks
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
