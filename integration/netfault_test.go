package integration

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

var nfAll = flag.Bool("netfault.all", false,
	"run every fault of TestNetFaults (also the isolated controller, client cuts and SIGKILL) and log the whole fault matrix")

const (
	nfTopic      = "nf-produce"
	nfGroupTopic = "nf-group"
	nfGroupName  = "nf-g"
	nfTxnTopic   = "nf-txn"
	nfHold       = 10 * time.Second // how long a fault lasts: beyond every timeout the cluster runs on
)

// nfFault is one row of the fault matrix.
type nfFault struct {
	name   string
	always bool // run by make test; the others need -netfault.all
	inject func(t *testing.T, r *nfRun)
}

var nfFaults = []nfFault{
	{"leader isolated", true, nfLeaderIsolated},
	{"controller isolated", false, nfControllerIsolated},
	{"asymmetric cut", true, nfAsymmetric},
	{"client cut", false, nfClientCut},
	{"SIGSTOP pause", true, nfPause},
	{"SIGKILL", false, nfKill},
}

// nfRun is one fault's run: the cluster, the histories and what the
// fault's own checks found.
type nfRun struct {
	c        *nfCluster
	topicID  [16]byte
	h, hg    *history // the produce workload's, the group workload's
	probeSeq int
	probed   int // acks=all probes a cut-off or thawed node acknowledged
}

// TestNetFaults runs each fault of the matrix against a fresh three-node
// cluster carrying two workloads at once: idempotent acks=all producers
// with a reader at the high watermark (produce), and a producer feeding a
// consumer group that commits synchronously (group). After the fault
// heals and the ISR is full again, the producers stop and flush, and the
// checks run: every acknowledged record read back once at its offset and
// in order, no record a consumer read later truncated, no record
// delivered to the group below an acknowledged commit, every
// acknowledged group record delivered, and every replica of every
// partition (the group's offsets too) byte for byte alike. The matrix is
// logged at the end; every cell must be zero.
//
// Leader isolated, asymmetric cut and SIGSTOP run always; -netfault.all
// adds the isolated controller, client cuts and SIGKILL.
func TestNetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	var rows []nfRow
	for _, f := range nfFaults {
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			if !f.always && !*nfAll {
				t.Skip("runs with -netfault.all")
			}
			row := nfRunFault(t, f)
			rows = append(rows, row)
			t.Logf("\n%s", nfMatrix([]nfRow{row}))
		})
	}
	if len(rows) > 0 {
		t.Logf("fault matrix:\n%s", nfMatrix(rows))
	}
}

// nfRow is a fault's cells, one per workload.
type nfRow struct {
	fault string
	cells []nfCell
}

type nfCell struct {
	workload string
	n        nfCounts
}

// nfMatrix renders rows as a Markdown table.
func nfMatrix(rows []nfRow) string {
	var b strings.Builder
	b.WriteString("| fault | workload | acknowledged | lost | duplicated | reordered | read, then truncated | aborted read | divergent |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, c := range r.cells {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d |\n", r.fault, c.workload,
				c.n.acked, c.n.lost, c.n.duplicated, c.n.reordered, c.n.truncatedRead, c.n.abortedRead, c.n.divergent)
		}
	}
	return b.String()
}

