package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactions workload of the fault runs: a transactional producer
// writes transactions of nfTxnSize records and commits four of five,
// aborting the fifth; a read_committed reader reads all along. A record
// counts as acknowledged when its transaction's commit was acknowledged;
// a transaction whose end failed is in doubt and counts as neither. No
// record of an acknowledged abort may ever be read at read_committed.
const nfTxnSize = 10

type nfTxn struct {
	h        *history
	errs     *errorCounts
	mu       sync.Mutex
	aborted  map[string]bool // values of acknowledged aborts
	sawAbort []string        // aborted values a read_committed reader got
	commits  atomic.Int64
	aborts   atomic.Int64
	doubtful atomic.Int64
	log      *nfClientLog // the transactional client's, shown if the run fails
}

// startNFTxn runs the transactional producer until stop is closed.
func startNFTxn(t *testing.T, c *nfCluster, topic, txnID string, h *history, errs *errorCounts, stop <-chan struct{}) (*nfTxn, <-chan struct{}) {
	x := &nfTxn{h: h, errs: errs, aborted: make(map[string]bool), log: newNFClientLog(4000)}
	t.Cleanup(func() {
		if t.Failed() || *nfTxnLog {
			t.Logf("the transactional client's last log lines:\n%s", x.log)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			cl, err := kgo.NewClient(append(nfClientOpts(c), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID),
				kgo.TransactionTimeout(20*time.Second), kgo.RecordRetries(1<<30), kgo.ProduceRequestTimeout(3*time.Second), kgo.WithLogger(x.log))...)
			if err != nil {
				errs.add(err)
				return
			}
			seq = x.run(cl, txnID, seq, stop)
			cl.Close()
		}
	}()
	return x, done
}

// run drives transactions on cl until stop or until a transaction ends
// in doubt, after which the caller starts a new client (its
// InitProducerID fences the old epoch and aborts what it left open).
func (x *nfTxn) run(cl *kgo.Client, name string, seq int, stop <-chan struct{}) int {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return seq
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		first := seq
		ok := x.produce(ctx, cl, name, &seq)
		commit := ok && n%5 != 4
		err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		cancel()
		switch {
		case err != nil:
			x.doubtful.Add(1)
			x.errs.add(fmt.Errorf("end transaction: %w", err))
			return seq
		case commit:
			for s := first; s < seq; s++ {
				x.h.ack(name, s, -1, -1)
			}
			x.commits.Add(1)
		default:
			x.mu.Lock()
			for s := first; s < seq; s++ {
				x.aborted[string(recordValue(name, s))] = true
			}
			x.mu.Unlock()
			x.aborts.Add(1)
		}
		if !ok {
			return seq
		}
	}
}

// produce writes one transaction's records; false if any failed (the
// transaction is then aborted).
func (x *nfTxn) produce(ctx context.Context, cl *kgo.Client, name string, seq *int) bool {
	if err := cl.BeginTransaction(); err != nil {
		x.errs.add(fmt.Errorf("begin transaction: %w", err))
		return false
	}
	var recs []*kgo.Record
	for range nfTxnSize {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(*seq % 16)), Value: recordValue(name, *seq)})
		*seq++
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		x.errs.add(fmt.Errorf("transactional produce: %w", err))
		cl.AbortBufferedRecords(ctx)
		return false
	}
	return true
}

// readCommitted reads topic at read_committed until ctx ends, noting
// each record (and any record of an acknowledged abort).
func (x *nfTxn) readCommitted(ctx context.Context, t *testing.T, c *nfCluster, topic string, readTo []atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	cl, err := kgo.NewClient(append(nfClientOpts(c), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					x.errs.add(err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				x.see(r)
				if readTo != nil {
					readTo[r.Partition].Store(r.Offset + 1)
				}
			})
		}
	}()
	return done
}

func (x *nfTxn) see(r *kgo.Record) {
	x.h.consume(r.Partition, r.Offset, r.Value)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.aborted[string(r.Value)] {
		x.sawAbort = append(x.sawAbort, fmt.Sprintf("read_committed read %q at %d/%d from an aborted transaction", r.Value, r.Partition, r.Offset))
	}
}

// check reads the whole topic at read_committed and checks it: every
// committed record once and in order, no aborted one, nothing read
// earlier truncated since.
func (x *nfTxn) check(t *testing.T, c *nfCluster, topic string) nfCounts {
	n := nfCounts{acked: x.h.count()}
	log := nfReadCommitted(t, c, topic)
	x.mu.Lock()
	var inLog []string
	for _, r := range log {
		if x.aborted[string(r.value)] {
			inLog = append(inLog, fmt.Sprintf("aborted %q visible at read_committed at %d/%d", r.value, r.partition, r.offset))
		}
	}
	sawAbort := append([]string(nil), x.sawAbort...)
	x.mu.Unlock()
	// Committed records were noted without their offsets (they are not
	// known until the commit): place them where the log has them.
	x.h.mu.Lock()
	where := make(map[string]ackedAt)
	for _, r := range log {
		where[string(r.value)] = ackedAt{r.partition, r.offset}
	}
	for prod, m := range x.h.acked {
		for seq := range m {
			if at, ok := where[string(recordValue(prod, seq))]; ok {
				m[seq] = at
			}
		}
	}
	x.h.mu.Unlock()
	n.addProblems(x.h.check(log))
	n.abortedRead = len(sawAbort) + len(inLog)
	n.note(sawAbort...)
	n.note(inLog...)
	return n
}

// nfReadCommitted reads topic from the start at read_committed until
// nothing new arrives for two seconds.
func nfReadCommitted(t *testing.T, c *nfCluster, topic string) []readRecord {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	var out []readRecord
	deadline := time.Now().Add(60 * time.Second)
	quiet := time.Now()
	for time.Since(quiet) < 2*time.Second && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, readRecord{r.Partition, r.Offset, r.Value})
			quiet = time.Now()
		})
	}
	return out
}
