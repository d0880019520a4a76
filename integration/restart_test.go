package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type ackedRecord struct {
	partition int32
	offset    int64
	value     []byte
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(addr, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.CreateTopic(testContext(t, 30*time.Second), partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	for p, err := range waitPartitionsSettled(t, addr, topic, partitions) {
		if err != nil {
			t.Fatalf("create %s: partition %d: %v", topic, p, err)
		}
	}
}

// waitPartitionsSettled waits until every partition of a topic just
// created answers ListOffsets on its leader with something other than
// the transient errors of a partition whose log is not made yet
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// LEADER_NOT_AVAILABLE): CreateTopics answers once the topic is
// committed, and the brokers make its logs afterwards, as Kafka's do. It
// returns each partition's answer: nil, or the error of a log that could
// not be made (KAFKA_STORAGE_ERROR).
func waitPartitionsSettled(t *testing.T, addr, topic string, partitions int32) map[int32]error {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx := testContext(t, 60*time.Second)
	var last error
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		last = err
		if err == nil {
			got := map[int32]error{}
			settled := true
			ends.Each(func(o kadm.ListedOffset) {
				got[o.Partition] = o.Err
				if errors.Is(o.Err, kerr.NotLeaderForPartition) || errors.Is(o.Err, kerr.UnknownTopicOrPartition) ||
					errors.Is(o.Err, kerr.LeaderNotAvailable) {
					settled = false
					last = fmt.Errorf("partition %d: %w", o.Partition, o.Err)
				}
			})
			if settled && len(got) == int(partitions) {
				return got
			}
			if settled {
				last = fmt.Errorf("%d partitions listed of %d", len(got), partitions)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the partitions of %s did not settle: %v", topic, last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readAll consumes every partition of topic from the start up to its end
// offsets at the time of the call.
func readAll(t *testing.T, addr, topic string) map[int32][]*kgo.Record {
	return readAllFrom(t, []string{addr}, topic)
}

// readAllFrom is readAll with several seed brokers.
func readAllFrom(t *testing.T, seeds []string, topic string) map[int32][]*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(newClient(t, strings.Join(seeds, ",")))
	ends, err := adm.ListEndOffsets(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := make(map[int32][]*kgo.Record)
	got := 0
	ctx := testContext(t, 60*time.Second)
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	return out
}

// checkAcked asserts the log is gapless from offset 0 and holds every
// acknowledged record at its acknowledged offset.
func checkAcked(t *testing.T, log map[int32][]*kgo.Record, acked []ackedRecord) {
	t.Helper()
	for p, recs := range log {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d", p, i, r.Offset)
			}
		}
	}
	for _, a := range acked {
		recs := log[a.partition]
		if a.offset >= int64(len(recs)) {
			t.Fatalf("acknowledged record %d/%d lost (log has %d)", a.partition, a.offset, len(recs))
		}
		if !bytes.Equal(recs[a.offset].Value, a.value) {
			t.Fatalf("record %d/%d: %q, acknowledged %q", a.partition, a.offset, recs[a.offset].Value, a.value)
		}
	}
}

func TestSigtermRestart(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "orders", 3)
	cl := newClient(t, p.addr, kgo.DefaultProduceTopic("orders"))
	var acked []ackedRecord
	for i := 0; i < 300; i++ {
		v := []byte(fmt.Sprintf("before-%d", i))
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: v}).First()
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ackedRecord{r.Partition, r.Offset, v})
	}
	cl.Close()
	p.stop()

	p = startGregor(t, dir, port)
	cl = newClient(t, p.addr, kgo.DefaultProduceTopic("orders"))
	for i := 0; i < 300; i++ {
		v := []byte(fmt.Sprintf("after-%d", i))
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: v}).First()
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ackedRecord{r.Partition, r.Offset, v})
	}
	log := readAll(t, p.addr, "orders")
	checkAcked(t, log, acked)
	total := 0
	for _, recs := range log {
		total += len(recs)
	}
	if total != 600 {
		t.Fatalf("log holds %d records, 600 were produced", total)
	}
}

// TestSigkillDuringProduce kills gregor while producers stream acks=all and
// acks=1 records, restarts it, and checks that every acknowledged record is
// there at its offset and that new records continue after the recovered
// log.
func TestSigkillDuringProduce(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "stream", 4)

	var mu sync.Mutex
	var acked []ackedRecord
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := []kgo.Opt{kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("stream"), kgo.RequiredAcks(acks),
				kgo.RecordRetries(0), kgo.RequestRetries(0)}
			if acks != kgo.AllISRAcks() {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Error(err)
				return
			}
			// Closing the client after the kill fails what is still in
			// flight: those records were never acknowledged.
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := 0; !stop.Load(); i++ {
				v := []byte(fmt.Sprintf("w%d-%d", w, i))
				cl.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, ackedRecord{r.Partition, r.Offset, v})
					mu.Unlock()
				})
				if i%100 == 99 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	p.kill()
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n < 1000 {
		t.Fatalf("only %d records acknowledged before the kill", n)
	}

	p = startGregor(t, dir, port)
	log := readAll(t, p.addr, "stream")
	checkAcked(t, log, acked)

	cl := newClient(t, p.addr, kgo.DefaultProduceTopic("stream"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for part, recs := range log {
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Partition: part, Value: []byte("after")}).First()
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != int64(len(recs)) {
			t.Fatalf("partition %d: new record at %d, recovered log ends at %d", part, r.Offset, len(recs))
		}
	}
	t.Logf("%d records acknowledged before SIGKILL, all recovered", n)
}