// nfRunFault starts the cluster and the workloads, injects the fault,
// heals it, and checks the outcome.
func nfRunFault(t *testing.T, f nfFault) nfRow {
	start := time.Now()
	c := nfStart(t)
	cl := c.client()
	cuCreateTopic(t, cl, nfTopic, 3, 3, nil)
	cuCreateTopic(t, cl, nfGroupTopic, 3, 3, nil)
	topics := []string{nfTopic, nfGroupTopic}
	if *nfAll { // the transactions column of the full matrix
		cuCreateTopic(t, cl, nfTxnTopic, 3, 3, nil)
		topics = append(topics, nfTxnTopic)
	}
	cuWait(t, 60*time.Second, "a full ISR before the fault", func() error { return c.fullISR(topics...) })
	r := &nfRun{c: c, h: newHistory(), hg: newHistory()}
	ctx, cancel := cuCtx()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, nfTopic)
	cancel()
	if err != nil || tds[nfTopic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", nfTopic, err, tds[nfTopic].Err)
	}
	r.topicID = tds[nfTopic].ID

	var produceErrs, readErrs, groupErrs, txnErrs errorCounts
	stop := make(chan struct{})
	producers := []*nfProducer{
		startNFProducer(t, c, "p1", nfTopic, 200, r.h, &produceErrs, stop),
		startNFProducer(t, c, "p2", nfTopic, 200, r.h, &produceErrs, stop),
		startNFProducer(t, c, "g1", nfGroupTopic, 150, r.hg, &produceErrs, stop),
	}
	stopProducers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		for _, p := range producers {
			<-p.ended
		}
	}
	defer stopProducers()
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	readTo := make([]atomic.Int64, 3)
	readerDone := nfReaderTo(rctx, t, c, nfTopic, r.h, &readErrs, readTo)
	g, groupDone := startNFGroup(rctx, t, c, nfGroupName, nfGroupTopic, 2, r.hg, &groupErrs)
	var x *nfTxn
	closed := make(chan struct{})
	close(closed)
	var txnDone, txnReadDone <-chan struct{} = closed, closed
	if *nfAll {
		x, txnDone = startNFTxn(t, c, nfTxnTopic, "nf-txn", newHistory(), &txnErrs, stop)
		txnReadDone = x.readCommitted(rctx, t, c, nfTxnTopic, nil)
	}
	cuWait(t, 60*time.Second, "the workloads under way", func() error {
		if r.h.count() < 300 || g.commits.Load() < 3 {
			return fmt.Errorf("%d acks, %d commits (errors: %s %s)", r.h.count(), g.commits.Load(), produceErrs.String(), groupErrs.String())
		}
		if x != nil && x.commits.Load() < 3 {
			// The fault must strike transactions in flight, not a
			// producer still looking for its coordinator.
			return fmt.Errorf("%d transactions committed (errors: %s)", x.commits.Load(), txnErrs.String())
		}
		return nil
	})

	c.checkRouted(t)
	f.inject(t, r)
	c.healAll()
	cuWait(t, 90*time.Second, "a full ISR after the fault healed", func() error { return c.fullISR(topics...) })
	before, commits := r.h.count(), g.commits.Load()
	var txns int64
	if x != nil {
		txns = x.commits.Load()
	}
	cuWait(t, 60*time.Second, "progress after the fault healed", func() error {
		if r.h.count() < before+200 || g.commits.Load() < commits+3 {
			return fmt.Errorf("%d acks (%d before), %d commits (%d before); errors: %s; group: %s",
				r.h.count(), before, g.commits.Load(), commits, produceErrs.String(), groupErrs.String())
		}
		if x != nil && x.commits.Load() <= txns {
			return fmt.Errorf("no transaction committed since the fault healed (%d in all); errors: %s", txns, txnErrs.String())
		}
		return nil
	})
	stopProducers()
	<-txnDone
	nfDrain(t, c, g, readTo)
	if x != nil {
		soakWaitStable(t, c, nfTxnTopic)
	}
	rcancel()
	<-readerDone
	<-groupDone
	<-txnReadDone
	if produceErrs.total() > 0 {
		t.Errorf("records failed although producers retry without end: %s", produceErrs.String())
	}
	t.Logf("%s: %d probes acknowledged by a cut-off or thawed node; reader errors: %s; group errors: %s; transaction errors: %s",
		f.name, r.probed, readErrs.String(), groupErrs.String(), txnErrs.String())
	row := nfRow{fault: f.name, cells: []nfCell{
		{"idempotent acks=all produce", nfCheckProduce(t, r)},
		{"consumer group", nfCheckGroup(t, r, g)},
	}}
	if x != nil {
		n := x.check(t, c, nfTxnTopic)
		div := c.waitConverged(30*time.Second, nfTxnTopic, "__transaction_state")
		n.divergent = len(div)
		n.note(div...)
		row.cells = append(row.cells, nfCell{fmt.Sprintf("transactions (%d committed, %d aborted, %d in doubt)",
			x.commits.Load(), x.aborts.Load(), x.doubtful.Load()), n})
	}
	for _, cell := range row.cells {
		if cell.n.bad() > 0 {
			t.Errorf("%s, %s: %d violations:\n%s", f.name, cell.workload, cell.n.bad(), strings.Join(cell.n.problems, "\n"))
		}
	}
	t.Logf("%s: %v from cluster start to the end of the checks", f.name, time.Since(start).Round(time.Second))
	return row
}

