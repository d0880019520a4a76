package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/storage"
)

// TestReconcileStaleImageKeepsNewTopic: a reconcile that read its image
// before a topic was created and took the lock after the handler that
// created it had reconciled (the metadata watcher racing FindCoordinator's
// creation of __transaction_state) deleted the new topic's logs while
// their partitions went on serving. The transaction coordinator's append
// to such a partition then waited forever for a high watermark nobody
// moved, and InitProducerId answered CONCURRENT_TRANSACTIONS from then on
// (TestNetFaults with -netfault.all). Reconcile applies the newest image.
func TestReconcileStaleImageKeepsNewTopic(t *testing.T) {
	ts := startServer(t, "")
	before := ts.meta.Image()
	cl := ts.client(t)
	createTopic(t, ts.admin(t), "fresh", 1, nil)
	ctx := testContext(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fresh", Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	p := ts.parts.get("fresh", 0)
	if p == nil {
		t.Fatal("fresh-0 is not hosted after its creation")
	}

	if err := ts.reconcile(before); err != nil {
		t.Fatalf("reconcile with the image from before the topic: %v", err)
	}

	if got := ts.parts.get("fresh", 0); got != p {
		t.Fatalf("fresh-0 after a stale reconcile: hosted %p, want the same partition %p", got, p)
	}
	if p.Log.Closed() {
		t.Fatal("fresh-0's log was closed (deleted) by a reconcile with an older image")
	}
	if _, ok := ts.logs.Logs()[storage.TopicPartition{Topic: "fresh", Partition: 0}]; !ok {
		t.Fatal("fresh-0's log is gone from the log manager")
	}
	rd := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"fresh": {0: kgo.NewOffset().AtStart()}}))
	fs := rd.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatalf("fetch fresh-0: %v", errs)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "kept" || recs[0].Offset != 0 {
		t.Fatalf("fresh-0 reads %v, want the record \"kept\" at offset 0", recs)
	}
}
