package txn

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
	"github.com/gregorbroker/gregor/broker/producerstate"
)

func TestPartitionFor(t *testing.T) {
	tests := []struct {
		id         string
		partitions int32
		want       int32
	}{
		{"foo", 50, 24},               // "foo".hashCode() = 101574
		{"polygenelubricants", 50, 0}, // hashCode is Integer.MIN_VALUE
		{"", 50, 0},
		{"x", 0, 0},
		{"ab", 50, 3105 % 50},
		{"\U0001F600", 7, PartitionFor("\U0001F600", 7)},
	}
	for _, tt := range tests {
		if got := PartitionFor(tt.id, tt.partitions); got != tt.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tt.id, tt.partitions, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"no partitions", func(c *Config) { c.TransactionStateTopicPartitions = 0 }, false},
		{"no shards", func(c *Config) { c.Shards = 0 }, false},
		{"max timeout", func(c *Config) { c.TransactionMaxTimeoutMs = 0 }, false},
		{"expiration", func(c *Config) { c.TransactionalIDExpirationMs = -1 }, false},
		{"abort interval", func(c *Config) { c.AbortTimedOutTransactionCleanupIntervalMs = 0 }, false},
		{"expire interval", func(c *Config) { c.RemoveExpiredTransactionalIDCleanupIntervalMs = 0 }, false},
		{"tv 3", func(c *Config) { c.TransactionVersion = 3 }, false},
		{"tv 0", func(c *Config) { c.TransactionVersion = 0 }, true},
		{"backoff", func(c *Config) { c.MarkerRetryBackoffMs = 0 }, false},
		{"request timeout", func(c *Config) { c.RequestTimeoutMs = 0 }, false},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		tt.mod(&cfg)
		if err := cfg.validate(); (err == nil) != tt.ok {
			t.Errorf("%s: validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	h := newHarness(t, testConfig())
	d := h.deps()
	d.Markers = nil
	if _, err := New(testConfig(), d); err == nil {
		t.Error("New without a marker writer succeeded")
	}
}

// TestRecordGolden pins the bytes of __transaction_state records to
// Kafka's TransactionLogKey/TransactionLogValue schemas.
func TestRecordGolden(t *testing.T) {
	tr := transit{
		producerID: 7, prevProducerID: 7, nextProducerID: -1, producerEpoch: 2, timeoutMs: 60000,
		state: stateOngoing, partitions: tpSet{{"b", 1}: {}, {"a", 0}: {}, {"b", 0}: {}},
		startMs: 5, lastUpdateMs: 6, tv: TV2,
	}
	key := "0000" + "0002" + hex.EncodeToString([]byte("t1"))
	v0 := "0000" + "0000000000000007" + "0002" + "0000ea60" + "01" +
		"00000002" + // topics
		"0001" + "61" + "00000001" + "00000000" + // a: [0]
		"0001" + "62" + "00000002" + "00000000" + "00000001" + // b: [0 1]
		"0000000000000006" + "0000000000000005"
	// Version 1 is flexible: compact arrays and strings, tagged fields for
	// the previous producer id (tag 0) and client transaction version (tag
	// 2); the next producer id is at its default and left out.
	v1 := "0001" + "0000000000000007" + "0002" + "0000ea60" + "01" +
		"03" +
		"02" + "61" + "02" + "00000000" + "00" +
		"02" + "62" + "03" + "00000000" + "00000001" + "00" +
		"0000000000000006" + "0000000000000005" +
		"02" + "00" + "08" + "0000000000000007" + "02" + "02" + "0002"
	for _, tt := range []struct {
		tv    int16
		value string
	}{{TV0, v0}, {TV1, v1}, {TV2, v1}} {
		r := txnRecord("t1", tr, tt.tv)
		if got := hex.EncodeToString(r.Key); got != key {
			t.Errorf("tv %d key = %s, want %s", tt.tv, got, key)
		}
		if got := hex.EncodeToString(r.Value); got != tt.value {
			t.Errorf("tv %d value =\n%s, want\n%s", tt.tv, got, tt.value)
		}
	}
	// Empty transactions write a null partition list.
	empty := transit{producerID: 7, nextProducerID: -1, prevProducerID: -1, state: stateEmpty, startMs: -1, partitions: tpSet{}}
	r := txnRecord("t1", empty, TV0)
	if want := "ffffffff"; !strings.Contains(hex.EncodeToString(r.Value), want) {
		t.Errorf("empty value %x has no null array", r.Value)
	}
	if tomb := txnTombstone("t1"); tomb.Value != nil || !bytes.Equal(tomb.Key, r.Key) {
		t.Errorf("tombstone = %+v", tomb)
	}
}

// TestDecodeRoundTrip checks every field written survives a replay, for
// both value versions.
func TestDecodeRoundTrip(t *testing.T) {
	for _, tv := range []int16{TV0, TV2} {
		for _, st := range []txnState{stateEmpty, stateOngoing, statePrepareCommit, statePrepareAbort, stateCompleteCommit, stateCompleteAbort} {
			tr := transit{producerID: 9, prevProducerID: 8, nextProducerID: 10, producerEpoch: 3, lastProducerEpoch: 2,
				timeoutMs: 1234, state: st, partitions: tpSet{{"x", 3}: {}}, startMs: 11, lastUpdateMs: 12, tv: tv}
			if st == stateEmpty {
				tr.partitions = tpSet{}
			}
			r := txnRecord("id", tr, tv)
			got, err := decodeValue("id", 3, r.Value)
			if err != nil {
				t.Fatalf("tv %d %s: %v", tv, st, err)
			}
			want := &txnMeta{id: "id", partition: 3, producerID: 9, prevProducerID: -1, nextProducerID: -1, producerEpoch: 3,
				lastProducerEpoch: -1, timeoutMs: 1234, state: st, pending: stateNone, partitions: tr.partitions,
				startMs: 11, lastUpdateMs: 12, tv: 0}
			if tv >= TV1 {
				want.prevProducerID, want.nextProducerID, want.tv = 8, 10, tv
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("tv %d %s: decoded %+v, want %+v", tv, st, got, want)
			}
		}
	}
}

func seqWithErr(recs []Record, err error) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
		if err != nil {
			yield(Record{}, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	good := txnRecord("t1", transit{producerID: 1, prevProducerID: -1, nextProducerID: -1, state: stateEmpty, startMs: -1, partitions: tpSet{}}, TV2)
	badState := txnRecord("t1", transit{producerID: 1, prevProducerID: -1, nextProducerID: -1, state: 9, startMs: -1, partitions: tpSet{}}, TV2)
	v5 := slicesConcat([]byte{0, 5}, good.Value[2:])
	tests := []struct {
		name    string
		records iter.Seq2[Record, error]
		ok      bool
	}{
		{"good", coordtest.SeqOf([]Record{good}), true},
		{"unknown key version is skipped", coordtest.SeqOf([]Record{{Key: []byte{0, 9, 1, 2}, Value: []byte{1}}, good}), true},
		{"short key", coordtest.SeqOf([]Record{{Key: []byte{0}}}), false},
		{"truncated key", coordtest.SeqOf([]Record{{Key: []byte{0, 0, 0, 9, 'a'}, Value: good.Value}}), false},
		{"truncated value", coordtest.SeqOf([]Record{{Key: good.Key, Value: good.Value[:9]}}), false},
		{"unknown value version", coordtest.SeqOf([]Record{{Key: good.Key, Value: v5}}), false},
		{"unknown state", coordtest.SeqOf([]Record{badState}), false},
		{"read error", seqWithErr([]Record{good}, errors.New("disk")), false},
	}
	for _, tt := range tests {
		h := newHarness(t, testConfig())
		p := h.c.PartitionFor("t1")
		h.c.Unload(p)
		err := h.c.Load(context.Background(), p, 3, tt.records)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Load = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"t1"}
		code := h.c.DescribeTransactions(context.Background(), req).TransactionStates[0].ErrorCode
		want := int16(0)
		if !tt.ok {
			want = errNotCoordinator // a failed load leaves the partition unserved
		}
		if code != want {
			t.Errorf("%s: describe after load = %s, want %s", tt.name, coordtest.ErrName(code), coordtest.ErrName(want))
		}
	}
	h := newHarness(t, testConfig())
	if err := h.c.Load(context.Background(), 4, 0, coordtest.SeqOf(nil)); err == nil {
		t.Error("Load of partition 4 of 4 succeeded")
	}
}

func slicesConcat(a, b []byte) []byte { return append(append([]byte{}, a...), b...) }

// TestLoadRoundTrip builds transactions in every state through the API,
// then loads the store into a new coordinator and checks each id comes
// back the same (the last epoch is not persisted, as in Kafka).
func TestLoadRoundTrip(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &script{t: t, h: h}
	for _, cmd := range []string{
		"init id=empty",
		"init id=ongoing", "add id=ongoing pid=1001 epoch=0 a/0 a/1 b/7",
		"init id=committed", "add id=committed pid=1002 epoch=0 a/0", "end id=committed pid=1002 epoch=0 commit",
		"init id=aborted", "add id=aborted pid=1003 epoch=0 v=5 a/2", "end id=aborted pid=1003 epoch=0 v=5 abort",
		"init id=bumped", "init id=bumped",
		"init id=preparing", "add id=preparing pid=1005 epoch=0 c/0",
		"markers hold", "end id=preparing pid=1005 epoch=0 commit",
	} {
		s.run(cmd)
	}
	ids := []string{"empty", "ongoing", "committed", "aborted", "bumped", "preparing"}
	before := snapshot(t, h, ids)

	fresh := newHarness(t, testConfig())
	fresh.markers.Set(true)
	for p := range h.cfg.TransactionStateTopicPartitions {
		fresh.c.Unload(p)
		if err := fresh.c.Load(context.Background(), p, 7, coordtest.SeqOf(h.store.Records(p))); err != nil {
			t.Fatal(err)
		}
	}
	fresh.quiesce()
	after := snapshot(t, fresh, ids)
	for _, id := range ids {
		b, a := before[id], after[id]
		b.lastProducerEpoch = -1
		if id == "preparing" {
			// The loaded copy resumed its markers: its pending completion
			// was prepared again by the load.
			b.pending, a.pending = stateNone, stateNone
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: loaded %+v\nwant %+v", id, a, b)
		}
	}
	fresh.markers.Set(false)
	fresh.quiesce()
	if got := fresh.markers.drain(); len(got) != 1 || got[0].m.CoordinatorEpoch != 7 || !got[0].m.Commit ||
		got[0].m.ProducerID != 1005 || len(got[0].m.Partitions) != 1 {
		t.Errorf("markers resumed after load: %+v", got)
	}
	if st := snapshot(t, fresh, []string{"preparing"})["preparing"]; st.state != stateCompleteCommit || len(st.partitions) != 0 {
		t.Errorf("resumed transaction ended %s with %d partitions", st.state, len(st.partitions))
	}
}

// snapshot copies the state of ids.
func snapshot(t *testing.T, h *harness, ids []string) map[string]txnMeta {
	out := make(map[string]txnMeta)
	for _, id := range ids {
		h.onShard(id, func(m *machine) {
			_, tm, code := m.lookup(id)
			if code != 0 || tm == nil {
				t.Fatalf("%s: code %d", id, code)
			}
			c := *tm
			c.partitions = tm.partitions.clone()
			c.failedFence = false
			out[id] = c
		})
	}
	return out
}

// blockingRecords yields its records once released.
func blockingRecords(recs []Record, release <-chan struct{}) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		<-release
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func TestLoadInProgress(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx := context.Background()
	p := h.c.PartitionFor("t1")
	h.c.Unload(p)
	release := make(chan struct{})
	loaded := make(chan error, 1)
	go func() { loaded <- h.c.Load(ctx, p, 1, blockingRecords(nil, release)) }()

	describe := func() int16 {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"t1"}
		return h.c.DescribeTransactions(ctx, req).TransactionStates[0].ErrorCode
	}
	deadline := time.Now().Add(5 * time.Second)
	for describe() != errCoordinatorLoadInProgress {
		if time.Now().After(deadline) {
			t.Fatal("partition never started loading")
		}
		time.Sleep(time.Millisecond)
	}
	id := "t1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 1000
	if code := h.c.InitProducerID(ctx, init)().ErrorCode; code != errCoordinatorLoadInProgress {
		t.Errorf("InitProducerId while loading = %s", coordtest.ErrName(code))
	}
	if code := h.c.ListTransactions(ctx, kmsg.NewPtrListTransactionsRequest()).ErrorCode; code != errCoordinatorLoadInProgress {
		t.Errorf("ListTransactions while loading = %s", coordtest.ErrName(code))
	}
	close(release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if code := describe(); code != errTransactionalIDNotFound {
		t.Errorf("describe after load = %s", coordtest.ErrName(code))
	}

	// Unloading a partition while it loads makes the load fail.
	release = make(chan struct{})
	go func() { loaded <- h.c.Load(ctx, p, 2, blockingRecords(nil, release)) }()
	for describe() != errCoordinatorLoadInProgress {
		time.Sleep(time.Millisecond)
	}
	h.c.Unload(p)
	close(release)
	if err := <-loaded; err == nil {
		t.Error("load that was unloaded midway succeeded")
	}
	if code := describe(); code != errNotCoordinator {
		t.Errorf("describe after unload = %s", coordtest.ErrName(code))
	}
}

// TestCanceledContext: a caller whose context ends gets
// COORDINATOR_NOT_AVAILABLE while its request stays parked.
func TestCanceledContext(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &script{t: t, h: h}
	s.run("init id=t1")
	h.store.Set(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "t1", 1000, 0
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID = "t1", 1000
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	r := h.c.AddPartitionsToTxn(ctx, add)()
	if code := r.Topics[0].Partitions[0].ErrorCode; code != errCoordinatorNotAvailable {
		t.Errorf("AddPartitionsToTxn with expired context = %s", coordtest.ErrName(code))
	}
	h.store.Set(false)
	h.quiesce()
}

// TestCloseLeaksNothing closes a coordinator with appends, marker writes
// and requests in flight: every request is answered and no goroutine of
// the package is left.
func TestCloseLeaksNothing(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &script{t: t, h: h}
	for _, cmd := range []string{
		"init id=t1", "add id=t1 pid=1000 epoch=0 a/0",
		"init id=t2", "add id=t2 pid=1001 epoch=0 a/0",
		"markers hold", "end id=t1 pid=1000 epoch=0 commit",
		"store hold",
	} {
		s.run(cmd)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	codes := make([]int16, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "t2", 1001, 0, true
			codes[i] = h.c.EndTxn(ctx, req)().ErrorCode
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.store.Held() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(coordtest.GoroutinesIn("broker/coord.(*Shard")) == 0 {
		t.Fatal("no shard goroutines seen before Close: the leak check would not see them either")
	}
	h.c.Close()
	wg.Wait()
	for i, code := range codes {
		if code != errNotCoordinator && code != errConcurrentTransactions {
			t.Errorf("request %d after Close = %s", i, coordtest.ErrName(code))
		}
	}
	if code := h.c.ListTransactions(ctx, kmsg.NewPtrListTransactionsRequest()).ErrorCode; code != errCoordinatorNotAvailable {
		t.Errorf("ListTransactions after Close = %s", coordtest.ErrName(code))
	}
	if err := h.c.Load(ctx, 0, 0, coordtest.SeqOf(nil)); err == nil {
		t.Error("Load after Close succeeded")
	}
	h.c.Unload(0)
	h.c.Close()
	coordtest.NoGoroutinesLeft(t, 5*time.Second, "broker/txn.(*", "broker/coord.(*")
}

// TestMarkersAcceptedByPartitions feeds the markers the coordinator writes
// to a partition's producer state, as the broker will: markers of both
// transaction versions end the transaction, and a fenced producer's
// later data is rejected.
func TestMarkersAcceptedByPartitions(t *testing.T) {
	for _, tv := range []int16{TV0, TV2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := &script{t: t, h: h}
			st := producerstate.New()
			offset := int64(0)
			produce := func(pid int64, epoch int16, seq int32) error {
				b := producerstate.BatchInfo{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastSequence: seq, IsTransactional: true, NumRecords: 1}
				if _, err := st.Check(b); err != nil {
					return err
				}
				st.Update(b, offset, offset, 0)
				offset++
				return nil
			}
			seen := 0
			apply := func() {
				news := h.markers.history(seen)
				seen += len(news)
				if len(news) == 0 {
					t.Fatal("no marker written")
				}
				for _, at := range news {
					m := producerstate.Marker{ProducerID: at.m.ProducerID, ProducerEpoch: at.m.ProducerEpoch,
						CoordinatorEpoch: at.m.CoordinatorEpoch, Commit: at.m.Commit, TransactionVersion: at.m.TransactionVersion}
					if err := st.CheckMarker(m); err != nil {
						t.Fatalf("partition rejects marker %+v: %v", at.m, err)
					}
					if _, ok := st.ApplyMarker(m, offset, 0); !ok {
						t.Fatalf("marker %+v ended no transaction", at.m)
					}
					offset++
				}
			}
			v, addV := 4, 3
			if tv == TV2 {
				v, addV = 5, 5
			}
			s.run("init id=t1")
			s.run(fmt.Sprintf("add id=t1 pid=1000 epoch=0 v=%d p/0", addV))
			if err := produce(1000, 0, 0); err != nil {
				t.Fatal(err)
			}
			s.run(fmt.Sprintf("end id=t1 pid=1000 epoch=0 v=%d commit", v))
			apply()
			if _, open := st.LastStableOffsetFirst(); open {
				t.Error("transaction still open after its commit marker")
			}
			// A new transaction, then a second producer fences the first:
			// the abort marker ends it and the zombie's data is refused.
			epoch := int16(0)
			if tv == TV2 {
				epoch = 1
			}
			s.run(fmt.Sprintf("add id=t1 pid=1000 epoch=%d v=%d p/0", epoch, addV))
			seq := int32(1)
			if tv == TV2 {
				seq = 0 // a new epoch starts its sequences over
			}
			if err := produce(1000, epoch, seq); err != nil {
				t.Fatal(err)
			}
			s.run("init id=t1")
			apply()
			if _, open := st.LastStableOffsetFirst(); open {
				t.Error("transaction still open after the fence's abort marker")
			}
			if err := produce(1000, epoch, seq+1); !errors.Is(err, kerr.InvalidProducerEpoch) {
				t.Errorf("zombie produce after fence = %v, want INVALID_PRODUCER_EPOCH", err)
			}
		})
	}
}

// TestConcurrentProducers runs many transactional producers at once across
// shards; every transaction must commit with its markers written once.
func TestConcurrentProducers(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx := context.Background()
	const producers, rounds = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("p%d", i)
			init := kmsg.NewPtrInitProducerIDRequest()
			init.TransactionalID = &id
			init.TransactionTimeoutMillis = 60000
			r := h.c.InitProducerID(ctx, init)()
			if r.ErrorCode != 0 {
				errs <- fmt.Errorf("%s init: %s", id, coordtest.ErrName(r.ErrorCode))
				return
			}
			pid, epoch := r.ProducerID, r.ProducerEpoch
			for round := range rounds {
				add := kmsg.NewPtrAddPartitionsToTxnRequest()
				add.Version = 5
				tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
				tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = id, pid, epoch
				tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{int32(round % 3)}}}
				add.Transactions = append(add.Transactions, tx)
				if code := h.c.AddPartitionsToTxn(ctx, add)().Transactions[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
					errs <- fmt.Errorf("%s add: %s", id, coordtest.ErrName(code))
					return
				}
				for {
					end := kmsg.NewPtrEndTxnRequest()
					end.Version = 5
					end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
					er := h.c.EndTxn(ctx, end)()
					if er.ErrorCode == errConcurrentTransactions {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					if er.ErrorCode != 0 {
						errs <- fmt.Errorf("%s end: %s", id, coordtest.ErrName(er.ErrorCode))
						return
					}
					pid, epoch = er.ProducerID, er.ProducerEpoch
					break
				}
				// The next AddPartitionsToTxn waits while this
				// completion is pending.
				for h.c.AddPartitionsToTxn(ctx, verifyReq(id, pid, epoch))().Transactions[0].Topics[0].Partitions[0].ErrorCode == errConcurrentTransactions {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.quiesce()
	markers := h.markers.drain()
	if len(markers) != producers*rounds {
		t.Errorf("%d markers written, want %d", len(markers), producers*rounds)
	}
	resp := h.c.ListTransactions(ctx, kmsg.NewPtrListTransactionsRequest())
	if len(resp.TransactionStates) != producers {
		t.Fatalf("%d transactions listed", len(resp.TransactionStates))
	}
	for _, st := range resp.TransactionStates {
		if st.TransactionState != "CompleteCommit" {
			t.Errorf("%s is %s", st.TransactionalID, st.TransactionState)
		}
	}
}

func verifyReq(id string, pid int64, epoch int16) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
	req.Transactions = append(req.Transactions, tx)
	return req
}

// TestBatchedAddPartitions sends one AddPartitionsToTxn v5 naming several
// transactions, some verified and some added, and checks each answer.
func TestBatchedAddPartitions(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &script{t: t, h: h}
	s.run("init id=a")
	s.run("init id=b")
	s.run("add id=a pid=1000 epoch=0 x/0")
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	mk := func(id string, pid int64, verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = id, pid, verify
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "x", Partitions: parts}}
		return tx
	}
	req.Transactions = append(req.Transactions, mk("a", 1000, true, 0, 1), mk("b", 1001, false, 2, 2), mk("c", 5, false, 0), mk("", 5, true, 0))
	resp := h.c.AddPartitionsToTxn(context.Background(), req)()
	var got []string
	for _, tx := range resp.Transactions {
		for _, tp := range tx.Topics {
			for _, p := range tp.Partitions {
				got = append(got, fmt.Sprintf("%s:%s/%d=%s", tx.TransactionalID, tp.Topic, p.Partition, coordtest.ErrName(p.ErrorCode)))
			}
		}
	}
	want := []string{"a:x/0=NONE", "a:x/1=TRANSACTION_ABORTABLE", "b:x/2=NONE", "c:x/0=INVALID_PRODUCER_ID_MAPPING", ":x/0=INVALID_REQUEST"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batched answer = %v, want %v", got, want)
	}
}

func TestEpochHelpers(t *testing.T) {
	if !epochExhausted(math.MaxInt16-1) || epochExhausted(math.MaxInt16-2) {
		t.Error("epochExhausted boundary")
	}
	for name, s := range map[string]txnState{"Empty": stateEmpty, "PrepareEpochFence": statePrepareEpochFence} {
		if got, ok := stateByName(name); !ok || got != s || s.String() != name {
			t.Errorf("state %s round trip: %v %v", name, got, ok)
		}
	}
	if _, ok := stateByName("empty"); ok {
		t.Error("state names are case-sensitive in Kafka")
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{context.Canceled, errNotCoordinator},
		{kerr.NotEnoughReplicas, errCoordinatorNotAvailable},
		{fmt.Errorf("x: %w", kerr.RequestTimedOut), errCoordinatorNotAvailable},
		{kerr.NotLeaderForPartition, errNotCoordinator},
		{kerr.KafkaStorageError, errNotCoordinator},
		{kerr.RecordListTooLarge, errUnknownServerError},
		{kerr.InvalidRecord, kerr.InvalidRecord.Code},
		{errors.New("disk"), errUnknownServerError},
	}
	for _, tt := range tests {
		if got := appendErrorCode(tt.err); got != tt.want {
			t.Errorf("appendErrorCode(%v) = %s, want %s", tt.err, coordtest.ErrName(got), coordtest.ErrName(tt.want))
		}
	}
	outcomes := []struct {
		err  error
		want markerOutcome
	}{
		{nil, markerDone},
		{fmt.Errorf("x: %w", ErrPartitionDeleted), markerDrop},
		{kerr.UnsupportedForMessageFormat, markerDrop},
		{kerr.InvalidProducerEpoch, markerStop},
		{kerr.TransactionCoordinatorFenced, markerStop},
		{kerr.NotLeaderForPartition, markerRetry},
		{kerr.UnknownTopicOrPartition, markerRetry},
		{errors.New("connection reset"), markerRetry},
	}
	for _, tt := range outcomes {
		if got := classifyMarkerError(tt.err); got != tt.want {
			t.Errorf("classifyMarkerError(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// FuzzReplay feeds arbitrary records to the loader: it must fail cleanly,
// never panic.
func FuzzReplay(f *testing.F) {
	good := txnRecord("t1", transit{producerID: 1, prevProducerID: -1, nextProducerID: -1, state: stateOngoing,
		partitions: tpSet{{"a", 1}: {}}, startMs: 1, tv: TV2}, TV2)
	f.Add(good.Key, good.Value)
	f.Add([]byte{0, 0, 0, 1, 'x'}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _ = replay(0, coordtest.SeqOf([]Record{{Key: key, Value: value}}), discardLogger())
	})
}
