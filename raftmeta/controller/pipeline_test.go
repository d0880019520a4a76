package controller

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/vfs"
)

// TestCreateTopicsPipelined: concurrent CreateTopics requests are
// validated in order but share the metadata log's fsyncs: 64 one-topic
// requests at once cost fewer fsyncs of the log than requests (one each
// when the controller waited for every commit before the next request),
// every one is answered created, and every topic is in the image with
// its own ID.
func TestCreateTopicsPipelined(t *testing.T) {
	var logSyncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "__cluster_metadata") {
			logSyncs.Add(1)
		}
		return nil
	})
	n, c := startController(t, t.TempDir(), func(cfg *nodeConfig) { cfg.FS = fsys })
	const callers = 64
	before := logSyncs.Load()
	var wg sync.WaitGroup
	results := make([]CreateTopicResult, callers)
	for i := range callers {
		wg.Go(func() {
			results[i] = c.CreateTopics(ctxT(t), []CreateTopic{{Name: fmt.Sprintf("p%d", i), NumPartitions: 1, ReplicationFactor: 1}}, false)[0]
		})
	}
	wg.Wait()
	syncs := logSyncs.Load() - before
	img := n.Image()
	ids := map[[16]byte]bool{}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("create p%d: %v", i, r.Err)
		}
		ti, ok := img.Topic(r.Name)
		if !ok || ti.ID != r.ID {
			t.Fatalf("topic %s answered created (id %x) but the image has %v", r.Name, r.ID, ti)
		}
		if ids[r.ID] {
			t.Fatalf("topic id %x given twice", r.ID)
		}
		ids[r.ID] = true
	}
	t.Logf("%d concurrent creations, %d metadata log fsyncs", callers, syncs)
	if syncs >= callers {
		t.Errorf("%d concurrent creations cost %d metadata log fsyncs: not pipelined", callers, syncs)
	}
	// The overlay of creations in flight is empty once all settled: the
	// names are taken by the image now, and a request that is not
	// pipelined (AlterConfigs) sees every topic.
	if err := c.AlterConfigs(ctxT(t), image.ResourceTopic, "p63", map[string]*string{"retention.ms": strp("1000")}, false); err != nil {
		t.Fatalf("alter a topic just created: %v", err)
	}
}

// TestCreateTopicsPipelinedClose: creations in flight when the
// controller and its node close are answered with an error, never as
// created unless committed: after a restart on the same log every topic
// answered created is there.
func TestCreateTopicsPipelinedClose(t *testing.T) {
	dir := t.TempDir()
	n, c := startController(t, dir)
	const callers = 32
	var wg sync.WaitGroup
	results := make([]CreateTopicResult, callers)
	started := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			if i == callers/2 {
				close(started)
			}
			results[i] = c.CreateTopics(ctxT(t), []CreateTopic{{Name: fmt.Sprintf("q%d", i), NumPartitions: 1, ReplicationFactor: 1}}, false)[0]
		})
	}
	<-started
	n.Close()
	wg.Wait()

	n2 := startNode(t, dir)
	img := n2.Image()
	created := 0
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		created++
		if ti, ok := img.Topic(r.Name); !ok || ti.ID != r.ID {
			t.Errorf("topic %s answered created but is not in the log after a restart", r.Name)
		}
	}
	t.Logf("%d of %d answered created before the close", created, callers)
}
