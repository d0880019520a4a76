package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterTransactions: transactions whose partitions are led by all
// three brokers of a cluster, so the coordinator's markers cross to other
// leaders (WriteTxnMarkers over the inter-broker listener).
//
//   - A franz-go transactional producer commits and aborts transactions
//     writing to all six partitions of a topic whose leaders are on every
//     node: a read_committed reader sees exactly the committed records,
//     every partition holds one marker per transaction, and its last stable
//     offset reaches its end.
//   - A GroupTransactSession consumes an input topic and produces to an
//     output topic in transactions with its offsets; one broker that is
//     neither its transaction nor its group coordinator is SIGKILLed in the
//     middle and restarted. A read_committed reader of the output sees each
//     input record exactly once, and the group's committed offsets cover
//     the input.
func TestClusterTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	start := time.Now()
	c := newCluster(t)
	o := newClusterOps(t, c)

	const topic = "ct-txn"
	o.createTopic(t, topic, 6, 3, nil)
	leaders := map[int32]bool{}
	for p := range int32(6) {
		leader, _, err := o.leader(topic, p)
		if err != nil {
			t.Fatalf("leader of %s-%d: %v", topic, p, err)
		}
		leaders[leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("%s leaders on nodes %v, want all three", topic, slices.Sorted(maps.Keys(leaders)))
	}

	// Part one: commit even rounds, abort odd ones, three records per
	// partition per round.
	const rounds, perPart = 8, 3
	cl := newClient(t, strings.Join(c.seeds(), ","), kgo.TransactionalID("ct-producer"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var committed []string
	for round := range rounds {
		commit := round%2 == 0
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range int32(6) {
			for i := range perPart {
				v := fmt.Sprintf("r%d-p%d-%d", round, p, i)
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
				if commit {
					committed = append(committed, v)
				}
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("round %d: end transaction (commit %v): %v", round, commit, err)
		}
	}
	// Every transaction put perPart records and one marker on every
	// partition; the markers of the last one are written once the last
	// stable offset reaches the end.
	ctWaitStable(t, o.adm, topic, 6, rounds*(perPart+1))
	ctExpectOnce(t, ctReadCommitted(t, c, topic, len(committed)), committed)
	t.Logf("part one: %d transactions over leaders %v in %v", rounds, slices.Sorted(maps.Keys(leaders)), time.Since(start).Round(time.Millisecond))

	// Part two: an exactly-once pipeline through a broker kill.
	const in, out, group, txnID = "ct-in", "ct-out", "ct-eos-group", "ct-eos"
	o.createTopic(t, in, 6, 3, nil)
	o.createTopic(t, out, 6, 3, nil)
	src := newClient(t, strings.Join(c.seeds(), ","), kgo.DefaultProduceTopic(in), kgo.RequiredAcks(kgo.AllISRAcks()))
	var inputs []string
	produceInputs := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			v := fmt.Sprintf("in-%05d", len(inputs))
			inputs = append(inputs, v)
			recs = append(recs, &kgo.Record{Value: []byte(v)})
		}
		pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
		defer pcancel()
		if err := src.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}

	var done atomic.Int64 // input records processed in committed transactions
	var aborted atomic.Int64
	sctx, scancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ctPipeline(t, sctx, c, in, out, group, txnID, &done, &aborted) })
	defer func() {
		scancel()
		wg.Wait()
	}()
	waitDone := func(n int, phase string) {
		t.Helper()
		if !waitCond(60*time.Second, func() bool { return done.Load() >= int64(n) }) {
			t.Fatalf("%s: %d of %d input records processed after a minute", phase, done.Load(), n)
		}
		t.Logf("%s: %d input records processed at %v", phase, n, time.Since(start).Round(time.Millisecond))
	}

	const batch = 1000
	produceInputs(batch)
	waitDone(batch, "before the kill")
	victim := ctVictim(t, o, txnID, group)
	o.kill(victim)
	killedAt := time.Now()
	produceInputs(batch)
	waitDone(2*batch, "while a broker is down")
	down := time.Since(killedAt)
	o.restart(victim)
	if !o.waitFullISR(out, 60*time.Second) {
		t.Fatalf("%s: the restarted broker did not rejoin the ISR", out)
	}
	produceInputs(batch)
	waitDone(3*batch, "after the restart")
	scancel()
	wg.Wait()
	if n := done.Load(); n != 3*batch {
		t.Fatalf("the pipeline committed %d input records, want %d", n, 3*batch)
	}

	ctWaitStableAll(t, o.adm, out, 6)
	ctExpectOnce(t, ctReadCommitted(t, c, out, len(inputs)), inputs)
	// The group's offsets, committed in the same transactions, cover
	// the input.
	// The admin client's connection to the killed node may still be the
	// dead one: a first EOF there is the client's to retry.
	var offs kadm.OffsetResponses
	var err error
	for try := 0; ; try++ {
		if offs, err = o.adm.FetchOffsets(ctx, group); err == nil {
			break
		}
		if try == 20 || ctx.Err() != nil {
			t.Fatalf("fetch offsets of %s: %v", group, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	var consumed int64
	offs.Each(func(r kadm.OffsetResponse) {
		if r.Topic == in {
			consumed += r.At
		}
	})
	if consumed != int64(len(inputs)) {
		t.Fatalf("group %s committed offsets summing to %d, want %d", group, consumed, len(inputs))
	}
	t.Logf("part two: %d records exactly once through a SIGKILL of node %d (down %v, %d transactions aborted); whole test %v",
		len(inputs), victim+1, down.Round(time.Millisecond), aborted.Load(), time.Since(start).Round(time.Millisecond))
}

// ctPipeline is the exactly-once step: each transaction copies what one
// poll returned from in to out and commits the group's offsets with it.
// done counts the input records of committed transactions.
func ctPipeline(t *testing.T, ctx context.Context, c *cluster, in, out, group, txnID string, done, aborted *atomic.Int64) {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.seeds()...),
		kgo.TransactionalID(txnID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Errorf("group transact session: %v", err)
		return
	}
	defer sess.Close()
	for ctx.Err() == nil {
		fetches := sess.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			return
		}
		n := int64(fetches.NumRecords())
		if n == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Errorf("begin transaction: %v", err)
			return
		}
		e := kgo.AbortingFirstErrPromise(sess.Client())
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, e.Promise())
		})
		ok, err := sess.End(ctx, kgo.TransactionEndTry(e.Err() == nil))
		switch {
		case ok && err == nil:
			done.Add(n)
		case ctx.Err() != nil:
			return
		default:
			// Aborted (a produce failed, the group moved) or the end
			// failed: the session rewinds to the committed offsets.
			aborted.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// ctVictim is a member that is neither the transaction coordinator of
// txnID nor the group coordinator of group.
func ctVictim(t *testing.T, o *clusterOps, txnID, group string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := o.adm.FindTxnCoordinators(ctx, txnID)[txnID]
	gc := o.adm.FindGroupCoordinators(ctx, group)[group]
	if tc.Err != nil || gc.Err != nil {
		t.Fatalf("find coordinators: %v, %v", tc.Err, gc.Err)
	}
	for i := range 3 {
		if node := int32(i + 1); node != tc.NodeID && node != gc.NodeID {
			return i
		}
	}
	t.Fatal("no member left to kill")
	return -1
}

// ctWaitStable waits until each of topic's partitions has its last
// stable offset (ListOffsets read_committed) and its high watermark at
// want.
func ctWaitStable(t *testing.T, adm *kadm.Client, topic string, partitions int32, want int64) {
	t.Helper()
	var last string
	if !waitCond(30*time.Second, func() bool {
		ends, stable, err := ctOffsets(adm, topic)
		if err != nil {
			last = err.Error()
			return false
		}
		for p := range partitions {
			end, lso := ends[p], stable[p]
			if end != want || lso != want {
				last = fmt.Sprintf("partition %d: high watermark %d, last stable %d, want %d", p, end, lso, want)
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s: %s", topic, last)
	}
}

// ctWaitStableAll waits until each partition's last stable offset equals
// its high watermark (a partition no transaction wrote to is at 0).
func ctWaitStableAll(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	var last string
	if !waitCond(30*time.Second, func() bool {
		ends, stable, err := ctOffsets(adm, topic)
		if err != nil {
			last = err.Error()
			return false
		}
		for p := range partitions {
			if end, lso := ends[p], stable[p]; end != lso {
				last = fmt.Sprintf("partition %d: high watermark %d, last stable %d", p, end, lso)
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s: %s", topic, last)
	}
}

// ctOffsets is each partition's high watermark and last stable offset.
func ctOffsets(adm *kadm.Client, topic string) (ends, stable map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	s, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	ends, stable = map[int32]int64{}, map[int32]int64{}
	for _, lists := range []struct {
		l   kadm.ListedOffsets
		dst map[int32]int64
	}{{e, ends}, {s, stable}} {
		lists.l.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				lists.dst[o.Partition] = o.Offset
			}
		})
	}
	return ends, stable, nil
}

// ctReadCommitted reads topic from the start as a read_committed consumer
// until it has want records, then a moment more to catch extra ones, and
// counts each value.
func ctReadCommitted(t *testing.T, c *cluster, topic string, want int) map[string]int {
	t.Helper()
	cl := newClient(t, strings.Join(c.seeds(), ","), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
	}
	extra, cancelExtra := context.WithTimeout(context.Background(), time.Second)
	defer cancelExtra()
	cl.PollFetches(extra).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	return seen
}

// ctExpectOnce fails unless seen holds each of want exactly once and
// nothing else.
func ctExpectOnce(t *testing.T, seen map[string]int, want []string) {
	t.Helper()
	var missing, dup []string
	for _, v := range want {
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dup = append(dup, fmt.Sprintf("%s x%d", v, seen[v]))
		}
	}
	wanted := make(map[string]bool, len(want))
	for _, v := range want {
		wanted[v] = true
	}
	var extra []string
	for v := range seen {
		if !wanted[v] {
			extra = append(extra, v)
		}
	}
	if len(missing)+len(dup)+len(extra) > 0 {
		trim := func(s []string) []string {
			slices.Sort(s)
			return s[:min(len(s), 10)]
		}
		t.Fatalf("read_committed: %d missing %v, %d duplicated %v, %d unexpected %v (of %d wanted)",
			len(missing), trim(missing), len(dup), trim(dup), len(extra), trim(extra), len(want))
	}
}
