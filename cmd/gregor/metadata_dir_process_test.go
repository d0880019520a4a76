package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceStrings writes v0..v(n-1) to topic with acks=all.
func produceStrings(t *testing.T, addr, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(testCtx(t, 30*time.Second), kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// consumeStrings reads n records of topic from the start.
func consumeStrings(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	var got []string
	for len(got) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestServeMetadataLogDir: with metadata.log.dir set, the metadata log
// and its .lock live there and not in the log dir; after a restart the
// topic and its records are still there; a second gregor naming the same
// metadata dir (with a data dir of its own) is refused, naming the dir
// and the holder's pid.
func TestServeMetadataLogDir(t *testing.T) {
	data, meta := t.TempDir(), filepath.Join(t.TempDir(), "meta")
	args := []string{"--data-dir", data, "--listen", "127.0.0.1:0", "--override", "metadata.log.dir=" + meta}
	a := startServe(t, args...)
	produceStrings(t, a.addr, "split", 0, 50)

	if _, err := os.Stat(filepath.Join(meta, "__cluster_metadata-0")); err != nil {
		t.Errorf("no metadata log in metadata.log.dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(meta, ".lock")); err != nil {
		t.Errorf("no .lock in metadata.log.dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "__cluster_metadata-0")); err == nil {
		t.Error("the metadata log is in the log dir too")
	}
	if _, err := os.Stat(filepath.Join(data, "split-0")); err != nil {
		t.Errorf("no partition dir in the log dir: %v", err)
	}

	b := launchServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "metadata.log.dir="+meta)
	code, out := b.waitExit(60 * time.Second)
	if code == 0 {
		t.Fatalf("second gregor on metadata dir %s exited 0:\n%s", meta, out)
	}
	if pid := strconv.Itoa(a.cmd.Process.Pid); !strings.Contains(out, meta) || !strings.Contains(out, "pid "+pid) {
		t.Fatalf("refusal does not name %s and pid %s:\n%s", meta, pid, out)
	}

	a.stop()
	a = startServe(t, args...)
	produceStrings(t, a.addr, "split", 50, 10)
	got := consumeStrings(t, a.addr, "split", 60)
	if len(got) != 60 {
		t.Fatalf("after a restart read back %d records, want 60", len(got))
	}
	for i, v := range got {
		if v != fmt.Sprint("v", i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
	a.stop()
}
