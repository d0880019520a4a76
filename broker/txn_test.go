package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
