package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// The figures of docs/performance.md's "Idempotent and transactional
// producers" section. They take minutes and write several GiB, so they run
// only when asked:
//
//	go test -run TestTxnFigures -timeout 30m ./integration -args -txn.figures
var txnFigures = flag.Bool("txn.figures", false, "measure the idempotent and transactional producer figures")

// figureRuns is how many times each throughput is measured; the median is
// reported.
const figureRuns = 5

// TestTxnFigures measures, against a gregor built without the race
// detector: idempotent produce throughput against plain produce (acks=all,
// 1 KiB records, five requests in flight for both); transactions per
// second and commit latency for one-record transactions on one partition;
// and how long rebuilding a 1 GiB partition's producer state takes with
// and without a snapshot.
func TestTxnFigures(t *testing.T) {
	if !*txnFigures {
		t.Skip("figures run with -args -txn.figures")
	}
	bin := filepath.Join(t.TempDir(), "gregor")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gregor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build gregor: %v", err)
	}
	raceBin := gregorBin
	gregorBin = bin
	t.Cleanup(func() { gregorBin = raceBin })

	t.Run("idempotence-overhead", figureIdempotenceOverhead)
	t.Run("idempotence-broker-path", figureIdempotenceBrokerPath)
	t.Run("small-transactions", figureSmallTransactions)
	t.Run("producer-state-recovery", figureProducerStateRecovery)
}

// loadResult is one produce run.
type loadResult struct {
	mbPerSec, recordsPerSec float64
}

// produceLoad sends records of size bytes to topic as fast as the client
// goes, acks=all, lingering 5 ms as gregor perf does, with or without
// idempotence; both keep five produce requests in flight, so the
// difference is the idempotent producer's own cost.
func produceLoad(addr, topic string, records, size int, idempotent bool) (loadResult, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return loadResult{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, size)
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range records {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return loadResult{}, err
	}
	secs := time.Since(start).Seconds()
	if firstErr != nil {
		return loadResult{}, firstErr
	}
	return loadResult{
		mbPerSec:      float64(records*size) / mib / secs,
		recordsPerSec: float64(records) / secs,
	}, nil
}

const mib = 1024 * 1024

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func figureIdempotenceOverhead(t *testing.T) {
	const records, size = 1_000_000, 1024
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	for _, parts := range []int32{1, 8} {
		var plain, idem []float64
		var plainR, idemR []float64
		for run := range figureRuns {
			// Alternate, so drift in the machine's load hits both.
			for _, idempotent := range []bool{false, true} {
				topic := fmt.Sprintf("load-%d-%v-%d", parts, idempotent, run)
				createTopic(t, p.addr, topic, parts)
				res, err := produceLoad(p.addr, topic, records, size, idempotent)
				if err != nil {
					t.Fatal(err)
				}
				if idempotent {
					idem, idemR = append(idem, res.mbPerSec), append(idemR, res.recordsPerSec)
				} else {
					plain, plainR = append(plain, res.mbPerSec), append(plainR, res.recordsPerSec)
				}
				dropTopic(t, p.addr, topic)
			}
		}
		pm, im := medianOf(plain), medianOf(idem)
		t.Logf("FIGURE produce %d partition(s), acks=all, 1 KiB: plain %.1f MB/s (%.0f rec/s), idempotent %.1f MB/s (%.0f rec/s): overhead %.1f%% (runs plain %v idempotent %v)",
			parts, pm, medianOf(plainR), im, medianOf(idemR), 100*(1-im/pm), roundedList(plain), roundedList(idem))
	}
}

// figureIdempotenceBrokerPath isolates the broker's side: one connection
// sends produce requests of one 16 x 1 KiB batch each, acks=all, one at a
// time, with and without a producer id (sequences counting up), so client
// batching plays no part. Both build their batch per request.
func figureIdempotenceBrokerPath(t *testing.T) {
	const requests = 20000
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	cl := newClient(t, p.addr)
	ctx := testContext(t, 10*time.Minute)
	pid, epoch, err := newClient(t, p.addr).ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 1024)
	var plain, idem []float64
	for run := range figureRuns {
		for _, idempotent := range []bool{false, true} {
			topic := fmt.Sprintf("path-%v-%d", idempotent, run)
			createTopic(t, p.addr, topic, 1)
			tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for i := range requests {
				h := protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
				if idempotent {
					h = protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: int32(i * 16)}
				}
				recs := make([]protocol.Record, 16)
				for j := range recs {
					recs[j] = protocol.Record{OffsetDelta: int32(j), Value: value}
				}
				batch, err := protocol.BuildBatch(h, recs, protocol.CodecNone)
				if err != nil {
					t.Fatal(err)
				}
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = topic, tds[topic].ID
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = batch
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(code))
				}
			}
			perReq := float64(time.Since(start).Microseconds()) / requests
			if idempotent {
				idem = append(idem, perReq)
			} else {
				plain = append(plain, perReq)
			}
			dropTopic(t, p.addr, topic)
		}
	}
	pm, im := medianOf(plain), medianOf(idem)
	t.Logf("FIGURE broker produce path, one 16 x 1 KiB batch per request, acks=all, sequential: plain %.1f µs/request, idempotent %.1f µs/request: overhead %.1f%% (runs plain %v idempotent %v)",
		pm, im, 100*(im/pm-1), roundedList(plain), roundedList(idem))
}

