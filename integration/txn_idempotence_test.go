package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/protocol"
)

// idempotentRecords is what the idempotence tests send: the issue's
// 100,000 records.
const idempotentRecords = 100_000

// idempotentRun is one franz-go idempotent producer sending records
// "<name>:<seq>" to partition seq % partitions, with every acknowledgement
// noted in a history.
type idempotentRun struct {
	name       string
	topic      string
	partitions int32
	records    int
	h          *history

	failed   atomic.Int64
	errMu    sync.Mutex
	firstErr error
}

// produce sends every record through seeds and returns once each has been
// acknowledged or has failed. It must not call t.Fatal: the test goroutine
// injects faults meanwhile.
func (r *idempotentRun) produce(seeds string) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds),
		kgo.DefaultProduceTopic(r.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// An idempotent franz-go producer keeps up to five requests in
		// flight per broker; small batches make many requests, so a cut
		// connection loses several at different stages.
		kgo.ProducerBatchMaxBytes(4 << 10),
		kgo.ProducerLinger(time.Millisecond),
	}, fastRetries()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		r.fail(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for seq := 0; seq < r.records; seq++ {
		rec := &kgo.Record{Partition: int32(seq) % r.partitions, Value: recordValue(r.name, seq)}
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if err != nil {
				r.fail(fmt.Errorf("record %s: %w", rec.Value, err))
				return
			}
			_, s, _ := parseValue(rec.Value)
			r.h.ack(r.name, s, rec.Partition, rec.Offset)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		r.fail(fmt.Errorf("flush: %w", err))
	}
}

