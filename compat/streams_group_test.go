package compat

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsGroupMembers describes a streams group with StreamsGroupDescribe
// (franz-go does not route it, so it goes to the coordinator found with
// FindCoordinator): per member, the number of active tasks, and the
// group's state.
func streamsGroupMembers(ctx context.Context, cl *kgo.Client, group string) (map[string]int, string, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		return nil, "", err
	}
	if fr.ErrorCode != 0 {
		return nil, "", fmt.Errorf("find coordinator: error %d", fr.ErrorCode)
	}
	d := kmsg.NewPtrStreamsGroupDescribeRequest()
	d.Groups = []string{group}
	dr, err := d.RequestWith(ctx, cl.Broker(int(fr.NodeID)))
	if err != nil {
		return nil, "", err
	}
	if len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 {
		return nil, "", fmt.Errorf("describe: %+v", dr.Groups)
	}
	out := map[string]int{}
	for _, m := range dr.Groups[0].Members {
		n := 0
		for _, t := range m.Assignment.ActiveTasks {
			n += len(t.Partitions)
		}
		out[m.MemberID] = n
	}
	return out, dr.Groups[0].State, nil
}

// TestStreamsGroupScale: the exactly_once_v2 Kafka Streams application of
// TestStreamsEOSKill (a repartition and a counting store with a
// changelog) runs with group.protocol=streams (KIP-1071): the broker
// creates its internal topics and assigns its tasks. It scales from one
// instance to three and back to one while input keeps arriving; each
// instance must get tasks while three run, the last must run every task
// at the end, and the read_committed output must count every input
// exactly once (per key 1..n, no gap, no repeat). On Gregor the broker is
// also SIGKILLed and restarted on its data directory while the three
// instances run: the streams group (topology, members, epochs, tasks)
// comes back from __consumer_offsets and the three go on with it.
func TestStreamsGroupScale(t *testing.T) {
	forEachTargetCrash(t, nil, func(t *testing.T, addr string, crash func(*testing.T)) {
		dir := t.TempDir()
		name := uniqueName("streams-scale")
		in, out, app := name+"-in", name+"-out", name+"-app"
		// A Kafka reference on a loaded machine may answer the first
		// produce to a topic it just created with UNKNOWN_TOPIC_OR_PARTITION
		// for longer than kgo's default four tries; the batch, already
		// counted as input, must still be written.
		cl, adm := appAdmin(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.UnknownTopicRetries(-1))
		ctx := appCtx(t, 8*time.Minute)
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, in); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, out); err != nil {
			t.Fatal(err)
		}

		const keys, perBatch = 20, 50
		var (
			wantMu   sync.Mutex
			want     = map[string]int64{}
			produced int
		)
		produceBatch := func() {
			wantMu.Lock()
			defer wantMu.Unlock()
			var recs []*kgo.Record
			for range perBatch {
				k := fmt.Sprintf("k%02d", produced%keys)
				want[k]++
				recs = append(recs, &kgo.Record{Topic: in, Value: []byte(k + ":" + strconv.Itoa(produced))})
				produced++
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
			}
		}
		for range 10 {
			produceBatch()
		}

		got := readEOSOutput(t, ctx, addr, out)

		// Input keeps coming in the background until the end.
		pctx, stopProducing := context.WithCancel(ctx)
		var producing sync.WaitGroup
		producing.Add(1)
		go func() {
			defer producing.Done()
			for pctx.Err() == nil {
				produceBatch()
				time.Sleep(200 * time.Millisecond)
			}
		}()
		defer func() { stopProducing(); producing.Wait() }()

		start := func(i int) *jvmApp {
			args := []string{addr, app, in, out, filepath.Join(dir, fmt.Sprintf("state-%d", i)), "streams"}
			a := startJVM(t, dir, fmt.Sprintf("streams-app-%d", i), javaBuilt.cp, "io.gregor.compat.EosApp", args...)
			waitJVM(t, 120*time.Second, a, fmt.Sprintf("instance %d RUNNING", i), func() (bool, string) {
				return strings.Contains(a.tail(1<<20), "\nRUNNING\n"), "not yet"
			})
			return a
		}
		waitMembers := func(a *jvmApp, what string, members int) {
			waitJVM(t, 120*time.Second, a, what, func() (bool, string) {
				ms, state, err := streamsGroupMembers(ctx, cl, app)
				if err != nil {
					return false, err.Error()
				}
				busy, total := 0, 0
				for _, n := range ms {
					if n > 0 {
						busy++
					}
					total += n
				}
				// 4 tasks reading the input, 4 the repartition topic.
				return state == "Stable" && len(ms) == members && busy == members && total == 8,
					fmt.Sprintf("state %s, active tasks by member %v", state, ms)
			})
		}
		progress := func(a *jvmApp, what string) {
			n0, _ := got.state()
			waitJVM(t, 120*time.Second, a, what, func() (bool, string) {
				n, bad := got.state()
				if len(bad) > 0 {
					t.Fatalf("the output repeats or skips a count: %s", strings.Join(bad, "; "))
				}
				return n >= n0+2*perBatch, fmt.Sprintf("%d counts, %d before", n, n0)
			})
		}

		a1 := start(1)
		waitMembers(a1, "one instance running every task", 1)
		progress(a1, "output from one instance")
		a2 := start(2)
		a3 := start(3)
		waitMembers(a1, "three instances sharing the tasks", 3)
		progress(a1, "output from three instances")
		if crash != nil {
			before, _, err := streamsGroupMembers(ctx, cl, app)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			crash(t)
			t.Logf("SIGKILLed and restarted gregor in %v under three instances", time.Since(start).Round(time.Millisecond))
			waitMembers(a1, "the three instances' group after gregor's restart", 3)
			after, _, _ := streamsGroupMembers(ctx, cl, app)
			for id := range before {
				if _, ok := after[id]; !ok {
					t.Errorf("member %s lost across gregor's restart: before %v, after %v", id, before, after)
				}
			}
			progress(a1, "output after gregor's restart")
		}
		if !a3.stop(60 * time.Second) {
			t.Errorf("instance 3 did not stop by itself")
		}
		if !a2.stop(60 * time.Second) {
			t.Errorf("instance 2 did not stop by itself")
		}
		waitMembers(a1, "one instance left with every task", 1)
		progress(a1, "output after scaling in")
		stopProducing()
		producing.Wait()

		wantMu.Lock()
		total := produced
		wantMu.Unlock()
		waitJVM(t, 180*time.Second, a1, "every input counted", func() (bool, string) {
			n, bad := got.state()
			if len(bad) > 0 {
				t.Fatalf("the output repeats or skips a count: %s", strings.Join(bad, "; "))
			}
			return n == total, fmt.Sprintf("%d of %d counts", n, total)
		})
		time.Sleep(time.Second) // a moment for a late duplicate to show
		a1.stop(30 * time.Second)
		n, bad := got.state()
		if len(bad) > 0 || n != total {
			t.Fatalf("%d counts (want %d); wrong: %s", n, total, strings.Join(bad, "; "))
		}
		got.mu.Lock()
		defer got.mu.Unlock()
		wantMu.Lock()
		defer wantMu.Unlock()
		for k, w := range want {
			if got.last[k] != w {
				t.Errorf("key %s counted %d, want %d", k, got.last[k], w)
			}
		}
		t.Logf("%d inputs counted exactly once across 1 -> 3 -> 1 instances", total)
	})
}
