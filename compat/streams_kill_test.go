package compat

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eosOutput follows a Streams app's output topic with read_committed:
// per key, the counts must come as 1, 2, 3... (each input counted once).
type eosOutput struct {
	mu    sync.Mutex
	last  map[string]int64
	total int
	bad   []string
}

func (o *eosOutput) add(key string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if want := o.last[key] + 1; n != want && len(o.bad) < 10 {
		o.bad = append(o.bad, fmt.Sprintf("key %s: count %d after %d", key, n, o.last[key]))
	}
	o.last[key] = n
	o.total++
}

func (o *eosOutput) state() (int, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total, append([]string(nil), o.bad...)
}

// TestStreamsEOSKill: a Kafka Streams application with exactly-once v2
// processing (java/.../EosApp.java: a repartition, a count in a state
// store with a changelog) is SIGKILLed mid-stream while its input keeps
// coming, then started again; the output, read with read_committed, has
// every input's effect exactly once: for each key the counts 1..n with no
// gap and no repeat, n being how many inputs had that key. The broker
// itself is then SIGKILLed once under the restarted app, with
// transactions open and input still coming, and started again on the
// same data directory: the recovered logs, transaction and group state
// must keep the output exact. On Kafka the broker crash needs a
// reference of the test's own (forEachTargetCrash), killed and resumed
// the same way: with COMPAT_LONG=1 (make compat-long).
func TestStreamsEOSKill(t *testing.T) {
	forEachTargetCrash(t, map[string]string{"group.initial.rebalance.delay.ms": "0"}, func(t *testing.T, addr string, crash func(*testing.T)) {
		dir := t.TempDir()
		name := uniqueName("streams-eos-kill")
		in, out, app := name+"-in", name+"-out", name+"-app"
		cl, adm := appAdmin(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()))
		ctx := appCtx(t, 5*time.Minute)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, in); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, out); err != nil {
			t.Fatal(err)
		}

		const keys, batches, perBatch = 20, 40, 100
		want := map[string]int64{}
		produceBatch := func(b int) {
			var recs []*kgo.Record
			for i := range perBatch {
				n := b*perBatch + i
				k := fmt.Sprintf("k%02d", n%keys)
				want[k]++
				recs = append(recs, &kgo.Record{Topic: in, Value: []byte(k + ":" + strconv.Itoa(n))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce batch %d: %v", b, err)
			}
		}
		// A quarter of the input before the app starts, the rest while
		// it runs, is killed and restarts.
		for b := range batches / 4 {
			produceBatch(b)
		}

		got := readEOSOutput(t, ctx, addr, out)

		appArgs := []string{addr, app, in, out, filepath.Join(dir, "state")}
		a := startJVM(t, dir, "eos-app-1", javaBuilt.cp, "io.gregor.compat.EosApp", appArgs...)
		waitJVM(t, 120*time.Second, a, "the app's RUNNING", func() (bool, string) {
			return strings.Contains(a.tail(1<<20), "\nRUNNING\n"), "not yet"
		})
		// With a broker crash the last quarter is written after the
		// broker's restart, so the recovered broker takes new input too.
		beforeCrash := batches
		if crash != nil {
			beforeCrash = batches * 3 / 4
		}
		var produced atomic.Int32 // batches written, for the log
		produced.Store(batches / 4)
		var producing sync.WaitGroup
		producing.Add(1)
		go func() {
			defer producing.Done()
			for b := batches / 4; b < beforeCrash; b++ {
				produceBatch(b)
				produced.Store(int32(b + 1))
				time.Sleep(250 * time.Millisecond)
			}
		}()
		// Killed once it has committed part of the input, while more
		// comes: transactions are open and records are in flight.
		waitJVM(t, 120*time.Second, a, "committed output before the kill", func() (bool, string) {
			n, _ := got.state()
			return n >= batches*perBatch*3/8, fmt.Sprintf("%d records", n)
		})
		a.kill()
		atKill, _ := got.state()
		t.Logf("killed the app with %d of %d counts committed", atKill, batches*perBatch)
		if atKill >= batches*perBatch {
			t.Fatalf("the app had processed everything before the kill")
		}
		time.Sleep(2 * time.Second)
		a = startJVM(t, dir, "eos-app-2", javaBuilt.cp, "io.gregor.compat.EosApp", appArgs...)
		if crash != nil {
			// The broker dies once the restarted app commits again: the
			// app's producer has a transaction open or about to open.
			waitJVM(t, 120*time.Second, a, "committed output after the app's restart", func() (bool, string) {
				n, _ := got.state()
				return n >= atKill+batches*perBatch/8, fmt.Sprintf("%d records", n)
			})
			atCrash, _ := got.state()
			start := time.Now()
			crash(t)
			t.Logf("SIGKILLed and restarted the broker in %v with %d of %d counts committed, %d of %d input batches written",
				time.Since(start).Round(time.Millisecond), atCrash, batches*perBatch, produced.Load(), batches)
		}
		producing.Wait()
		for b := beforeCrash; b < batches; b++ {
			produceBatch(b)
		}
		waitJVM(t, 180*time.Second, a, "every input counted", func() (bool, string) {
			n, bad := got.state()
			if len(bad) > 0 {
				t.Fatalf("the output repeats or skips a count: %s", strings.Join(bad, "; "))
			}
			return n == batches*perBatch, fmt.Sprintf("%d of %d counts", n, batches*perBatch)
		})
		// A moment for a late duplicate to show, then the final counts.
		time.Sleep(time.Second)
		a.stop(30 * time.Second)
		n, bad := got.state()
		if len(bad) > 0 || n != batches*perBatch {
			t.Fatalf("%d counts (want %d); wrong: %s", n, batches*perBatch, strings.Join(bad, "; "))
		}
		got.mu.Lock()
		defer got.mu.Unlock()
		for k, w := range want {
			if got.last[k] != w {
				t.Errorf("key %s counted %d, want %d", k, got.last[k], w)
			}
		}
	})
}

// readEOSOutput reads topic out from the start with read_committed until
// the test ends, counting each key's 8-byte big-endian counts in the
// returned output.
func readEOSOutput(t *testing.T, ctx context.Context, addr, out string) *eosOutput {
	t.Helper()
	got := &eosOutput{last: map[string]int64{}}
	rd, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopReading := context.WithCancel(ctx)
	var reading sync.WaitGroup
	reading.Add(1)
	go func() {
		defer reading.Done()
		for rctx.Err() == nil {
			rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
				var n int64
				if len(r.Value) == 8 {
					for _, c := range r.Value {
						n = n<<8 | int64(c)
					}
				}
				got.add(string(r.Key), n)
			})
		}
	}()
	t.Cleanup(func() { stopReading(); reading.Wait(); rd.Close() })
	return got
}
