package storage

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// syncBuffer is a bytes.Buffer safe for the progress goroutine and the
// test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON log records with the given message.
func (s *syncBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// writeCrashedLogs leaves three partitions of several segments each, none
// flushed past its rolls and no clean-shutdown marker, so that the next
// OpenManager recovers every segment; it returns the bytes of their .log
// files.
func writeCrashedLogs(t *testing.T, fsys *vfs.MemFS) int64 {
	t.Helper()
	m := openTestManager(t, fsys)
	var total int64
	for p := range int32(3) {
		l, err := m.GetOrCreateLog("orders", p, [16]byte{1}, smallConfig(4<<10, 100))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			a := mustAppend(t, l, batchOf(2, int64(i), 400), 0)
			total += int64(len(a.data))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// No Close: the dirs keep no clean-shutdown marker and no recovery
	// point checkpoint, so every segment is recovered.
	fsys.Crash()
	return total
}

// TestLoadProgressLogged makes recovery slow (each read of a .log file
// sleeps) and checks that OpenManager logs progress lines whose numbers
// add up, then a summary.
func TestLoadProgressLogged(t *testing.T) {
	mem := vfs.NewMem()
	total := writeCrashedLogs(t, mem)
	slow := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpRead && strings.HasSuffix(path, logSuffix) {
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	var buf syncBuffer
	start := time.Now()
	m, err := OpenManager(ManagerConfig{
		FS: slow, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Decompress: gunzip,
		Now:                  func() time.Time { return time.UnixMilli(0) },
		LoadProgressInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	took := time.Since(start)
	if m.recoveredSegments.Load() < 6 {
		t.Fatalf("%d segments recovered, want every segment of 3 partitions", m.recoveredSegments.Load())
	}
	lines := buf.records(t, "loading logs")
	if len(lines) == 0 {
		t.Fatalf("no progress line in a load of %v", took)
	}
	var lastDone float64
	for _, rec := range lines {
		done, remaining := rec["bytes_done"].(float64), rec["bytes_remaining"].(float64)
		if done+remaining != float64(total) {
			t.Fatalf("bytes_done %v + bytes_remaining %v != %d: %v", done, remaining, total, rec)
		}
		if done < lastDone {
			t.Fatalf("bytes_done went back from %v: %v", lastDone, rec)
		}
		lastDone = done
		if rec["partitions_total"].(float64) != 3 || rec["partitions_done"].(float64) > 3 {
			t.Fatalf("partitions: %v", rec)
		}
		if rate := rec["mib_per_s"].(float64); rate < 0 || rate > 1<<20 {
			t.Fatalf("rate %v MiB/s: %v", rate, rec)
		}
		if rec["level"] != "INFO" {
			t.Fatalf("level: %v", rec)
		}
	}
	sum := buf.records(t, "loaded logs")
	if len(sum) != 1 {
		t.Fatalf("%d summary lines", len(sum))
	}
	if s := sum[0]; s["partitions"].(float64) != 3 || s["bytes"].(float64) != float64(total) ||
		s["segments_recovered"].(float64) != float64(m.recoveredSegments.Load()) {
		t.Fatalf("summary %v, want 3 partitions, %d bytes, %d segments", s, total, m.recoveredSegments.Load())
	}
	t.Logf("%d progress lines over %v; last %v; summary %v", len(lines), took, lines[len(lines)-1], sum[0])
}

// TestLoadProgressQuietWhenFast checks that a load shorter than the
// interval logs neither progress nor summary.
func TestLoadProgressQuietWhenFast(t *testing.T) {
	mem := vfs.NewMem()
	writeCrashedLogs(t, mem)
	var buf syncBuffer
	m, err := OpenManager(ManagerConfig{
		FS: mem, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Decompress: gunzip,
		Now: func() time.Time { return time.UnixMilli(0) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.recoveredSegments.Load() == 0 {
		t.Fatal("nothing recovered")
	}
	if n := len(buf.records(t, "loading logs")) + len(buf.records(t, "loaded logs")); n != 0 {
		t.Fatalf("%d progress lines for a load under a second", n)
	}
}
