package integration

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

// recoveryTxn is one transaction of TestTxnRecoveryAfterSigkill: its
// records, and whether EndTxn answered success before or after the kill.
type recoveryTxn struct {
	id        string
	records   []string
	committed bool  // EndTransaction(TryCommit) returned nil
	endErr    error // what EndTransaction returned otherwise
}

// TestTxnRecoveryAfterSigkill kills gregor with SIGKILL while transactions
// are open (written to, never ended) and while others are committing
// (EndTxn sent to every partition's transaction, the kill right after the
// first one is answered, so some are between PrepareCommit and their
// markers). After the restart the coordinator reloads __transaction_state,
// finishes the commits it had prepared and aborts the open transactions
// when their timeout passes; every partition's last stable offset reaches
// its end offset. Each transaction is all or nothing to read_committed
// consumers, every commit that was acknowledged is visible, the open ones
// are not, and DescribeTransactions agrees with what consumers see.
func TestTxnRecoveryAfterSigkill(t *testing.T) {
	const partitions = 8
	const openTimeout = 3 * time.Second
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port, cleanupEvery...)
	createTopic(t, p.addr, "recover", partitions)
	ctx := testContext(t, 90*time.Second)

	// write begins a transaction and writes two records to every
	// partition.
	write := func(cl *kgo.Client, id string) *recoveryTxn {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		tx := &recoveryTxn{id: id}
		var recs []*kgo.Record
		for part := range partitions {
			for k := range 2 {
				v := fmt.Sprintf("%s/%d/%d", id, part, k)
				tx.records = append(tx.records, v)
				recs = append(recs, &kgo.Record{Partition: int32(part), Value: []byte(v)})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return tx
	}
	txClient := func(id string, timeout time.Duration) *kgo.Client {
		opts := append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(timeout),
			kgo.DefaultProduceTopic("recover"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, fastRetries()...)
		return newClient(t, p.addr, opts...)
	}

	var txns []*recoveryTxn
	doneClient := txClient("done", time.Minute)
	done := write(doneClient, "done")
	if err := done.endWith(ctx, doneClient); err != nil {
		t.Fatal(err)
	}
	txns = append(txns, done)
	for i := range 3 {
		txns = append(txns, write(txClient(fmt.Sprintf("open-%d", i), openTimeout), fmt.Sprintf("open-%d", i)))
	}
	var committing []*recoveryTxn
	var clients []*kgo.Client
	for i := range 4 {
		id := fmt.Sprintf("commit-%d", i)
		cl := txClient(id, 5*time.Second)
		committing = append(committing, write(cl, id))
		clients = append(clients, cl)
	}
	txns = append(txns, committing...)

	first := make(chan struct{}, len(committing))
	var wg sync.WaitGroup
	for i, tx := range committing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx.endWith(ctx, clients[i])
			first <- struct{}{}
		}()
	}
	<-first
	p.kill()
	killed := time.Now()
	p = startGregor(t, dir, port, cleanupEvery...)
	restarted := time.Now()
	wg.Wait()

	stable := waitStable(t, p.addr, "recover", 30*time.Second)
	resumed := strings.Count(p.log(), "resuming transaction markers after load")
	t.Logf("restart took %v; last stable offsets at the end %v after it; %d transactions resumed from PrepareCommit/PrepareAbort",
		restarted.Sub(killed).Round(time.Millisecond), stable.Round(time.Millisecond), resumed)

	total := 0
	for _, tx := range txns {
		total += len(tx.records)
	}
	visible := make(map[string]int) // transactional id → records read_committed
	for _, v := range valuesOf(readIsolation(t, p.addr, "recover", kgo.ReadCommitted(), len(done.records), time.Second)) {
		id, _, _ := strings.Cut(v, "/")
		visible[id]++
	}
	if n := len(readIsolation(t, p.addr, "recover", kgo.ReadUncommitted(), total, 300*time.Millisecond)); n != total {
		t.Fatalf("read_uncommitted sees %d records, %d were written", n, total)
	}
	ids := make([]string, len(txns))
	for i, tx := range txns {
		ids[i] = tx.id
	}
	described, err := kadm.NewClient(newClient(t, p.addr)).DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txns {
		n, d := visible[tx.id], described[tx.id]
		t.Logf("%s: %d of %d records visible, state %s, EndTxn committed=%v err=%v", tx.id, n, len(tx.records), d.State, tx.committed, tx.endErr)
		switch {
		case d.Err != nil:
			t.Errorf("describe %s: %v", tx.id, d.Err)
		case n != 0 && n != len(tx.records):
			t.Errorf("%s: %d of its %d records visible: a transaction is all or nothing", tx.id, n, len(tx.records))
		case tx.committed && n == 0:
			t.Errorf("%s: commit acknowledged, records not visible", tx.id)
		case strings.HasPrefix(tx.id, "open-") && n != 0:
			t.Errorf("%s: never committed, records visible", tx.id)
		case (n > 0) != (d.State == "CompleteCommit"):
			t.Errorf("%s: %d records visible but state %s", tx.id, n, d.State)
		case d.State != "CompleteCommit" && d.State != "CompleteAbort":
			t.Errorf("%s: state %s after recovery, want it decided", tx.id, d.State)
		}
	}

	// The coordinator works on: an id whose transaction was aborted in
	// recovery starts a new one and commits it.
	again := txClient("open-0", time.Minute)
	tx := write(again, "open-0-again")
	if err := tx.endWith(ctx, again); err != nil {
		t.Fatalf("a new transaction after recovery: %v", err)
	}
	got := valuesOf(readIsolation(t, p.addr, "recover", kgo.ReadCommitted(), visibleTotal(visible)+len(tx.records), 300*time.Millisecond))
	n := 0
	for _, v := range got {
		if strings.HasPrefix(v, "open-0-again/") {
			n++
		}
	}
	if n != len(tx.records) {
		t.Fatalf("the new transaction shows %d of %d records", n, len(tx.records))
	}
}

// endWith commits the transaction through cl and records the outcome.
func (tx *recoveryTxn) endWith(ctx context.Context, cl *kgo.Client) error {
	err := cl.EndTransaction(ctx, kgo.TryCommit)
	tx.committed, tx.endErr = err == nil, err
	return err
}

func visibleTotal(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
