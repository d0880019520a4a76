package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eosRecords is the input of the exactly-once pipeline: the issue's
// 100,000 records.
const eosRecords = 100_000

// eosPipeline is the read-process-write job of TestTxnExactlyOncePipeline:
// workers in one consumer group, each a franz-go GroupTransactSession that
// copies what it polls from the input topic to the output topic in a
// transaction that also commits the group's offsets.
type eosPipeline struct {
	addr       string
	in, out    string
	group      string
	partitions int32

	commits, aborts, restarts atomic.Int64
	// progress counts the records of committed transactions, duplicates
	// of reprocessing included: the faults are timed by it.
	progress atomic.Int64
	errMu    sync.Mutex
	errs     []error
}

// errList returns the errors noted so far.
func (e *eosPipeline) errList() []error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return append([]error(nil), e.errs...)
}

func (e *eosPipeline) noteErr(err error) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if len(e.errs) < 20 {
		e.errs = append(e.errs, err)
	}
}

func (e *eosPipeline) sessionOpts(txnID string, dial func(context.Context, string, string) (net.Conn, error)) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(e.addr),
		kgo.Dialer(dial),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.ConsumerGroup(e.group),
		kgo.ConsumeTopics(e.in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(3 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.DefaultProduceTopic(e.out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, fastRetries()...)
}

// work runs one worker until ctx ends. A session whose transaction fails
// in a way franz-go calls final is closed and replaced by a new one with
// the same transactional id, as a restarted process would: its
// InitProducerId fences the old one and aborts what it left open.
func (e *eosPipeline) work(ctx context.Context, txnID string, dial func(context.Context, string, string) (net.Conn, error)) {
	for ctx.Err() == nil {
		sess, err := kgo.NewGroupTransactSession(e.sessionOpts(txnID, dial)...)
		if err != nil {
			e.noteErr(fmt.Errorf("%s: new session: %w", txnID, err))
			return
		}
		e.runSession(ctx, txnID, sess)
		sess.Close()
		if ctx.Err() == nil {
			e.restarts.Add(1)
		}
	}
}

// runSession runs transactions until one fails for good or ctx ends.
func (e *eosPipeline) runSession(ctx context.Context, txnID string, sess *kgo.GroupTransactSession) {
	for ctx.Err() == nil {
		if err := sess.Begin(); err != nil {
			e.noteErr(fmt.Errorf("%s: begin: %w", txnID, err))
			return
		}
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pollCtx, 500)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		var failed atomic.Bool
		fs.EachRecord(func(r *kgo.Record) {
			out := &kgo.Record{Partition: r.Partition, Key: r.Key, Value: r.Value}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Store(true)
				}
			})
		})
		end := kgo.TryCommit
		if failed.Load() {
			end = kgo.TryAbort
		}
		committed, err := sess.End(ctx, end)
		if err != nil || failed.Load() {
			// End flushed, so failed is final here.
			if err == nil {
				err = errors.New("a record failed")
			}
			e.noteErr(fmt.Errorf("%s: end: %w", txnID, err))
			e.aborts.Add(1)
			return
		}
		if committed {
			e.commits.Add(1)
			e.progress.Add(int64(len(fs.Records())))
		} else {
			e.aborts.Add(1)
		}
	}
}

// committed sums the group's committed offsets, which move only when a
// transaction commits; ok is false while the broker does not answer.
func (e *eosPipeline) committed(adm *kadm.Client) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, e.group)
	if err != nil || offs.Error() != nil {
		return 0, false
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.in && o.At > 0 {
			sum += o.At
		}
	})
	return sum, true
}

// eosWorker is one running worker: cancel stops it, crash makes it vanish.
type eosWorker struct {
	cancel context.CancelFunc
	dialer *crashDialer
	done   chan struct{}
}

func (e *eosPipeline) start(txnID string) *eosWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &eosWorker{cancel: cancel, dialer: &crashDialer{}, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		e.work(ctx, txnID, w.dialer.dial)
	}()
	return w
}

