package integration

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterTwoDownMinISR: a partition with three replicas and
// min.insync.replicas=2 loses two of them, its leader among them. The
// survivor is elected leader with an ISR of itself alone: acks=all
// produce answers NOT_ENOUGH_REPLICAS (code 19) and appends nothing,
// acks=1 still appends, and the committed records read back from it.
// When one replica returns and catches up, acks=all works again.
//
// The cluster has three controllers and a fourth, broker-only node, so
// that killing two of the partition's brokers leaves a controller quorum
// to move leadership and shrink the ISR: with only three combined nodes,
// two kills would stop the metadata quorum too and produce would time out
// instead.
func TestClusterTwoDownMinISR(t *testing.T) {
	const topic = "minisr"
	c := cuStartCluster(t, 3, 1)
	cl := c.client(nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20))
	// Leader 4 (the broker-only node) and 1 die; 2 survives; 3 stays up
	// as a controller that holds no replica.
	cuCreateAssigned(t, cl, topic, [][]int32{{4, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	st := cuWaitISR(t, cl, topic, 0, []int32{1, 2, 4})
	if st.leader != 4 {
		t.Fatalf("%s-0 is led by %d, not its preferred replica 4", topic, st.leader)
	}
	var committed []string
	for i := range 20 {
		committed = append(committed, fmt.Sprintf("committed-%d", i))
	}
	cuProduceSync(t, cl, topic, 0, committed...)

	c.kill(4)
	c.kill(1)
	live := c.client(c.seedsExcept(1, 4), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cuWait(t, 60*time.Second, "broker 2 leading alone", func() error {
		s, err := cuPartitionState(live, topic, 0)
		if err == nil && (s.leader != 2 || !slices.Equal(s.isr, []int32{2})) {
			err = fmt.Errorf("leader %d, ISR %v", s.leader, s.isr)
		}
		return err
	})

	end := cuEndOffset(t, live, topic)
	if end != int64(len(committed)) {
		t.Fatalf("end offset %d with the ISR down to one, want %d", end, len(committed))
	}
	// The leader may learn its ISR a moment after the metadata says it:
	// poll until the answer is the one Kafka gives below min ISR.
	var code int16
	cuWait(t, 30*time.Second, "NOT_ENOUGH_REPLICAS for acks=all", func() error {
		var err error
		code, _, err = cuRawProduce(live, topic, 0, cuPlainBatch(t, "refused"))
		if err == nil && code != kerr.NotEnoughReplicas.Code {
			err = fmt.Errorf("acks=all produce answered %v", kerr.ErrorForCode(code))
		}
		return err
	})
	if got := cuEndOffset(t, live, topic); got != end {
		t.Fatalf("end offset %d after a refused acks=all produce, want %d: NOT_ENOUGH_REPLICAS must not append", got, end)
	}
	// A franz-go producer sees the same error once it stops retrying (it
	// refreshes metadata before each retry: no older than MetadataMinAge).
	strict := newClient(t, c.node(2).addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MetadataMinAge(100*time.Millisecond))
	err := strict.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("franz-go acks=all produce: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	// min.insync.replicas binds acks=all only.
	one := newClient(t, c.node(2).addr(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	code, base, err := cuRawProduce(one, topic, 0, cuPlainBatch(t, "acks-1"))
	if err != nil || code != 0 || base != end {
		t.Fatalf("acks=1 produce with one replica in sync: %v, code %v, base offset %d, want %d", err, kerr.ErrorForCode(code), base, end)
	}
	want := append(slices.Clone(committed), "acks-1")
	cuReadValues(t, c.seedsExcept(1, 4), topic, want)

	// One replica back: it catches up, rejoins the ISR, and acks=all works.
	c.restart(1)
	cuWaitISR(t, live, topic, 0, []int32{1, 2})
	cuWait(t, 30*time.Second, "acks=all produce with two replicas in sync", func() error {
		code, base, err := cuRawProduce(live, topic, 0, cuPlainBatch(t, "accepted"))
		if err == nil && code != 0 {
			err = fmt.Errorf("acks=all produce answered %v", kerr.ErrorForCode(code))
		}
		if err == nil && base != end+1 {
			t.Fatalf("acks=all record landed at %d, want %d", base, end+1)
		}
		return err
	})
	cuProduceSync(t, live, topic, 0, "franz-go")
	cuReadValues(t, c.seedsExcept(4), topic, append(want, "accepted", "franz-go"))
}

// cuEndOffset is the end offset of topic's partition 0.
func cuEndOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-0: %v %v", topic, ok, o.Err)
	}
	return o.Offset
}

// cuReadValues reads topic's partition 0 from the start through seeds and
// checks its values are want, in order.
func cuReadValues(t *testing.T, seeds []string, topic string, want []string) {
	t.Helper()
	var got []string
	for _, r := range readAllFrom(t, seeds, topic)[0] {
		got = append(got, string(r.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s-0 reads %q, want %q", topic, got, want)
	}
}
