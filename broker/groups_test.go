package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

// TestConsumerGroupCommitAndResume: two franz-go members share a topic's
// partitions, commit, leave; a new member resumes from the committed
// offsets, also after a broker restart.
func TestConsumerGroupCommitAndResume(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	createTopic(t, ts.admin(t), "grp", 4, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("grp"))
	produceAll(t, prod, keyedRecords("grp", 400, "g"))

	var mu sync.Mutex
	seen := make(map[string]int)
	consume := func(n int) {
		var wg sync.WaitGroup
		total := 0
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for m := 0; m < 2; m++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("grp"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				for {
					mu.Lock()
					done := total >= n
					mu.Unlock()
					if done || ctx.Err() != nil {
						break
					}
					fs := cl.PollRecords(ctx, 50)
					fs.EachRecord(func(r *kgo.Record) {
						mu.Lock()
						seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
						total++
						mu.Unlock()
					})
					// Commit with a context of its own: the poll's ends
					// when the group has read everything.
					cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := cl.CommitUncommittedOffsets(cctx); err != nil {
						t.Errorf("commit: %v", err)
					}
					ccancel()
					mu.Lock()
					if total >= n {
						cancel() // wakes the other member's poll
					}
					mu.Unlock()
				}
				cl.LeaveGroup()
			}()
		}
		wg.Wait()
	}
	consume(400)
	if len(seen) != 400 {
		t.Fatalf("group read %d distinct records, want 400", len(seen))
	}
	adm := ts.admin(t)
	offs, err := adm.FetchOffsets(testContext(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 400 {
		t.Fatalf("committed offsets sum to %d, want 400", committed)
	}

	// Restart: the commits are replayed from __consumer_offsets.
	ts.Close()
	ts = startServer(t, dir)
	offs, err = ts.admin(t).FetchOffsets(testContext(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	committed = 0
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 400 {
		t.Fatalf("after restart, committed offsets sum to %d, want 400", committed)
	}
	groups, err := ts.admin(t).ListGroups(testContext(t))
	if err != nil || len(groups) != 1 || groups.Groups()[0] != "g1" {
		t.Fatalf("list groups: %v %v", groups, err)
	}
}
