package group

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// memStore is the runtime's in-memory store with the TxnStore side the
// group coordinator's transactional offset commits need.
type memStore struct{ *coordtest.MemStore }

func newMemStore() *memStore { return &memStore{coordtest.NewMemStore()} }

// AppendTxn implements TxnStore: the records keep their batch's producer.
func (s *memStore) AppendTxn(ctx context.Context, partition int32, txn TxnAppend, recs []Record) error {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Key: r.Key, Value: r.Value, Transactional: true, ProducerID: txn.ProducerID, ProducerEpoch: txn.ProducerEpoch}
	}
	return s.Write(ctx, partition, out)
}

// AppendMarker implements TxnStore with the control record Kafka writes.
func (s *memStore) AppendMarker(ctx context.Context, partition int32, m TxnMarker) error {
	return s.Write(ctx, partition, []Record{markerRecord(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit)})
}

// markerRecord is an end transaction marker as a load yields it.
func markerRecord(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool) Record {
	typ := kmsg.ControlRecordKeyTypeAbort
	if commit {
		typ = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
	value := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordinatorEpoch}).AppendTo(nil)
	return Record{Key: key, Value: value, Control: true, Transactional: true, ProducerID: producerID, ProducerEpoch: producerEpoch}
}

// harness drives a Coordinator on a fake clock and memStore, waiting after
// each step until every shard is idle, so scripts are deterministic.
type harness struct {
	t     testing.TB
	cfg   Config
	clock *coordtest.FakeClock
	store *memStore
	c     *Coordinator
	ids   atomic.Int64
	// topics is the topics view consumer groups assign from.
	topics *fakeTopics
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 4
	cfg.Shards = 2
	cfg.Logger = slog.New(slog.DiscardHandler)
	// The scripts show one target assignment per epoch bump;
	// TestConsumerAssignmentInterval covers the batching.
	cfg.ConsumerGroupAssignmentIntervalMs = 0
	return cfg
}

func newHarness(t testing.TB, cfg Config) *harness {
	h := &harness{t: t, cfg: cfg, clock: coordtest.NewFakeClock(), store: newMemStore(), topics: newFakeTopics()}
	if h.cfg.Topics == nil {
		h.cfg.Topics = h.topics
	}
	h.start()
	t.Cleanup(func() { h.c.Close() })
	return h
}

// start creates a coordinator on the harness's store and loads every
// partition from it.
func (h *harness) start() {
	c, err := newCoordinator(h.cfg, h.store, h.clock, func() string {
		return fmt.Sprint(h.ids.Add(1))
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	for p := range h.cfg.OffsetsTopicPartitions {
		if err := c.Load(context.Background(), p, coordtest.SeqOf(h.store.Records(p))); err != nil {
			h.t.Fatal(err)
		}
	}
}

// restart closes the coordinator and builds a new one from the store.
func (h *harness) restart() {
	h.quiesce()
	h.c.Close()
	h.start()
}

// quiesce waits until no shard has work queued and every append is done or
// held by the store.
func (h *harness) quiesce() { coordtest.Quiesce(h.t, h.c.rt, h.store.Held) }

// advance moves the clock, firing due timers one at a time in order and
// letting the shards finish each before the next.
func (h *harness) advance(d time.Duration) { h.clock.Advance(d, h.quiesce) }