// TestTxnExactlyOncePipeline: two franz-go GroupTransactSession workers in
// one group copy an input topic of 100,000 records to an output topic in
// transactions that carry the group's offsets. A third of the way through
// gregor is killed with SIGKILL and restarted; at two thirds one worker
// crashes (its connections drop and nothing more it sends arrives, so its
// open transaction and group membership are simply abandoned) and a
// replacement starts with the same transactional id. A read_committed
// reader of the output then sees every input record exactly once.
func TestTxnExactlyOncePipeline(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	args := append([]string{
		"--override", "group.initial.rebalance.delay.ms=0",
		"--override", "group.min.session.timeout.ms=1000",
	}, cleanupEvery...)
	p := startGregor(t, dir, port, args...)
	e := &eosPipeline{addr: p.addr, in: "eos-in", out: "eos-out", group: "eos-group", partitions: 4}
	createTopic(t, p.addr, e.in, e.partitions)
	createTopic(t, p.addr, e.out, e.partitions)

	h := newHistory()
	input := &idempotentRun{name: "in", topic: e.in, partitions: e.partitions, records: eosRecords, h: h}
	input.produce(p.addr)
	if n := input.failed.Load(); n > 0 {
		t.Fatalf("%d input records failed: %v", n, input.firstErr)
	}

	workers := []*eosWorker{e.start("eos-0"), e.start("eos-1")}
	adm := kadm.NewClient(newClient(t, p.addr, fastRetries()...))
	// waitFor waits until n records were processed in committed
	// transactions; with all, until the group's committed offsets cover
	// the whole input.
	waitFor := func(n int64, all bool, what string) int64 {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			if !all {
				if got := e.progress.Load(); got >= n {
					return got
				}
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if got, ok := e.committed(adm); ok && got >= n {
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
		got, _ := e.committed(adm)
		t.Fatalf("%s: %d of %d input records committed (commits %d, aborts %d, restarts %d; errors %v)",
			what, got, n, e.commits.Load(), e.aborts.Load(), e.restarts.Load(), e.errList())
		return 0
	}
	t.Cleanup(func() {
		for _, w := range workers {
			w.cancel()
		}
	})

	start := time.Now()
	atKill := waitFor(eosRecords/3, false, "before the kill")
	p.kill()
	p = startGregor(t, dir, port, args...)
	killedAt := time.Since(start)

	crashed := workers[1]
	atCrash := waitFor(2*eosRecords/3, false, "before the worker crash")
	crashed.dialer.crash()
	crashed.cancel()
	workers[1] = e.start("eos-1")
	crashedAt := time.Since(start)

	waitFor(eosRecords, true, "at the end")
	for _, w := range workers {
		w.cancel()
	}
	for _, w := range workers {
		<-w.done
	}
	t.Logf("SIGKILL at %v (%d records processed), worker crash at %v (%d), done at %v: %d commits, %d aborts, %d session restarts",
		killedAt.Round(time.Millisecond), atKill, crashedAt.Round(time.Millisecond), atCrash, time.Since(start).Round(time.Millisecond),
		e.commits.Load(), e.aborts.Load(), e.restarts.Load())
	if atCrash >= eosRecords {
		t.Fatalf("the crash came after %d records were processed: not during the run", atCrash)
	}
	if errs := e.errList(); len(errs) > 0 {
		t.Logf("errors the workers saw (expected around the faults): %v", errs)
	}

	waitStable(t, p.addr, e.out, 30*time.Second)
	out := readIsolation(t, p.addr, e.out, kgo.ReadCommitted(), eosRecords, time.Second)
	seen := make(map[string]int, eosRecords)
	for _, r := range out {
		seen[string(r.Value)]++
	}
	var problems []string
	for seq := range eosRecords {
		v := string(recordValue("in", seq))
		if n := seen[v]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s read %d times", v, n))
		}
		delete(seen, v)
	}
	for v := range seen {
		problems = append(problems, fmt.Sprintf("%q is not an input record", v))
	}
	if len(problems) > 0 {
		t.Fatalf("output read %d records; %d problems:\n%s", len(out), len(problems), firstProblems(problems, 20))
	}
	if len(out) != eosRecords {
		t.Fatalf("output read %d records, want %d", len(out), eosRecords)
	}
	select {
	case <-crashed.done:
	case <-time.After(30 * time.Second):
		t.Log("the crashed worker's client is still closing")
	}
}
