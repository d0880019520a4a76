package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnTransactionsConnectionCuts runs a franz-go transactional producer
// through the cutting proxy: 200 transactions of 40 records over four
// partitions, every fifth one aborted, while connections drop at random
// points (mid AddPartitionsToTxn, Produce, EndTxn and their answers), so
// the client retries each step. A transaction whose end franz-go reports
// as failed is given up with its client, and a new client with the same
// transactional id carries on, as a restarted application would.
// Afterwards read_committed consumers see every transaction acknowledged
// as committed, nothing of one acknowledged as aborted, each unknown one
// whole or not at all, and no record twice.
func TestTxnTransactionsConnectionCuts(t *testing.T) {
	const txns, perTxn, partitions = 200, 40, 4
	dir, port := t.TempDir(), freePort(t)
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", port), 3)
	p := startBehindProxy(t, dir, port, px)
	createTopic(t, p.addr, "txn-cuts", partitions)

	newProducer := func() *kgo.Client {
		opts := append([]kgo.Opt{kgo.SeedBrokers(px.addr()), kgo.TransactionalID("cut-producer"),
			kgo.TransactionTimeout(10 * time.Second), kgo.DefaultProduceTopic("txn-cuts"),
			kgo.RecordPartitioner(kgo.ManualPartitioner())}, fastRetries()...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	const (
		committed = iota
		aborted
		unknown
	)
	outcome := make([]int, txns)
	cl := newProducer()
	defer func() { cl.Close() }()
	ctx := testContext(t, 3*time.Minute)
	px.setRandomCuts(4<<10, 512)
	restarts := 0
	for i := range txns {
		commit := i%5 != 4
		err := cl.BeginTransaction()
		if err == nil {
			var recs []*kgo.Record
			for k := range perTxn {
				recs = append(recs, &kgo.Record{Partition: int32(k % partitions), Value: []byte(fmt.Sprintf("t%d:%d", i, k))})
			}
			err = cl.ProduceSync(ctx, recs...).FirstErr()
		}
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		}
		switch {
		case err != nil:
			outcome[i] = unknown
			t.Logf("transaction %d: %v; a new producer takes over", i, err)
			cl.Close()
			cl = newProducer()
			restarts++
		case commit:
			outcome[i] = committed
		default:
			outcome[i] = aborted
		}
	}
	px.setRandomCuts(0, 0)
	px.cutAll()
	accepted, cuts := px.stats()
	t.Logf("%d connections, %d cut at random points; %d producer restarts", accepted, cuts, restarts)
	if cuts < 10 {
		t.Fatalf("only %d connections cut", cuts)
	}

	waitStable(t, px.addr(), "txn-cuts", 30*time.Second)
	want := 0
	for _, o := range outcome {
		if o == committed {
			want += perTxn
		}
	}
	seen := make(map[int]map[int]int) // transaction → record → times read
	lastTxn := make(map[int32]int)
	for _, r := range readIsolation(t, px.addr(), "txn-cuts", kgo.ReadCommitted(), want, time.Second) {
		txn, rec, ok := parseTxnValue(string(r.Value))
		if !ok {
			t.Fatalf("unexpected record %q", r.Value)
		}
		if seen[txn] == nil {
			seen[txn] = make(map[int]int)
		}
		seen[txn][rec]++
		if last, ok := lastTxn[r.Partition]; ok && txn < last {
			t.Errorf("partition %d: transaction %d's record after transaction %d's", r.Partition, txn, last)
		}
		lastTxn[r.Partition] = txn
	}
	for i, o := range outcome {
		n := len(seen[i])
		for rec, times := range seen[i] {
			if times != 1 {
				t.Errorf("transaction %d record %d read %d times", i, rec, times)
			}
		}
		switch {
		case o == committed && n != perTxn:
			t.Errorf("transaction %d: commit acknowledged, %d of %d records visible", i, n, perTxn)
		case o == aborted && n != 0:
			t.Errorf("transaction %d: abort acknowledged, %d records visible", i, n)
		case o == unknown && n != 0 && n != perTxn:
			t.Errorf("transaction %d: %d of %d records visible", i, n, perTxn)
		}
	}
}

// parseTxnValue reads "t<transaction>:<record>".
func parseTxnValue(v string) (txn, rec int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(v, "t"), ":")
	if !found {
		return 0, 0, false
	}
	txn, err1 := strconv.Atoi(a)
	rec, err2 := strconv.Atoi(b)
	return txn, rec, err1 == nil && err2 == nil
}
