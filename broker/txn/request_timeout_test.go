package txn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// TestAppendNeverAnsweredTimesOut: an append to __transaction_state whose
// answer never comes (the broker's high watermark wait on a partition
// nobody replicates any more) held its transactional id in a pending
// transition for ever, so every later InitProducerId answered
// CONCURRENT_TRANSACTIONS (the stall TestNetFaults -netfault.all showed).
// As Kafka's coordinator, each append is bounded by the request timeout:
// the InitProducerId answers COORDINATOR_NOT_AVAILABLE, the pending
// transition is cleared, and the client's retry succeeds once appends
// are answered again.
func TestAppendNeverAnsweredTimesOut(t *testing.T) {
	cfg := testConfig()
	cfg.RequestTimeoutMs = 200
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := "stuck"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 10000

	h.store.Set(true) // every append waits until its context ends
	began := time.Now()
	resp := h.c.InitProducerID(ctx, init)()
	if resp.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("InitProducerId with its append unanswered = %s, want COORDINATOR_NOT_AVAILABLE", coordtest.ErrName(resp.ErrorCode))
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("InitProducerId with its append unanswered took %v; the request timeout is %v", took, ms(cfg.RequestTimeoutMs))
	}
	if n := len(h.store.Records(PartitionFor(id, cfg.TransactionStateTopicPartitions))); n != 0 {
		t.Fatalf("%d records appended while appends were held", n)
	}

	h.store.Set(false)
	resp = h.c.InitProducerID(ctx, init)()
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		t.Fatalf("InitProducerId once appends are answered = %s (id %d, epoch %d), want success",
			coordtest.ErrName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	if n := len(h.store.Records(PartitionFor(id, cfg.TransactionStateTopicPartitions))); n != 1 {
		t.Errorf("%d records in __transaction_state after the retry, want 1", n)
	}
}

// TestCompletionRetriedAfterTimeout: the completion record of a
// transaction whose markers are written timed out; it is appended again
// (REQUEST_TIMED_OUT is COORDINATOR_NOT_AVAILABLE, which writeCompletion
// retries) instead of leaving the transaction in PrepareCommit, where
// InitProducerId would answer CONCURRENT_TRANSACTIONS for ever.
func TestCompletionRetriedAfterTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.RequestTimeoutMs = 200
	h := newHarness(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := "late"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 10000
	resp := h.c.InitProducerID(ctx, init)()
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId = %s", coordtest.ErrName(resp.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, resp.ProducerID, resp.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	if r := h.c.AddPartitionsToTxn(ctx, add)(); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn = %s", coordtest.ErrName(r.Topics[0].Partitions[0].ErrorCode))
	}
	// The markers are held, then the store: the completion record's
	// append is the one that times out.
	h.markers.Set(true)
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, resp.ProducerID, resp.ProducerEpoch, true
	if r := h.c.EndTxn(ctx, end)(); r.ErrorCode != 0 {
		t.Fatalf("EndTxn = %s", coordtest.ErrName(r.ErrorCode))
	}
	h.store.Set(true)
	h.markers.Set(false)
	time.Sleep(3 * ms(cfg.RequestTimeoutMs)) // the completion's append times out at least once
	h.store.Set(false)

	deadline := time.Now().Add(10 * time.Second)
	for {
		h.advance(ms(cfg.MarkerRetryBackoffMs)) // the completion's retry timer
		var state txnState
		h.onShard(id, func(m *machine) { _, tm, _ := m.lookup(id); state = tm.state })
		if state == stateCompleteCommit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction still %s after its completion's append timed out", state)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp = h.c.InitProducerID(ctx, init)()
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId after the commit completed = %s", coordtest.ErrName(resp.ErrorCode))
	}
}
