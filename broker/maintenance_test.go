package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTimeRetention: a closed segment whose records are older than
// retention.ms is deleted by the background check, and the log start
// offset (ListOffsets earliest) moves past it.
func TestTimeRetention(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.LogRetentionCheckIntervalMs = 50 })
	createTopic(t, ts.admin(t), "ret", 1, map[string]*string{
		"retention.ms": strp("86400000"), "segment.ms": strp("50"), "file.delete.delay.ms": strp("0"),
	})
	cl := ts.client(t, kgo.DefaultProduceTopic("ret"), kgo.ProducerLinger(0))
	old := time.Now().Add(-48 * time.Hour)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("old"), Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // segment.ms passes: the next append rolls
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := ts.parts.get("ret", 0)
	waitFor(t, "retention to delete the old segment", func() bool { return p.Log.LogStartOffset() == 5 })
	start, _ := ts.admin(t).ListStartOffsets(testContext(t), "ret")
	if o, _ := start.Lookup("ret", 0); o.Offset != 5 {
		t.Fatalf("earliest offset %d, want 5", o.Offset)
	}
	got := consumeExactly(t, ts.addr, "ret", 1)
	if string(got[0].Value) != "new" || got[0].Offset != 5 {
		t.Fatalf("read %q at %d", got[0].Value, got[0].Offset)
	}
}

// TestCompaction: on a compacted topic the cleaner keeps only the latest
// record per key in closed segments, at its original offset.
func TestCompaction(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.LogCleanerBackoffMs = 50 })
	createTopic(t, ts.admin(t), "compacted", 1, map[string]*string{
		"cleanup.policy": strp("compact"), "segment.ms": strp("50"),
		"min.cleanable.dirty.ratio": strp("0.01"), "file.delete.delay.ms": strp("0"),
	})
	cl := ts.client(t, kgo.DefaultProduceTopic("compacted"), kgo.ProducerLinger(0))
	latest := make(map[string]int64)
	for round := 0; round < 5; round++ {
		for k := 0; k < 10; k++ {
			r, err := cl.ProduceSync(testContext(t), &kgo.Record{Key: []byte(fmt.Sprint("k", k)), Value: []byte(fmt.Sprint(round))}).First()
			if err != nil {
				t.Fatal(err)
			}
			latest[string(r.Key)] = r.Offset
		}
		time.Sleep(60 * time.Millisecond)
	}
	// One more record rolls the last round into a closed segment.
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Key: []byte("roll"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cleaner", func() bool {
		recs := consumeExactlyAtLeast(t, ts.addr, "compacted")
		return len(recs) == 11
	})
	for _, r := range consumeExactlyAtLeast(t, ts.addr, "compacted") {
		if k := string(r.Key); k != "roll" && (r.Offset != latest[k] || string(r.Value) != "4") {
			t.Fatalf("key %s: value %q at %d, latest was at %d", k, r.Value, r.Offset, latest[k])
		}
	}
}

// consumeExactlyAtLeast reads a topic from its start to its end offset.
func consumeExactlyAtLeast(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx := testContext(t)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("read timed out")
		}
		done := false
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			out = append(out, p.Records...)
			if p.HighWatermark > 0 && len(p.Records) > 0 && p.Records[len(p.Records)-1].Offset == p.HighWatermark-1 {
				done = true
			}
		})
		if done {
			return out
		}
	}
}

// TestCompactedTopicRefusesKeylessRecords: as Kafka, INVALID_RECORD.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "keyed-only", 1, map[string]*string{"cleanup.policy": strp("compact")})
	cl := ts.client(t, kgo.DefaultProduceTopic("keyed-only"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	err := cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v", err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
}
