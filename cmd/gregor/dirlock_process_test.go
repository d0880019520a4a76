package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fileStamp is what a process that touched a file would change.
type fileStamp struct {
	size  int64
	mtime time.Time
	dir   bool
}

// dataFiles lists every file under dir but the metadata log, which the
// running node appends to on its own (idle no-op records).
func dataFiles(t *testing.T, dir string) map[string]fileStamp {
	t.Helper()
	out := map[string]fileStamp{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "__cluster_metadata-0" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fileStamp{size: info.Size(), mtime: info.ModTime(), dir: d.IsDir()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServeRefusesLockedDataDir: a second `gregor serve` on a running
// node's data dir exits non-zero naming the dir and the holder's pid,
// changes no file, and the first node keeps every acknowledged record.
func TestServeRefusesLockedDataDir(t *testing.T) {
	dir := t.TempDir()
	a := startServe(t, "--data-dir", dir, "--listen", "127.0.0.1:0")

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("locked"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 200
	for i := range n {
		if err := cl.ProduceSync(testCtx(t, 30*time.Second), kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	before := dataFiles(t, dir)

	b := launchServe(t, "--data-dir", dir, "--listen", "127.0.0.1:0")
	code, out := b.waitExit(60 * time.Second)
	if code == 0 {
		t.Fatalf("second gregor on %s exited 0:\n%s", dir, out)
	}
	pid := strconv.Itoa(a.cmd.Process.Pid)
	if !strings.Contains(out, dir) || !strings.Contains(out, "pid "+pid) {
		t.Fatalf("refusal does not name dir %s and pid %s:\n%s", dir, pid, out)
	}
	after := dataFiles(t, dir)
	for path, st := range before {
		got, ok := after[path]
		switch {
		case !ok:
			t.Errorf("%s disappeared", path)
		case !st.dir && (got.size != st.size || !got.mtime.Equal(st.mtime)):
			t.Errorf("%s changed: size %d→%d, mtime %v→%v", path, st.size, got.size, st.mtime, got.mtime)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s appeared", path)
		}
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.ConsumeTopics("locked"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	ctx := testCtx(t, 30*time.Second)
	var got []string
	for len(got) < n && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != n {
		t.Fatalf("read back %d records from the first node, want %d", len(got), n)
	}
	for i, v := range got {
		if v != fmt.Sprint("v", i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
	a.stop()
}