// nfDrain waits for the reader to reach the produce topic's end and the
// group to commit up to the group topic's end.
func nfDrain(t *testing.T, c *nfCluster, g *nfGroup, readTo []atomic.Int64) {
	t.Helper()
	cuWait(t, 60*time.Second, "the reader at the end of "+nfTopic, func() error {
		ends, err := nfEndOffsets(c, nfTopic)
		if err != nil {
			return err
		}
		for p, end := range ends {
			if got := readTo[p].Load(); got < end {
				return fmt.Errorf("partition %d read to %d of %d", p, got, end)
			}
		}
		return nil
	})
	cuWait(t, 60*time.Second, "the group's commits at the end of "+nfGroupTopic, func() error {
		ends, err := nfEndOffsets(c, nfGroupTopic)
		if err != nil {
			return err
		}
		if !g.caughtUp(ends) {
			return fmt.Errorf("ends %v, committed %v", ends, g.committedCopy())
		}
		return nil
	})
}

func nfCheckProduce(t *testing.T, r *nfRun) nfCounts {
	n := nfCounts{acked: r.h.count()}
	n.addProblems(r.h.check(nfLog(t, r.c, nfTopic)))
	div := r.c.waitConverged(30*time.Second, nfTopic)
	n.divergent = len(div)
	n.note(div...)
	return n
}

func nfCheckGroup(t *testing.T, r *nfRun, g *nfGroup) nfCounts {
	n := nfCounts{acked: r.hg.count()}
	n.addProblems(r.hg.check(nfLog(t, r.c, nfGroupTopic)))
	missing := g.undelivered()
	n.lost += len(missing)
	n.note(missing...)
	g.mu.Lock()
	n.duplicated += len(g.redelivery)
	n.note(g.redelivery...)
	if len(g.fencedReads) > 0 {
		t.Logf("%d records below an acknowledged commit read by members whose commit was then refused (fenced, not counted):\n%s",
			len(g.fencedReads), strings.Join(g.fencedReads, "\n"))
	}
	g.mu.Unlock()
	div := r.c.waitConverged(30*time.Second, nfGroupTopic, "__consumer_offsets")
	n.divergent = len(div)
	n.note(div...)
	return n
}

// probe sends n acks=all probes of partition p straight to node id; an
// acknowledged one goes into the history, so it must be in the final log.
func (r *nfRun) probe(t *testing.T, id int32, p int32, n int) []error {
	var errs []error
	for range n {
		seq := r.probeSeq
		r.probeSeq++
		off, err := r.c.probeProduce(t, id, nfTopic, r.topicID, p, string(recordValue("probe", seq)))
		if err == nil {
			r.h.ack("probe", seq, p, off)
			r.probed++
		}
		errs = append(errs, err)
	}
	return errs
}

// victim picks a partition of the produce topic whose leader is not the
// active controller (so the leader faults stay apart from the controller
// fault) and returns it with its leader and leader epoch.
func (r *nfRun) victim(t *testing.T) (p, leader, epoch, ctrl int32) {
	t.Helper()
	cuWait(t, 30*time.Second, "the active controller", func() error {
		var err error
		ctrl, err = r.c.activeController()
		return err
	})
	for p = range int32(3) {
		leader, epoch = r.c.leader(nfTopic, p)
		if leader > 0 && leader != ctrl {
			return p, leader, epoch, ctrl
		}
	}
	t.Fatalf("every partition of %s is led by the controller %d", nfTopic, ctrl)
	return
}

func others(id int32) []int32 {
	var out []int32
	for _, x := range []int32{1, 2, 3} {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// nfWaitNewLeader waits until the nodes in ids agree that p has a leader
// among them in an epoch after epoch.
func nfWaitNewLeader(t *testing.T, c *nfCluster, p, epoch int32, ids []int32) (int32, int32) {
	t.Helper()
	var l, e int32
	cuWait(t, 30*time.Second, fmt.Sprintf("a new leader of %s-%d among %v", nfTopic, p, ids), func() error {
		l, e = c.leader(nfTopic, p, ids...)
		if !containsID(ids, l) || e <= epoch {
			return fmt.Errorf("leader %d in epoch %d", l, e)
		}
		return nil
	})
	return l, e
}
