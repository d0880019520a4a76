package broker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// pinnedClient is a client whose requests of the given keys go at most at
// the given versions, so a test speaks the protocol generation it means.
func pinnedClient(t *testing.T, ts *testServer, pins map[kmsg.Key]int16) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	for k, max := range pins {
		v.SetMaxKeyVersion(int16(k), max)
	}
	return ts.client(t, kgo.MaxVersions(v))
}

// initTxnProducer initializes a transactional id and returns its producer
// id and epoch, retrying while the coordinator loads.
func initTxnProducer(t *testing.T, cl *kgo.Client, id string) (int64, int16) {
	t.Helper()
	ctx := testContext(t)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			return resp.ProducerID, resp.ProducerEpoch
		}
		if ctx.Err() != nil {
			t.Fatalf("init producer id %s: %v code %v", id, err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// txnRecords builds a transactional batch of a producer.
func txnRecords(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []protocol.Record
	for i, v := range values {
		recs = append(recs, protocol.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{Attributes: protocol.AttrTransactional, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// txnProduceRequest is a transactional produce of one batch to one
// partition.
func txnProduceRequest(id, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &id
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceTxn sends a transactional batch and returns its partition's
// answer.
func produceTxn(t *testing.T, cl *kgo.Client, id, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp, err := txnProduceRequest(id, topic, partition, batch).RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("produce to %s-%d: %v", topic, partition, err)
	}
	return resp.Topics[0].Partitions[0]
}

// addPartitions is a client's AddPartitionsToTxn (v0-v3).
func addPartitions(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, topic string, partitions ...int32) {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("add %s-%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
}

// endTxn ends a transaction and returns the producer id and epoch to go
// on with (v5), retrying CONCURRENT_TRANSACTIONS.
func endTxn(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) (int64, int16) {
	t.Helper()
	ctx := testContext(t)
	for {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("end transaction (commit %v): %v", commit, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
}

// offsets returns a partition's end offset and last stable offset.
func offsets(t *testing.T, adm *kadm.Client, topic string, partition int32) (end, lso int64) {
	t.Helper()
	ctx := testContext(t)
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	eo, _ := e.Lookup(topic, partition)
	co, _ := c.Lookup(topic, partition)
	return eo.Offset, co.Offset
}

// waitStable waits until a partition's last stable offset reaches its end:
// every transaction on it is decided.
func waitStable(t *testing.T, adm *kadm.Client, topic string, partition int32) int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		end, lso := offsets(t, adm, topic, partition)
		if lso == end {
			return end
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-%d: last stable offset %d stays below the end %d", topic, partition, lso, end)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTxnState waits until a transactional id reaches state: EndTxn
// answers before the markers and the completion are written.
func waitTxnState(t *testing.T, adm *kadm.Client, id, state string) kadm.DescribedTransaction {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		txs, err := adm.DescribeTransactions(testContext(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if d := txs[id]; d.State == state || time.Now().After(deadline) {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// producerOn describes a producer on a partition.
func producerOn(t *testing.T, adm *kadm.Client, topic string, partition int32, pid int64) (kadm.DescribedProducer, bool) {
	t.Helper()
	ds, err := adm.DescribeProducers(testContext(t), kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds[topic].Partitions[partition].ActiveProducers[pid]
	return d, ok
}

// classicPins speak the classic transaction protocol (before KIP-890 part
// 2) with Produce v9, whose clients know INVALID_TXN_STATE only.
var classicPins = map[kmsg.Key]int16{kmsg.Produce: 9, kmsg.EndTxn: 4, kmsg.AddPartitionsToTxn: 3, kmsg.TxnOffsetCommit: 3}

// TestKIP890PartitionNotInTransaction: a transactional batch for a
// partition the producer never added to its transaction is refused with
// INVALID_TXN_STATE (TRANSACTION_ABORTABLE from Produce v11, whose clients
// know it) and nothing is written, while the partition it did add takes
// its batch.
func TestKIP890PartitionNotInTransaction(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "kv", 2, nil)
	cl := pinnedClient(t, ts, classicPins)
	pid, epoch := initTxnProducer(t, cl, "t-not-added")
	addPartitions(t, cl, "t-not-added", pid, epoch, "kv", 0)

	got := produceTxn(t, cl, "t-not-added", "kv", 1, txnRecords(t, pid, epoch, 0, "stray"))
	if got.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("produce to a partition outside the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(got.ErrorCode))
	}
	if got.ErrorMessage == nil || *got.ErrorMessage != "Partition was not added to the transaction" {
		t.Fatalf("error message %v", got.ErrorMessage)
	}
	v11 := pinnedClient(t, ts, map[kmsg.Key]int16{kmsg.Produce: 11})
	if got := produceTxn(t, v11, "t-not-added", "kv", 1, txnRecords(t, pid, epoch, 0, "stray")); got.ErrorCode != kerr.TransactionAbortable.Code {
		t.Fatalf("Produce v11 to a partition outside the transaction: %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(got.ErrorCode))
	}
	if end, _ := offsets(t, adm, "kv", 1); end != 0 {
		t.Fatalf("kv-1 end offset %d after refused produces, want 0", end)
	}
	if _, ok := producerOn(t, adm, "kv", 1, pid); ok {
		t.Fatal("the refused producer has state on kv-1")
	}

	if got := produceTxn(t, cl, "t-not-added", "kv", 0, txnRecords(t, pid, epoch, 0, "a", "b")); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("produce to the added partition: %v at %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	// The next batch of the open transaction needs no coordinator.
	if got := produceTxn(t, cl, "t-not-added", "kv", 0, txnRecords(t, pid, epoch, 2, "c")); got.ErrorCode != 0 || got.BaseOffset != 2 {
		t.Fatalf("second batch: %v at %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	endTxn(t, cl, "t-not-added", pid, epoch, true)
	if end := waitStable(t, adm, "kv", 0); end != 4 {
		t.Fatalf("kv-0 ends at %d after three records and a marker, want 4", end)
	}
	if recs := readAllIsolation(t, ts.addr, "kv", kgo.ReadCommitted(), 3); len(recs) != 3 {
		t.Fatalf("read_committed read %d records, want 3", len(recs))
	}
}

// hangingScenario runs KIP-890's classic case with the classic protocol:
// a batch held up in the network arrives after its transaction was
// aborted and the abort marker written. It returns the late batch's
// answer and the partition's end and last stable offsets afterwards.
func hangingScenario(t *testing.T, ts *testServer) (int16, int64, int64) {
	adm := ts.admin(t)
	createTopic(t, adm, "hang", 1, nil)
	cl := pinnedClient(t, ts, classicPins)
	pid, epoch := initTxnProducer(t, cl, "t-hang")
	addPartitions(t, cl, "t-hang", pid, epoch, "hang", 0)
	if got := produceTxn(t, cl, "t-hang", "hang", 0, txnRecords(t, pid, epoch, 0, "first")); got.ErrorCode != 0 {
		t.Fatalf("first batch: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	// The client gives up on its second batch and aborts.
	endTxn(t, cl, "t-hang", pid, epoch, false)
	if end := waitStable(t, adm, "hang", 0); end != 2 {
		t.Fatalf("end offset %d after a record and the abort marker, want 2", end)
	}
	// Until the coordinator completes the abort, the check answers
	// CONCURRENT_TRANSACTIONS (NOT_ENOUGH_REPLICAS to a v9 client, which
	// retries): the late batch is the one that comes after.
	waitTxnState(t, adm, "t-hang", "CompleteAbort")
	// The late batch: same epoch, next sequence.
	late := produceTxn(t, cl, "t-hang", "hang", 0, txnRecords(t, pid, epoch, 1, "late"))
	end, lso := offsets(t, adm, "hang", 0)
	return late.ErrorCode, end, lso
}

// TestKIP890HangingTransaction: the late batch of an aborted transaction
// is refused (INVALID_TXN_STATE), nothing is written, and the last stable
// offset stays at the end of the log.
func TestKIP890HangingTransaction(t *testing.T) {
	ts := startServer(t, "")
	code, end, lso := hangingScenario(t, ts)
	if code != kerr.InvalidTxnState.Code {
		t.Fatalf("late batch after the abort: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if end != 2 || lso != 2 {
		t.Fatalf("after the late batch: end %d, last stable offset %d, want 2 and 2", end, lso)
	}
	if d := waitTxnState(t, ts.admin(t), "t-hang", "CompleteAbort"); d.State != "CompleteAbort" {
		t.Fatalf("describe t-hang: %+v", d)
	}
}

// TestKIP890VerificationDisabled: with
// transaction.partition.verification.enable=false the same late batch is
// written and opens a transaction no coordinator will end: the last stable
// offset is stuck below it. This is what the defense prevents.
func TestKIP890VerificationDisabled(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.TransactionPartitionVerificationEnable = false })
	code, end, lso := hangingScenario(t, ts)
	if code != 0 || end != 3 || lso != 2 {
		t.Fatalf("without verification: late batch %v, end %d, last stable offset %d; want NONE, 3 and a stuck 2", kerr.ErrorForCode(code), end, lso)
	}
}

// TestKIP890MarkerDuringVerification: a marker written between the
// coordinator's answer and the append voids the answer (the guard), so
// the batch is refused even though the coordinator said yes; without the
// marker the same sequence appends.
func TestKIP890MarkerDuringVerification(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "race", 2, nil)
	cl := pinnedClient(t, ts, classicPins)
	pid, epoch := initTxnProducer(t, cl, "t-race")
	addPartitions(t, cl, "t-race", pid, epoch, "race", 0, 1)
	ctx := testContext(t)

	for partition, marker := range []bool{true, false} {
		batch := txnRecords(t, pid, epoch, 0, "x")
		req := txnProduceRequest("t-race", "race", int32(partition), batch)
		req.Version = 9
		v := ts.verifyProduce(ctx, req)
		if code, _ := v.failure("race", int32(partition)); code != 0 {
			t.Fatalf("partition %d: verification failed with %v", partition, kerr.ErrorForCode(code))
		}
		guard := v.guard("race", int32(partition))
		if guard == producerstate.NoGuard {
			t.Fatalf("partition %d: no verification guard", partition)
		}
		if marker {
			err := ts.writeMarkerLocal(ctx, "race", int32(partition), producerstate.Marker{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: 0})
			if err != nil {
				t.Fatal(err)
			}
		}
		p := ts.leaderPartition("race", int32(partition))
		_, err := ts.appendProduced(p, batch, time.Now(), guard)
		end := p.Log.LogEndOffset()
		switch {
		case marker && !errors.Is(err, kerr.InvalidTxnState):
			t.Fatalf("append after a marker: %v, want INVALID_TXN_STATE", err)
		case marker && end != 1:
			t.Fatalf("log end %d after the marker alone, want 1", end)
		case !marker && (err != nil || end != 1):
			t.Fatalf("append without a marker: %v, log end %d", err, end)
		}
	}
}

// TestKIP890TxnOffsetCommitVerified: a classic TxnOffsetCommit (v3) for a
// group whose offsets partition was never added with AddOffsetsToTxn is
// refused with INVALID_TXN_STATE; after AddOffsetsToTxn it is written.
func TestKIP890TxnOffsetCommitVerified(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "src", 1, nil)
	cl := pinnedClient(t, ts, classicPins)
	pid, epoch := initTxnProducer(t, cl, "t-offsets")
	commit := func() int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "t-offsets", "g-offsets", pid, epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "src"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx := testContext(t)
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			code := resp.Topics[0].Partitions[0].ErrorCode
			if (code == kerr.CoordinatorLoadInProgress.Code || code == kerr.CoordinatorNotAvailable.Code) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return code
		}
	}
	if code := commit(); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit without AddOffsetsToTxn: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "t-offsets", pid, epoch, "g-offsets"
	if resp, err := add.RequestWith(testContext(t), cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("add offsets: %v %v", err, resp)
	}
	if code := commit(); code != 0 {
		t.Fatalf("TxnOffsetCommit after AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	endTxn(t, cl, "t-offsets", pid, epoch, true)
	ctx := testContext(t)
	for {
		offs, err := ts.admin(t).FetchOffsets(ctx, "g-offsets")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup("src", 0); ok && o.At == 42 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("committed offsets %+v, want src-0 at 42", offs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keyRecorder records the keys of the requests a client writes.
type keyRecorder struct {
	mu   sync.Mutex
	keys map[int16]int
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (k *keyRecorder) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = make(map[int16]int)
	}
	k.keys[key]++
}

func (k *keyRecorder) count(key kmsg.Key) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[int16(key)]
}

// TestKIP890TransactionVersion2: with transaction version 2 a produce
// (v12+) adds its partition to the transaction itself, EndTxn v5 bumps the
// epoch on every commit and abort (seen in DescribeTransactions and, from
// the markers, in DescribeProducers), and the old epoch is fenced both on
// a partition of the transaction and on one it never touched.
func TestKIP890TransactionVersion2(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "tv2", 3, nil)
	rec := &keyRecorder{}
	cl := pinnedClient(t, ts, map[kmsg.Key]int16{kmsg.Produce: 12})
	hooked := ts.client(t, kgo.WithHooks(rec), kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.Produce), 12)
		return v
	}()))
	const id = "t-tv2"
	pid, e0 := initTxnProducer(t, cl, id)

	for partition, batch := range [][]byte{txnRecords(t, pid, e0, 0, "a", "b"), txnRecords(t, pid, e0, 0, "c")} {
		if got := produceTxn(t, hooked, id, "tv2", int32(partition), batch); got.ErrorCode != 0 {
			t.Fatalf("produce v12 to tv2-%d: %v", partition, kerr.ErrorForCode(got.ErrorCode))
		}
	}
	if n := rec.count(kmsg.AddPartitionsToTxn); n != 0 {
		t.Fatalf("the producer sent %d AddPartitionsToTxn", n)
	}
	describe := func() kadm.DescribedTransaction {
		txs, err := adm.DescribeTransactions(testContext(t), id)
		if err != nil {
			t.Fatal(err)
		}
		return txs[id]
	}
	if d := describe(); d.State != "Ongoing" || len(d.Topics["tv2"]) != 2 || d.ProducerEpoch != e0 {
		t.Fatalf("after implicit adds: %+v", d)
	}

	pid1, e1 := endTxn(t, cl, id, pid, e0, true)
	if pid1 != pid || e1 != e0+1 {
		t.Fatalf("EndTxn v5 commit answered producer %d epoch %d, want %d and %d", pid1, e1, pid, e0+1)
	}
	waitStable(t, adm, "tv2", 0)
	waitStable(t, adm, "tv2", 1)
	if d := waitTxnState(t, adm, id, "CompleteCommit"); d.State != "CompleteCommit" || d.ProducerEpoch != e1 {
		t.Fatalf("after the commit: %+v", d)
	}
	if d, ok := producerOn(t, adm, "tv2", 0, pid); !ok || d.ProducerEpoch != e1 || d.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer on tv2-0 after the commit marker: %+v (found %v), want epoch %d", d, ok, e1)
	}

	// The old epoch: fenced by the marker on a partition of the
	// transaction, by the coordinator on one it never touched.
	endBefore, _ := offsets(t, adm, "tv2", 0)
	if got := produceTxn(t, cl, id, "tv2", 0, txnRecords(t, pid, e0, 2, "zombie")); got.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch on tv2-0: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := produceTxn(t, cl, id, "tv2", 2, txnRecords(t, pid, e0, 0, "zombie")); got.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch on tv2-2: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(got.ErrorCode))
	}
	if end, _ := offsets(t, adm, "tv2", 0); end != endBefore {
		t.Fatalf("tv2-0 grew from %d to %d with fenced batches", endBefore, end)
	}
	if end, _ := offsets(t, adm, "tv2", 2); end != 0 {
		t.Fatalf("tv2-2 holds %d offsets after a fenced batch", end)
	}

	// The next transaction runs at the bumped epoch, sequences from 0,
	// and its abort bumps again.
	if got := produceTxn(t, cl, id, "tv2", 0, txnRecords(t, pid, e1, 0, "aborted")); got.ErrorCode != 0 {
		t.Fatalf("produce at epoch %d: %v", e1, kerr.ErrorForCode(got.ErrorCode))
	}
	_, e2 := endTxn(t, cl, id, pid, e1, false)
	if e2 != e1+1 {
		t.Fatalf("EndTxn v5 abort answered epoch %d, want %d", e2, e1+1)
	}
	waitStable(t, adm, "tv2", 0)
	if d := waitTxnState(t, adm, id, "CompleteAbort"); d.State != "CompleteAbort" || d.ProducerEpoch != e2 {
		t.Fatalf("after the abort: %+v", d)
	}
	if d, ok := producerOn(t, adm, "tv2", 0, pid); !ok || d.ProducerEpoch != e2 {
		t.Fatalf("producer on tv2-0 after the abort marker: %+v, want epoch %d", d, e2)
	}
	committed := readAllIsolation(t, ts.addr, "tv2", kgo.ReadCommitted(), 3)
	if len(committed) != 3 {
		t.Fatalf("read_committed read %d records, want 3", len(committed))
	}
	for _, r := range committed {
		if v := string(r.Value); v != "a" && v != "b" && v != "c" {
			t.Fatalf("read_committed returned %q", v)
		}
	}
}

// TestKIP890KgoTransactionVersion2: franz-go sees transaction.version 2
// advertised and runs its transactions and a GroupTransactSession without
// AddPartitionsToTxn or AddOffsetsToTxn; commits and aborts land as asked,
// the group's offsets commit with the transaction, and each EndTxn bumped
// the epoch.
func TestKIP890KgoTransactionVersion2(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	adm := ts.admin(t)
	createTopic(t, adm, "kgo-tv2", 3, nil)
	ctx := testContext(t)
	rec := &keyRecorder{}
	cl := ts.client(t, kgo.TransactionalID("kgo-tv2"), kgo.DefaultProduceTopic("kgo-tv2"), kgo.WithHooks(rec))
	// franz-go opts in at BeginTransaction from the features it has seen:
	// let it see them first.
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	round := func(n int, tag string, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(tag)}).FirstErr(); err != nil {
				t.Fatalf("%s: %v", tag, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s: %v", tag, err)
		}
	}
	round(10, "one", true)
	round(5, "aborted", false)
	round(7, "two", true)
	if n := rec.count(kmsg.AddPartitionsToTxn); n != 0 {
		t.Fatalf("franz-go sent %d AddPartitionsToTxn under transaction version 2", n)
	}
	if n := rec.count(kmsg.EndTxn); n != 3 {
		t.Fatalf("franz-go sent %d EndTxn, want 3", n)
	}
	if d := waitTxnState(t, adm, "kgo-tv2", "CompleteCommit"); d.State != "CompleteCommit" || d.ProducerEpoch != 3 {
		t.Fatalf("after three transactions from epoch 0: %+v, want CompleteCommit at epoch 3", d)
	}
	committed := readAllIsolation(t, ts.addr, "kgo-tv2", kgo.ReadCommitted(), 17)
	if len(committed) != 17 {
		t.Fatalf("read_committed read %d records, want 17", len(committed))
	}
	for _, r := range committed {
		if string(r.Value) == "aborted" {
			t.Fatal("read_committed returned an aborted record")
		}
	}
	if all := readAllIsolation(t, ts.addr, "kgo-tv2", kgo.ReadUncommitted(), 22); len(all) != 22 {
		t.Fatalf("read_uncommitted read %d records, want 22", len(all))
	}

	// Read-process-write: the offsets partition joins the transaction
	// through TxnOffsetCommit v5.
	createTopic(t, adm, "kgo-tv2-in", 1, nil)
	createTopic(t, adm, "kgo-tv2-out", 1, nil)
	produceAll(t, ts.client(t, kgo.DefaultProduceTopic("kgo-tv2-in")), keyedRecords("kgo-tv2-in", 20, "in"))
	srec := &keyRecorder{}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("kgo-tv2-eos"),
		kgo.ConsumerGroup("kgo-tv2-group"), kgo.ConsumeTopics("kgo-tv2-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("kgo-tv2-out"),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.WithHooks(srec))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Client().Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 20; {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("polled %d of 20 records", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		})
	}
	if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
		t.Fatalf("end: committed=%v err=%v", committed, err)
	}
	if n, m := srec.count(kmsg.AddPartitionsToTxn), srec.count(kmsg.AddOffsetsToTxn); n != 0 || m != 0 {
		t.Fatalf("the session sent %d AddPartitionsToTxn and %d AddOffsetsToTxn", n, m)
	}
	if srec.count(kmsg.TxnOffsetCommit) == 0 {
		t.Fatal("the session committed no offsets")
	}
	// EndTxn answers once PrepareCommit is durable, as Kafka's does; the
	// marker that makes the offsets visible to a fetch that does not ask
	// for stable offsets lands after that answer.
	if o := waitGroupOffset(t, adm, "kgo-tv2-group", "kgo-tv2-in", 0, 20); o != 20 {
		t.Fatalf("group offset %d after the committed round, want 20", o)
	}
	if got := readAllIsolation(t, ts.addr, "kgo-tv2-out", kgo.ReadCommitted(), 20); len(got) != 20 {
		t.Fatalf("output has %d committed records, want 20", len(got))
	}
}

// TestKIP890BackToBackTransactions: a transaction version 2 producer
// starts each transaction the moment EndTxn answers, while the markers of
// the last one are still being written. The leader's add meets
// CONCURRENT_TRANSACTIONS, waits, and must then append: the marker that
// lands meanwhile ends the verification the first attempt started, so a
// retry that reused its guard would refuse the batch (INVALID_TXN_STATE).
func TestKIP890BackToBackTransactions(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "b2b", 2, nil)
	cl := pinnedClient(t, ts, map[kmsg.Key]int16{kmsg.Produce: 12})
	const id, rounds = "t-b2b", 40
	pid, epoch := initTxnProducer(t, cl, id)
	ctx := testContext(t)
	for round := range rounds {
		for partition := range int32(2) {
			batch := txnRecords(t, pid, epoch, 0, fmt.Sprintf("r%d", round))
			for {
				got := produceTxn(t, cl, id, "b2b", partition, batch)
				if got.ErrorCode == kerr.ConcurrentTransactions.Code && ctx.Err() == nil {
					continue // franz-go retries this too
				}
				if got.ErrorCode != 0 {
					t.Fatalf("round %d, b2b-%d: %v", round, partition, kerr.ErrorForCode(got.ErrorCode))
				}
				break
			}
		}
		_, epoch = endTxn(t, cl, id, pid, epoch, true)
	}
	waitStable(t, adm, "b2b", 0)
	waitStable(t, adm, "b2b", 1)
	if got := readAllIsolation(t, ts.addr, "b2b", kgo.ReadCommitted(), 2*rounds); len(got) != 2*rounds {
		t.Fatalf("read_committed read %d records, want %d", len(got), 2*rounds)
	}
}

// TestKIP890TV2MarkerDuringAdd: with transaction version 2 the last
// transaction's marker carries the epoch the next transaction runs at.
// When it lands while the leader adds the partition to the next
// transaction, the add stands: the append goes through.
func TestKIP890TV2MarkerDuringAdd(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "tv2race", 1, nil)
	cl := pinnedClient(t, ts, map[kmsg.Key]int16{kmsg.Produce: 12})
	const id = "t-tv2race"
	pid, e0 := initTxnProducer(t, cl, id)
	if got := produceTxn(t, cl, id, "tv2race", 0, txnRecords(t, pid, e0, 0, "first")); got.ErrorCode != 0 {
		t.Fatalf("first transaction: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	_, e1 := endTxn(t, cl, id, pid, e0, true)
	waitStable(t, adm, "tv2race", 0)

	ctx := testContext(t)
	batch := txnRecords(t, pid, e1, 0, "second")
	req := txnProduceRequest(id, "tv2race", 0, batch)
	req.Version = 12
	v := ts.verifyProduce(ctx, req)
	guard := v.guard("tv2race", 0)
	if code, _ := v.failure("tv2race", 0); code != 0 || guard == producerstate.NoGuard {
		t.Fatalf("add for the next transaction: %v, guard %d", kerr.ErrorForCode(code), guard)
	}
	// The commit marker of the first transaction, as the coordinator
	// writes it again on a retry, lands between the add and the append.
	err := ts.writeMarkerLocal(ctx, "tv2race", 0, producerstate.Marker{ProducerID: pid, ProducerEpoch: e1, Commit: true, TransactionVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := ts.leaderPartition("tv2race", 0)
	if _, err := ts.appendProduced(p, batch, time.Now(), guard); err != nil {
		t.Fatalf("append after the last transaction's marker: %v", err)
	}
	endTxn(t, cl, id, pid, e1, true)
	waitStable(t, adm, "tv2race", 0)
	if got := readAllIsolation(t, ts.addr, "tv2race", kgo.ReadCommitted(), 2); len(got) != 2 {
		t.Fatalf("read_committed read %d records, want 2", len(got))
	}
}

// TestKIP890VerificationOverTheNetwork: the leader's AddPartitionsToTxn
// goes to the coordinator over the inter-broker listener, the path
// between brokers (here to this node's own listener): verification and
// the transaction version 2 add work through it as in process.
func TestKIP890VerificationOverTheNetwork(t *testing.T) {
	ts := startServer(t, "")
	ts.addSender.ViaNetwork = true
	adm := ts.admin(t)
	createTopic(t, adm, "net", 2, nil)

	classic := pinnedClient(t, ts, classicPins)
	pid, epoch := initTxnProducer(t, classic, "t-net")
	addPartitions(t, classic, "t-net", pid, epoch, "net", 0)
	if got := produceTxn(t, classic, "t-net", "net", 1, txnRecords(t, pid, epoch, 0, "stray")); got.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("produce outside the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := produceTxn(t, classic, "t-net", "net", 0, txnRecords(t, pid, epoch, 0, "in")); got.ErrorCode != 0 {
		t.Fatalf("produce to the added partition: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	endTxn(t, classic, "t-net", pid, epoch, true)

	tv2 := pinnedClient(t, ts, map[kmsg.Key]int16{kmsg.Produce: 12})
	pid2, e2 := initTxnProducer(t, tv2, "t-net-tv2")
	if got := produceTxn(t, tv2, "t-net-tv2", "net", 1, txnRecords(t, pid2, e2, 0, "added")); got.ErrorCode != 0 {
		t.Fatalf("Produce v12 add over the network: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	endTxn(t, tv2, "t-net-tv2", pid2, e2, true)
	waitStable(t, adm, "net", 0)
	waitStable(t, adm, "net", 1)
	if got := readAllIsolation(t, ts.addr, "net", kgo.ReadCommitted(), 2); len(got) != 2 {
		t.Fatalf("read_committed read %d records, want 2", len(got))
	}
	remote := ts.addSender.Clients().Count()
	if remote != 1 {
		t.Fatalf("%d connections to coordinators, want 1", remote)
	}
}

// waitGroupOffset polls a group's committed offset of one partition until
// it is want or five seconds pass, and returns the last read.
func waitGroupOffset(t *testing.T, adm *kadm.Client, group, topic string, partition int32, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		offs, err := adm.FetchOffsets(testContext(t), group)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup(topic, partition)
		if o.At == want || time.Now().After(deadline) {
			return o.At
		}
		time.Sleep(20 * time.Millisecond)
	}
}
