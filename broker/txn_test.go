package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

func readAllIsolation(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil && len(out) < want {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	// A moment more, to catch records that should not be there.
	extra, cancelExtra := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelExtra()
	out = append(out, cl.PollFetches(extra).Records()...)
	return out
}

// TestTransactions: with franz-go's transactional producer, committed
// records are visible to read_committed consumers and aborted ones are not;
// read_uncommitted consumers see both; a transaction left open keeps the
// last stable offset below it.
func TestTransactions(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "tx", 2, nil)
	cl := ts.client(t, kgo.TransactionalID("tx-producer"), kgo.DefaultProduceTopic("tx"))
	ctx := testContext(t)
	run := func(n int, tag string, commit bool) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(tag)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (%s): %v", tag, err)
		}
	}
	run(100, "committed-1", true)
	run(50, "aborted", false)
	run(20, "committed-2", true)

	committed := readAllIsolation(t, ts.addr, "tx", kgo.ReadCommitted(), 120)
	if len(committed) != 120 {
		t.Fatalf("read_committed read %d records, want 120", len(committed))
	}
	for _, r := range committed {
		if string(r.Value) == "aborted" {
			t.Fatalf("read_committed returned an aborted record at %d/%d", r.Partition, r.Offset)
		}
	}
	if all := readAllIsolation(t, ts.addr, "tx", kgo.ReadUncommitted(), 170); len(all) != 170 {
		t.Fatalf("read_uncommitted read %d records, want 170", len(all))
	}

	// An open transaction holds read_committed back.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := readAllIsolation(t, ts.addr, "tx", kgo.ReadCommitted(), 120); len(got) != 120 {
		t.Fatalf("read_committed with an open transaction read %d records, want 120", len(got))
	}
	lso, err := ts.admin(t).ListCommittedOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ts.admin(t).ListEndOffsets(ctx, "tx")
	var lsoSum, endSum int64
	lso.Each(func(o kadm.ListedOffset) { lsoSum += o.Offset })
	end.Each(func(o kadm.ListedOffset) { endSum += o.Offset })
	if lsoSum >= endSum {
		t.Fatalf("last stable offsets %d not below end offsets %d with a transaction open", lsoSum, endSum)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readAllIsolation(t, ts.addr, "tx", kgo.ReadCommitted(), 121); len(got) != 121 {
		t.Fatalf("after commit, read_committed read %d records, want 121", len(got))
	}
	txs, err := ts.admin(t).DescribeTransactions(ctx, "tx-producer")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := txs["tx-producer"]; !ok || d.Err != nil || d.State != "CompleteCommit" {
		t.Fatalf("describe transactions: %+v", txs)
	}
}

// TestExactlyOnceReadProcessWrite: franz-go's GroupTransactSession
// consumes a topic in a group and produces to another in transactions
// that carry the group's offsets (AddOffsetsToTxn, TxnOffsetCommit). A
// committed round moves both the output and the committed offsets; an
// aborted round moves neither.
func TestExactlyOnceReadProcessWrite(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	adm := ts.admin(t)
	createTopic(t, adm, "eos-in", 1, nil)
	createTopic(t, adm, "eos-out", 1, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("eos-in"))
	produceAll(t, prod, keyedRecords("eos-in", 100, "in"))
	ctx := testContext(t)

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("eos"),
		kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics("eos-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("eos-out"), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	round := func(n int, commit bool) {
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < n {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("polled %d of %d records", got, n)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out:"), r.Value...)}, nil)
			})
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil || committed != commit {
			t.Fatalf("end (commit=%v): committed=%v err=%v", commit, committed, err)
		}
	}
	// The markers that make the offsets visible land after EndTxn's
	// answer, as on Kafka.
	groupOffset := func() int64 { return waitGroupOffset(t, adm, "eos-group", "eos-in", 0, 100) }
	round(100, true)
	if got := readAllIsolation(t, ts.addr, "eos-out", kgo.ReadCommitted(), 100); len(got) != 100 {
		t.Fatalf("output after a committed round: %d records, want 100", len(got))
	}
	if off := groupOffset(); off != 100 {
		t.Fatalf("group offset %d after a committed round, want 100", off)
	}
	produceAll(t, prod, keyedRecords("eos-in", 50, "in2"))
	round(50, false)
	if got := readAllIsolation(t, ts.addr, "eos-out", kgo.ReadCommitted(), 100); len(got) != 100 {
		t.Fatalf("output after an aborted round: %d records, want 100", len(got))
	}
	if off := groupOffset(); off != 100 {
		t.Fatalf("group offset %d after an aborted round, want still 100", off)
	}
}
