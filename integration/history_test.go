package integration

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var soakRounds = flag.Int("soak.rounds", 3, "kill -9 and restart rounds in TestKillRestartHistory (make soak raises it)")

func TestHistoryChecker(t *testing.T) {
	h := newHistory()
	h.ack("a", 0, 0, 0)
	h.ack("a", 1, 0, 1)
	h.ack("b", 0, 1, 0)
	good := []readRecord{{0, 0, recordValue("a", 0)}, {0, 1, recordValue("a", 1)}, {1, 0, recordValue("b", 0)}, {1, 1, recordValue("b", 1)}}
	if p := h.check(good); len(p) != 0 {
		t.Fatalf("good log: %v", p)
	}
	for name, log := range map[string][]readRecord{
		"lost":       {{0, 0, recordValue("a", 0)}, {1, 0, recordValue("b", 0)}},
		"duplicated": append(append([]readRecord{}, good...), readRecord{0, 2, recordValue("a", 1)}),
		"reordered":  {{0, 0, recordValue("a", 1)}, {0, 1, recordValue("a", 0)}, {1, 0, recordValue("b", 0)}},
		"moved":      {{0, 0, recordValue("a", 0)}, {0, 2, recordValue("a", 1)}, {1, 0, recordValue("b", 0)}},
	} {
		if p := h.check(log); len(p) == 0 {
			t.Errorf("%s: no problem found", name)
		}
	}
}

// TestKillRestartHistory runs idempotent producers (acks=all, franz-go's
// defaults) against a gregor that is killed with SIGKILL and restarted
// several times, then reads the whole topic and checks the history: every
// acknowledged record is there exactly once at its acknowledged offset,
// and each producer's records are in order.
func TestKillRestartHistory(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "history", 3)
	h := newHistory()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("producer-%d", w)
			// Retries without end: the producer rides through the
			// restarts, as an application's would.
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("history"),
				kgo.RecordRetries(1<<30), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for seq := 0; ctx.Err() == nil; seq++ {
				cl.Produce(ctx, &kgo.Record{Key: []byte(name), Value: recordValue(name, seq)}, func(r *kgo.Record, err error) {
					if err == nil {
						_, s, _ := parseValue(r.Value)
						h.ack(name, s, r.Partition, r.Offset)
					}
				})
				sent.Add(1)
				if seq%200 == 199 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	for round := 0; round < *soakRounds; round++ {
		time.Sleep(700 * time.Millisecond)
		p.kill()
		time.Sleep(100 * time.Millisecond)
		p = startGregor(t, dir, port)
	}
	time.Sleep(700 * time.Millisecond)
	cancel()
	wg.Wait()

	byPart := readAll(t, p.addr, "history")
	var log []readRecord
	for part, recs := range byPart {
		for _, r := range recs {
			log = append(log, readRecord{part, r.Offset, r.Value})
		}
	}
	if n := h.count(); n < 1000 {
		t.Fatalf("only %d records acknowledged in %d rounds", n, *soakRounds)
	}
	if problems := h.check(log); len(problems) > 0 {
		if len(problems) > 20 {
			problems = problems[:20]
		}
		t.Fatalf("history check failed:\n%v", problems)
	}
	t.Logf("%d rounds of SIGKILL: %d records sent, %d acknowledged, %d in the log, history clean", *soakRounds, sent.Load(), h.count(), len(log))
}
