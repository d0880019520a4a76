package integration

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cleanupEvery makes the coordinator look for timed-out transactions twice
// a second instead of Kafka's every ten seconds.
var cleanupEvery = []string{"--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"}

// TestTxnTimeout: a producer opens a transaction with a short
// transaction.timeout.ms, writes to it and goes silent. The coordinator
// aborts it once the timeout has passed (not before), which moves the
// last stable offset to the end of the log: ListOffsets read_committed
// equals the end offset, read_committed consumers see the records around
// the transaction and none of it, and the abandoned producer's commit
// fails.
func TestTxnTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port, cleanupEvery...)
	createTopic(t, p.addr, "abandon", 2)
	ctx := testContext(t, 60*time.Second)
	plain := newClient(t, p.addr, kgo.DefaultProduceTopic("abandon"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(values ...string) {
		t.Helper()
		for i, v := range values {
			if err := plain.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("before-0", "before-1")

	abandoned := newClient(t, p.addr, kgo.TransactionalID("abandoned"), kgo.TransactionTimeout(timeout),
		kgo.DefaultProduceTopic("abandon"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := abandoned.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 6 {
		if err := abandoned.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprintf("abandoned-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Records after the open transaction: beyond the last stable offset
	// until it is decided.
	produce("after-0", "after-1")

	adm := kadm.NewClient(newClient(t, p.addr))
	lso, end, err := stableOffsets(ctx, adm, "abandon")
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < timeout {
		for part, e := range end {
			if lso[part] >= e {
				t.Fatalf("partition %d: last stable offset %d at the end %d %v into an open transaction", part, lso[part], e, elapsed)
			}
		}
	}

	took := time.Since(start) + waitStable(t, p.addr, "abandon", 20*time.Second)
	if took < timeout {
		t.Fatalf("the transaction was decided %v after it began, before its %v timeout", took, timeout)
	}
	t.Logf("abandoned transaction aborted %v after it began (timeout %v, cleanup every 500ms)", took.Round(time.Millisecond), timeout)

	want := []string{"after-0", "after-1", "before-0", "before-1"}
	got := valuesOf(readIsolation(t, p.addr, "abandon", kgo.ReadCommitted(), len(want), 500*time.Millisecond))
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %q, want %q", got, want)
	}
	all := valuesOf(readIsolation(t, p.addr, "abandon", kgo.ReadUncommitted(), len(want)+6, 300*time.Millisecond))
	if n := len(all); n != len(want)+6 {
		t.Fatalf("read_uncommitted sees %d records, want %d", n, len(want)+6)
	}

	txs, err := adm.DescribeTransactions(ctx, "abandoned")
	if err != nil {
		t.Fatal(err)
	}
	if d := txs["abandoned"]; d.Err != nil || d.State != "CompleteAbort" {
		t.Fatalf("describe abandoned: state %q err %v, want CompleteAbort", d.State, d.Err)
	}
	// The producer was fenced by the abort: its commit cannot succeed.
	err = abandoned.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the abandoned producer committed after its transaction timed out")
	}
	t.Logf("the abandoned producer's commit: %v", err)
}
