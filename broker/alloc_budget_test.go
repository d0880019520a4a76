package broker

import (
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// TestProduceAllocationBudget holds the broker's heap allocation per
// produce request to a budget, so that per-request and per-partition
// garbage cannot creep back into the produce path. The request is the one
// a client with many partitions sends: one 4 x 1 KiB batch for each of
// 1,000 partitions (about 4.2 MB), written pre-encoded on a raw socket so
// that the only allocations counted are the broker's (and the test's
// reading of the small response).
func TestProduceAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures mean nothing under the race detector; make test runs this without it")
	}
	if testing.Short() {
		t.Skip("writes 1,000 partitions")
	}
	const partitions = 1000
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "budget", partitions, nil)
	batch := benchBatch(t, 4, 1024)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 60000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "budget"
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := encodeRequest(req, 1)
	c := dialRaw(t, ts.addr)
	send := func() {
		c.write(frame)
		resp, err := protocol.ReadFrame(c.nc, 1<<30, nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		var pr kmsg.ProduceResponse
		pr.Version = req.Version
		if err := pr.ReadFrom(resp[4+1:]); err != nil { // correlation id, then the v9 response header's tags
			t.Fatalf("decode response: %v", err)
		}
		for _, p := range pr.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
	for range 3 { // the first appends create each partition's files
		send()
	}
	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// AllocsPerRun sends once more, unmeasured, before its rounds: the
	// bytes below are over all rounds+1 sends.
	allocsPerRequest := testing.AllocsPerRun(rounds, send)
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / (rounds + 1)
	perPartition := perRequest / partitions
	allocsPerBatch := allocsPerRequest / partitions
	t.Logf("%d bytes and %.0f allocations per request of %d bytes, %d bytes and %.2f allocations per partition (one batch each)",
		perRequest, allocsPerRequest, len(frame), perPartition, allocsPerBatch)
	// The frame itself is pooled; what is left is per partition.
	const budgetPerPartition = 800 // 634 measured on 2026-12-01; about 12,600 before frames were pooled
	if perPartition > budgetPerPartition {
		t.Errorf("%d bytes allocated per partition of a produce request, budget %d", perPartition, budgetPerPartition)
	}
	// Every allocation on the path is garbage-collector work per batch
	// produced; the count catches a new small one per batch that the
	// bytes above would hardly show. The figure counts the whole process
	// (background work included), hence the margin.
	// Under AllocsPerRun (GOMAXPROCS 1) 1.80 were measured before
	// appendPartition stopped moving a message string to the heap for
	// every partition, 0.79-0.80 after (issue 17, session 9).
	const budgetAllocsPerBatch = 1.2
	if allocsPerBatch > budgetAllocsPerBatch {
		t.Errorf("%.2f allocations per produced batch (one partition of the request), budget %.1f", allocsPerBatch, budgetAllocsPerBatch)
	}
}
