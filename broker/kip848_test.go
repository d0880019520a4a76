package broker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logCapture records franz-go's log lines so a test can see which group
// protocol the client chose.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (l *logCapture) Log(_ kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprint(msg, kv))
	l.mu.Unlock()
}
func (l *logCapture) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestConsumerGroupKIP848: two franz-go members of a next-gen (KIP-848)
// group split a topic's partitions through ConsumerGroupHeartbeat, read
// everything once, and commit; the committed offsets cover the topic.
func TestConsumerGroupKIP848(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "g848", 6, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("g848"))
	produceAll(t, prod, keyedRecords("g848", 600, "n"))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := make(map[string]int)
	var logs [2]logCapture
	var wg sync.WaitGroup
	for m := 0; m < 2; m++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup("g848-group"), kgo.ConsumeTopics("g848"),
				kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
				kgo.WithLogger(&logs[m]))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollRecords(ctx, 100)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
					if len(seen) == 600 {
						cancel()
					}
					mu.Unlock()
				})
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := cl.CommitUncommittedOffsets(cctx); err != nil {
					t.Logf("commit: %v", err) // STALE_MEMBER_EPOCH may happen during reconciliation
				}
				ccancel()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 600 {
		t.Fatalf("group read %d distinct records, want 600", len(seen))
	}
	if !logs[0].contains("next-gen") && !logs[1].contains("next-gen") {
		t.Fatalf("the client did not use the KIP-848 protocol")
	}
	described, err := ts.admin(t).DescribeConsumerGroups(testContext(t), "g848-group")
	if err != nil {
		t.Fatalf("describe consumer group: %v", err)
	}
	if d := described["g848-group"]; d.Err != nil {
		t.Fatalf("describe consumer group: %v", d.Err)
	}
	offs, err := ts.admin(t).FetchOffsets(testContext(t), "g848-group")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed == 0 {
		t.Fatalf("no offsets committed")
	}
}