func (r *idempotentRun) fail(err error) {
	r.failed.Add(1)
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// waitAcked waits until n records are acknowledged or the producer is done.
func (r *idempotentRun) waitAcked(t *testing.T, n int, done <-chan struct{}) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for r.h.count() < n {
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatalf("only %d of %d records acknowledged", r.h.count(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// verify reads the whole topic back and checks that every record was
// acknowledged and is there exactly once, where it was acknowledged, in
// the order sent within each partition.
func (r *idempotentRun) verify(t *testing.T, addr string) {
	t.Helper()
	if n := r.failed.Load(); n > 0 {
		t.Fatalf("%d records failed; first: %v", n, r.firstErr)
	}
	if n := r.h.count(); n != r.records {
		t.Fatalf("%d of %d records acknowledged", n, r.records)
	}
	log := flattenLog(readAll(t, addr, r.topic))
	if problems := r.h.check(asRead(log)); len(problems) > 0 {
		t.Fatalf("history check found %d problems:\n%s", len(problems), firstProblems(problems, 20))
	}
	if len(log) != r.records {
		t.Fatalf("the log holds %d records, %d were sent once each", len(log), r.records)
	}
}

// TestTxnIdempotenceConnectionCuts: a franz-go idempotent producer sends
// 100,000 records through a proxy that cuts every connection after a
// random number of bytes in a random direction (requests that never
// arrive, and requests acted on whose answers never arrive). Every record
// ends up in the log exactly once, in order per partition.
func TestTxnIdempotenceConnectionCuts(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", port), 1)
	p := startBehindProxy(t, dir, port, px)
	createTopic(t, p.addr, "idem-cuts", 4)

	run := &idempotentRun{name: "cuts", topic: "idem-cuts", partitions: 4, records: idempotentRecords, h: newHistory()}
	px.setRandomCuts(32<<10, 2<<10)
	run.produce(px.addr())
	px.setRandomCuts(0, 0)
	accepted, cuts := px.stats()
	t.Logf("%d connections through the proxy, %d cut; %d records failed (first: %v)", accepted, cuts, run.failed.Load(), run.firstErr)
	if cuts < 10 {
		t.Fatalf("only %d connections cut: the test did not exercise retries", cuts)
	}
	px.cutAll() // so readAll's connections start clean
	run.verify(t, px.addr())
}

// TestTxnIdempotenceSigkill: the same producer, through the same cutting
// proxy, while gregor is killed with SIGKILL a third of the way through
// and restarted on the same data: producer state rebuilt from the log
// still recognizes the batches retried across the restart.
func TestTxnIdempotenceSigkill(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", port), 2)
	p := startBehindProxy(t, dir, port, px)
	createTopic(t, p.addr, "idem-kill", 4)

	run := &idempotentRun{name: "kill", topic: "idem-kill", partitions: 4, records: idempotentRecords, h: newHistory()}
	px.setRandomCuts(64<<10, 4<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run.produce(px.addr())
	}()
	run.waitAcked(t, idempotentRecords/3, done)
	before := run.h.count()
	p.kill()
	px.cutAll()
	time.Sleep(200 * time.Millisecond)
	p = startBehindProxy(t, dir, port, px)
	<-done
	px.setRandomCuts(0, 0)
	px.cutAll()
	accepted, cuts := px.stats()
	t.Logf("SIGKILL after %d acknowledgements; %d connections through the proxy, %d cut", before, accepted, cuts)
	if before >= idempotentRecords {
		t.Fatalf("all records acknowledged before the kill")
	}
	run.verify(t, px.addr())
}

// idempotentBatch builds a batch of an idempotent producer.
func idempotentBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	recs := make([]protocol.Record, len(values))
	for i, v := range values {
		recs[i] = protocol.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTxnIdempotenceRetryAfterSigkill: batches acknowledged before a
// SIGKILL, retried by their producer after the restart, are recognized
// from the producer state rebuilt on recovery, from the snapshot a clean
// shutdown wrote earlier plus the log after it: answered with their
// original offsets and not written again. The sequence goes on from
// there, and a gap is still refused.
func TestTxnIdempotenceRetryAfterSigkill(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "idem-retry", 1)
	cl := newClient(t, p.addr)
	pid, epoch, err := cl.ProducerID(testContext(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b0 := idempotentBatch(t, pid, epoch, 0, "a", "b", "c")
	b1 := idempotentBatch(t, pid, epoch, 3, "d", "e")
	if code, base := rawProduce(t, cl, "idem-retry", 0, nil, b0); code != 0 || base != 0 {
		t.Fatalf("first batch: code %d base offset %d", code, base)
	}
	// A clean stop writes a producer snapshot at offset 3; the second
	// batch lands after it and is known after the kill only from the log.
	p.stop()
	snaps, _ := filepath.Glob(filepath.Join(dir, "idem-retry-0", "*.snapshot"))
	if len(snaps) != 1 {
		t.Fatalf("producer snapshots after a clean stop: %v, want one", snaps)
	}
	p = startGregor(t, dir, port)
	cl = newClient(t, p.addr)
	if code, base := rawProduce(t, cl, "idem-retry", 0, nil, b1); code != 0 || base != 3 {
		t.Fatalf("second batch: code %d base offset %d", code, base)
	}
	p.kill()
	p = startGregor(t, dir, port)
	cl = newClient(t, p.addr)
	for _, tc := range []struct {
		name  string
		batch []byte
		code  int16
		base  int64
	}{
		{"retry of the last batch", b1, 0, 3},
		{"retry of the one before", b0, 0, 0},
		{"next batch", idempotentBatch(t, pid, epoch, 5, "f"), 0, 5},
		{"gap", idempotentBatch(t, pid, epoch, 9, "gap"), kerr.OutOfOrderSequenceNumber.Code, -1},
	} {
		code, base := rawProduce(t, cl, "idem-retry", 0, nil, tc.batch)
		if code != tc.code || (code == 0 && base != tc.base) {
			t.Fatalf("%s: code %v base offset %d, want code %v base %d", tc.name, kerr.ErrorForCode(code), base, kerr.ErrorForCode(tc.code), tc.base)
		}
	}
	log := readAll(t, p.addr, "idem-retry")[0]
	var got []string
	for _, r := range log {
		got = append(got, string(r.Value))
	}
	if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("log holds %q, want %q", got, want)
	}
}
