package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

// TestFlushSchedulerHonoursFlushMs: with log.flush.scheduler.interval.ms
// set, records left unflushed when appends stop are flushed once they
// are flush.ms old, as Kafka's log flusher does; without the scheduler
// they stay unflushed (the append path checks flush.ms only as records
// come).
func TestFlushSchedulerHonoursFlushMs(t *testing.T) {
	for _, tt := range []struct {
		name      string
		interval  int64
		wantFlush bool
	}{
		{"scheduler every 50ms", 50, true},
		{"no scheduler (Kafka's default)", 1<<63 - 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, "", func(c *config.Broker) { c.LogFlushSchedulerIntervalMs = tt.interval })
			s := func(v string) *string { return &v }
			createTopic(t, ts.admin(t), "flushed", 1, map[string]*string{"flush.ms": s("1000")})
			cl := ts.client(t, kgo.DefaultProduceTopic("flushed"))
			p := ts.parts.get("flushed", 0)
			// Produce until an append leaves records unflushed: one that
			// comes a flush.ms after the last flush flushes by itself.
			for range 3 {
				if err := cl.ProduceSync(testContext(t), kgo.StringRecord("x")).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if p.Log.RecoveryPoint() < p.Log.LogEndOffset() {
					break
				}
			}
			leo := p.Log.LogEndOffset()
			if p.Log.RecoveryPoint() >= leo {
				t.Fatal("every append flushed by itself")
			}
			start := time.Now()
			deadline := start.Add(3 * time.Second)
			for p.Log.RecoveryPoint() < leo && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			flushed := p.Log.RecoveryPoint() >= leo
			if flushed != tt.wantFlush {
				t.Fatalf("flushed %v after %v (recovery point %d, log end %d), want %v",
					flushed, time.Since(start), p.Log.RecoveryPoint(), leo, tt.wantFlush)
			}
			if flushed && time.Since(start) > 1500*time.Millisecond {
				t.Fatalf("flushed only after %v, flush.ms 1000", time.Since(start))
			}
		})
	}
}