func roundedList(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.1f", x)
	}
	return out
}

func dropTopic(t *testing.T, addr, topic string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.DeleteTopics(testContext(t, 30*time.Second), topic); err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
}

func percentileOf(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func figureSmallTransactions(t *testing.T) {
	const perProducer = 3000
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "small-txn", 8)
	for _, producers := range []int{1, 8} {
		var mu sync.Mutex
		var commits []time.Duration
		var wg sync.WaitGroup
		errs := make(chan error, producers)
		start := time.Now()
		for w := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.TransactionalID(fmt.Sprintf("small-%d-%d", producers, w)),
					kgo.DefaultProduceTopic("small-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
				if err != nil {
					errs <- err
					return
				}
				defer cl.Close()
				ctx := context.Background()
				mine := make([]time.Duration, 0, perProducer)
				for i := range perProducer {
					if err := cl.BeginTransaction(); err != nil {
						errs <- err
						return
					}
					if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(w % 8), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
						errs <- err
						return
					}
					began := time.Now()
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						errs <- err
						return
					}
					mine = append(mine, time.Since(began))
				}
				mu.Lock()
				commits = append(commits, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		slices.Sort(commits)
		t.Logf("FIGURE %d producer(s), one-record transactions on one partition each: %.0f transactions/s; commit (EndTxn) latency p50 %v p99 %v max %v",
			producers, float64(len(commits))/elapsed.Seconds(), percentileOf(commits, 0.50).Round(time.Microsecond),
			percentileOf(commits, 0.99).Round(time.Microsecond), commits[len(commits)-1].Round(time.Microsecond))
	}
}

// figureProducerStateRecovery fills one partition with 1 GiB from an
// idempotent producer in 16 KiB batches (Kafka's default batch.size), then
// restarts gregor twice: once with the snapshot the clean shutdown wrote
// at the log end, once with the partition's .snapshot files removed. It
// times the first idempotent produce to the partition after each start,
// which loads its producer state (from the snapshot, or by reading every
// batch header), and then the first read_committed ListOffsets, which
// rebuilds the transactional state from the whole log either way. The log
// is in the page cache: these are warm-cache figures.
func figureProducerStateRecovery(t *testing.T) {
	const size, total = 1024, 1 << 30
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "pstate", 1)
	createTopic(t, p.addr, "warm", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("pstate"),
		kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, size)
	ctx := testContext(t, 20*time.Minute)
	for range total / size {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	partDir := filepath.Join(dir, "pstate-0")

	measure := func(what string) {
		p.stop()
		if what == "without snapshot" {
			snaps, _ := filepath.Glob(filepath.Join(partDir, "*.snapshot"))
			if len(snaps) == 0 {
				t.Fatalf("no snapshot in %s after a clean shutdown", partDir)
			}
			for _, s := range snaps {
				if err := os.Remove(s); err != nil {
					t.Fatal(err)
				}
			}
		}
		p = startGregor(t, dir, port)
		cl := newClient(t, p.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// Connection, metadata and producer id first, on another topic.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "warm", Value: []byte("w")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		timed := func() time.Duration {
			start := time.Now()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "pstate", Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		first, second := timed(), timed()
		adm := kadm.NewClient(cl)
		start := time.Now()
		if _, err := adm.ListCommittedOffsets(ctx, "pstate"); err != nil {
			t.Fatal(err)
		}
		lso := time.Since(start)
		start = time.Now()
		if _, err := adm.ListCommittedOffsets(ctx, "pstate"); err != nil {
			t.Fatal(err)
		}
		lso2 := time.Since(start)
		t.Logf("FIGURE producer state of a 1 GiB partition (%d-byte records, 16 KiB batches), %s: first idempotent produce %v (next %v): rebuild about %v; first read_committed ListOffsets %v (next %v)",
			size, what, first.Round(time.Microsecond), second.Round(time.Microsecond), (first - second).Round(time.Millisecond),
			lso.Round(time.Millisecond), lso2.Round(time.Microsecond))
	}
	measure("with snapshot")
	measure("without snapshot")
	var sizes []string
	entries, _ := os.ReadDir(partDir)
	var logBytes int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			if fi, err := e.Info(); err == nil {
				logBytes += fi.Size()
			}
		}
	}
	sizes = append(sizes, fmt.Sprintf("%.2f GiB of segments", float64(logBytes)/(1<<30)))
	t.Logf("FIGURE partition: %s", strings.Join(sizes, ", "))
}
