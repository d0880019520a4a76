package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWriteTxnMarkersOverTheNetwork: with the coordinator sending every
// marker over the inter-broker listener (here to this node's own), a
// committed transaction becomes visible to read_committed readers, an
// aborted one never does, and the last stable offset reaches the end of
// every partition.
func TestWriteTxnMarkersOverTheNetwork(t *testing.T) {
	ts := startServer(t, "")
	ts.txns.markers.ViaNetwork = true
	adm := ts.admin(t)
	createTopic(t, adm, "mnet", 3, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("t-mnet"), kgo.DefaultProduceTopic("mnet"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t)
	for round, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "r%d-p%d", round, p)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", round, err)
		}
	}
	// Three rounds of one record and one marker per partition.
	for p := range int32(3) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			ends, err := adm.ListEndOffsets(ctx, "mnet")
			if err != nil {
				t.Fatal(err)
			}
			stable, err := adm.ListCommittedOffsets(ctx, "mnet")
			if err != nil {
				t.Fatal(err)
			}
			end, _ := ends.Lookup("mnet", p)
			lso, _ := stable.Lookup("mnet", p)
			if end.Offset == 6 && lso.Offset == 6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: end %d, last stable %d, want 6 and 6", p, end.Offset, lso.Offset)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	got := readAllIsolation(t, ts.addr, "mnet", kgo.ReadCommitted(), 6)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	slices.Sort(vals)
	want := []string{"r0-p0", "r0-p1", "r0-p2", "r2-p0", "r2-p1", "r2-p2"}
	if !slices.Equal(vals, want) {
		t.Fatalf("read_committed: %v, want %v", vals, want)
	}
	if n := ts.txns.markers.Clients().Count(); n != 1 {
		t.Fatalf("%d connections to leaders, want 1", n)
	}
}
