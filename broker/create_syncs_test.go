package broker

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/vfs"
)

// TestCreateTopicsFsyncsPerTopic holds the fsyncs a one-partition
// CreateTopics costs, logs included, so that they cannot creep back: the
// metadata log's (one per commit, shared by concurrent creations) and
// nothing of the new partition's, whose files are synced at its first
// flush (storage.CreateLogs). Until session 9 it was 1 + 3: the
// partition's partition.metadata, its directory and the log dir. The
// topics are made one per request from one client, each answered and its
// log made before the next, so nothing is shared between them. Each new
// partition's directory holds three files: its .log, partition.metadata
// and its leader-epoch-checkpoint, made as Kafka's makeLeader records the
// first epoch (until session 10, by the first produce, off its path but
// costing it a quarter of the broker's CPU); the .index and .timeindex
// come with their first entry (until session 10 they were made with the
// segment, an inode each).
func TestCreateTopicsFsyncsPerTopic(t *testing.T) {
	var mu sync.Mutex
	counting := false
	byKind := map[string]int{}
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		if op != vfs.OpSync && op != vfs.OpSyncDir {
			return nil
		}
		kind := "partition"
		switch {
		case strings.Contains(path, "__cluster_metadata"):
			kind = "metadata log"
		case strings.Contains(path, "checkpoint") || strings.Contains(path, "meta.properties"):
			kind = "checkpoint"
		}
		mu.Lock()
		if counting {
			byKind[fmt.Sprintf("%s %v", kind, op)]++
		}
		mu.Unlock()
		return nil
	})
	ts := startServerOpts(t, Options{FS: fsys})
	adm := kadm.NewClient(ts.client(t))
	ctx := testContext(t)
	create := func(name string) {
		t.Helper()
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for ts.parts.get(name, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no log 10 s after CreateTopics answered", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	create("warm-up") // the broker's first metadata changes are behind it
	mu.Lock()
	counting = true
	mu.Unlock()
	const n = 30
	for i := range n {
		create(fmt.Sprintf("fsyncs-%d", i))
	}
	mu.Lock()
	counting = false
	counts := maps.Clone(byKind)
	mu.Unlock()
	total, partFsyncs := 0, 0
	for k, c := range counts {
		total += c
		if strings.HasPrefix(k, "partition") {
			partFsyncs += c
		}
	}
	t.Logf("%d one-partition topics: fsyncs %v", n, counts)
	if partFsyncs != 0 {
		t.Errorf("%d fsyncs of partition files and directories for %d new topics, want 0 (%v)", partFsyncs, n, counts)
	}
	// One metadata-log fsync per topic, plus a little room for a
	// checkpoint or a broker heartbeat's record that happen to fall in.
	if limit := n + n/5; total > limit {
		t.Errorf("%d fsyncs for %d one-partition topics, want at most %d (%v)", total, n, limit, counts)
	}
	for i := range n {
		dir := filepath.Join(ts.dir, fmt.Sprintf("fsyncs-%d-0", i))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if want := []string{"00000000000000000000.log", partition.EpochCheckpointFile, "partition.metadata"}; !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", dir, names, want)
		}
		if data, err := os.ReadFile(filepath.Join(dir, partition.EpochCheckpointFile)); err != nil || string(data) != "0\n1\n0 0\n" {
			t.Errorf("%s: leader-epoch-checkpoint %q (%v), want epoch 0 from offset 0", dir, data, err)
		}
	}
}
