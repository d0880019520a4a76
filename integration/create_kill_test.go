package integration

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKillAfterCreateTopicsNeverWritten: topics created (one partition
// each) and never written to survive a SIGKILL of the broker, and so do
// they what a power loss may do to them, since a new partition's files
// are synced only at its first flush (storage.CreateLogs): the restarted
// broker finds or makes again every partition the metadata says it
// hosts, with the topic's id in partition.metadata, and each takes a
// record at offset 0 and gives it back. Before the kill one partition's
// directory is removed and another's partition.metadata emptied, as a
// power loss before the first flush can leave them.
func TestKillAfterCreateTopicsNeverWritten(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	p := startGregor(t, dir, port)
	adm := kadm.NewClient(newClient(t, p.addr))
	ctx := testContext(t, 90*time.Second)
	const n = 12
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("never-written-%d", i))
	}
	for _, name := range names {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, name)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	// The logs are made after CreateTopics answers: wait for the files.
	metaFile := func(name string) string { return filepath.Join(dir, name+"-0", "partition.metadata") }
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for {
			if _, err := os.Stat(metaFile(name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no partition.metadata 30 s after CreateTopics", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.kill()
	if err := os.RemoveAll(filepath.Join(dir, names[0]+"-0")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(metaFile(names[1]), 0); err != nil {
		t.Fatal(err)
	}

	p = startGregor(t, dir, port)
	cl := newClient(t, p.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, name := range names {
		r := &kgo.Record{Topic: name, Partition: 0, Value: []byte("after the kill " + name)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s after the restart: %v", name, err)
		}
		if r.Offset != 0 {
			t.Errorf("%s: first record at offset %d, want 0", name, r.Offset)
		}
		data, err := os.ReadFile(metaFile(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Kafka's Uuid text: URL-safe base64 without padding.
		id := details[name].ID
		if want := "topic_id: " + base64.RawURLEncoding.EncodeToString(id[:]); !strings.Contains(string(data), want) {
			t.Errorf("%s: partition.metadata %q, want %q", name, data, want)
		}
	}
	for _, name := range names {
		recs := readAll(t, p.addr, name)[0]
		if len(recs) != 1 || string(recs[0].Value) != "after the kill "+name {
			t.Fatalf("%s read back: %d records", name, len(recs))
		}
	}
}
