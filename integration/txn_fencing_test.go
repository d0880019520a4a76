package integration

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// rawProduce sends one batch to a partition in a produce request of its
// own, acks=all, and returns the partition's error code and base offset.
func rawProduce(t *testing.T, cl *kgo.Client, topic string, partition int32, txnID *string, batch []byte) (int16, int64) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	// franz-go sends the newest version both sides know, which names
	// topics by id.
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("list %s: %v %v", topic, err, tds[topic].Err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = txnID
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, tds[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw produce: %v", err)
	}
	pr := resp.Topics[0].Partitions[0]
	return pr.ErrorCode, pr.BaseOffset
}

// fenced reports whether err is the error a fenced transactional producer
// gets: PRODUCER_FENCED from the coordinator, INVALID_PRODUCER_EPOCH from
// a partition leader.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// TestTxnZombieFencing: two producers share a transactional id. When the
// second one initializes, the first (the zombie) is fenced: its next
// produce or its commit fails with the fencing error, the transaction it
// had open is aborted, and nothing it sends afterwards, through franz-go
// or as raw requests with its old producer epoch, becomes visible to
// read_committed consumers.
func TestTxnZombieFencing(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	for _, tc := range []struct {
		name string
		// zombie is what the fenced producer tries next; it returns the
		// error franz-go reports.
		zombie func(t *testing.T, cl *kgo.Client) error
	}{
		{"produce", func(t *testing.T, cl *kgo.Client) error {
			// Partition 0 is already in its transaction: the batch goes
			// straight to the partition leader.
			return cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Partition: 0, Value: []byte("zombie-after")}).FirstErr()
		}},
		{"produce-new-partition", func(t *testing.T, cl *kgo.Client) error {
			// Partition 1 is not: AddPartitionsToTxn goes to the
			// coordinator first.
			return cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Partition: 1, Value: []byte("zombie-after")}).FirstErr()
		}},
		{"commit", func(t *testing.T, cl *kgo.Client) error {
			return cl.EndTransaction(testContext(t, 30*time.Second), kgo.TryCommit)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, txnID := "fence-"+tc.name, "zombie-"+tc.name
			createTopic(t, p.addr, topic, 2)
			opts := []kgo.Opt{kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute)}
			ctx := testContext(t, 60*time.Second)

			zombie := newClient(t, p.addr, opts...)
			if err := zombie.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := zombie.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("zombie-before")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			oldPID, oldEpoch, err := zombie.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}

			// The new instance: its InitProducerId bumps the epoch and
			// aborts the zombie's open transaction.
			fresh := newClient(t, p.addr, opts...)
			if err := fresh.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			want := []string{"fresh-0", "fresh-1"}
			for i, v := range want {
				if err := fresh.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			newPID, newEpoch, err := fresh.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if newPID != oldPID || newEpoch <= oldEpoch {
				t.Fatalf("second producer has id %d epoch %d; the first had %d epoch %d: want the same id, a higher epoch", newPID, newEpoch, oldPID, oldEpoch)
			}

			err = tc.zombie(t, zombie)
			if !fenced(err) {
				t.Fatalf("the zombie's %s: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", tc.name, err)
			}
			t.Logf("zombie's %s failed with %v", tc.name, err)

			// Raw requests carrying the zombie's old epoch, as a client
			// that ignored the error would send them.
			rawZombie(t, zombie, topic, txnID, oldPID, oldEpoch)

			if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("the new producer's commit: %v", err)
			}
			waitStable(t, p.addr, topic, 15*time.Second)
			got := valuesOf(readIsolation(t, p.addr, topic, kgo.ReadCommitted(), len(want), 500*time.Millisecond))
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Fatalf("read_committed sees %q, want exactly the new producer's %q", got, want)
			}
			// The zombie's first record is in the log, aborted.
			all := valuesOf(readIsolation(t, p.addr, topic, kgo.ReadUncommitted(), len(want)+1, 500*time.Millisecond))
			if !slices.Contains(all, "zombie-before") {
				t.Fatalf("read_uncommitted sees %q, without the zombie's aborted record", all)
			}
			for _, v := range all {
				if v != "zombie-before" && strings.HasPrefix(v, "zombie") {
					t.Fatalf("the log holds %q, written by the zombie after it was fenced", v)
				}
			}
		})
	}
}

// rawZombie sends what a zombie that ignores its fencing could still send
// with its old producer id and epoch: a transactional batch straight to
// the partition leader, AddPartitionsToTxn and EndTxn to the coordinator.
// Each must be refused.
func rawZombie(t *testing.T, cl *kgo.Client, topic, txnID string, pid int64, epoch int16) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	now := time.Now().UnixMilli()
	batch, err := protocol.BuildBatch(protocol.BatchHeader{
		Attributes: protocol.AttrTransactional, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 1,
	}, []protocol.Record{{Value: []byte("zombie-raw")}}, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := rawProduce(t, cl, topic, 0, &txnID, batch)
	if err := kerr.ErrorForCode(code); !fenced(err) {
		t.Fatalf("raw produce with the old epoch: %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", err)
	}

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3 // the client form (v4+ is the broker-side batch form)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{1}
	add.Topics = append(add.Topics, at)
	addResp, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw AddPartitionsToTxn: %v", err)
	}
	if code := addResp.Topics[0].Partitions[0].ErrorCode; code != kerr.ProducerFenced.Code && code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("raw AddPartitionsToTxn with the old epoch: %v", kerr.ErrorForCode(code))
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, true
	end.Version = 4 // transaction protocol v1: the epoch must match exactly
	endResp, err := end.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw EndTxn: %v", err)
	}
	if code := endResp.ErrorCode; code != kerr.ProducerFenced.Code {
		t.Fatalf("raw EndTxn with the old epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
}
