package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	soakDuration = flag.Duration("soak.duration", 0,
		"run TestSoak for this long (make soak sets it; 0 skips the test)")
	soakSeed = flag.Uint64("soak.seed", 0, "seed of TestSoak's fault schedule (0: from the clock; the test logs it)")
)

// TestSoak: the proxied three-node cluster under every workload at once
// (idempotent producers with a reader, a consumer group, transactions
// with a read_committed reader) for -soak.duration, while a random fault
// strikes every interval: a node isolated, the links into a node cut, a
// node's client link failing, every link of a node slowed by 300 ms, a
// node frozen with SIGSTOP, a node killed with SIGKILL. After each fault
// heals the ISR must fill again. At the end the histories are checked as
// in TestNetFaults, and each node's resident memory, open file
// descriptors and threads (sampled every few seconds; gregor exposes no
// goroutine count, the test process's own goroutines are sampled
// instead) must not grow without bound: the maximum of the last quarter
// of the run may not exceed twice the maximum of the first quarter plus a
// margin.
func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("runs with -soak.duration (make soak)")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	t.Logf("soak for %v, fault schedule seed %d (-soak.seed)", *soakDuration, seed)

	c := nfStart(t)
	cl := c.client()
	const txnTopic = nfTxnTopic
	for _, topic := range []string{nfTopic, nfGroupTopic, txnTopic} {
		cuCreateTopic(t, cl, topic, 3, 3, nil)
	}
	topics := []string{nfTopic, nfGroupTopic, txnTopic}
	cuWait(t, 60*time.Second, "a full ISR", func() error { return c.fullISR(topics...) })

	r := &nfRun{c: c, h: newHistory(), hg: newHistory()}
	hx := newHistory()
	var produceErrs, readErrs, groupErrs, txnErrs errorCounts
	stop := make(chan struct{})
	producers := []*nfProducer{
		startNFProducer(t, c, "p1", nfTopic, 200, r.h, &produceErrs, stop),
		startNFProducer(t, c, "p2", nfTopic, 200, r.h, &produceErrs, stop),
		startNFProducer(t, c, "g1", nfGroupTopic, 150, r.hg, &produceErrs, stop),
	}
	x, txnDone := startNFTxn(t, c, txnTopic, "soak-txn", hx, &txnErrs, stop)
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	readTo := make([]atomic.Int64, 3)
	readerDone := nfReaderTo(rctx, t, c, nfTopic, r.h, &readErrs, readTo)
	g, groupDone := startNFGroup(rctx, t, c, nfGroupName, nfGroupTopic, 2, r.hg, &groupErrs)
	txnReadDone := x.readCommitted(rctx, t, c, txnTopic, nil)

	res := newSoakSampler(c)
	sctx, scancel := context.WithCancel(context.Background())
	samplerDone := res.run(sctx, 5*time.Second)

	faults := soakChaos(t, c, rng, *soakDuration, topics)

	scancel()
	<-samplerDone
	close(stop)
	for _, p := range producers {
		<-p.ended
	}
	<-txnDone
	nfDrain(t, c, g, readTo)
	soakWaitStable(t, c, txnTopic)
	rcancel()
	<-readerDone
	<-groupDone
	<-txnReadDone

	row := nfRow{fault: fmt.Sprintf("soak %v: %s", *soakDuration, faults), cells: []nfCell{
		{"idempotent acks=all produce", nfCheckProduce(t, r)},
		{"consumer group", nfCheckGroup(t, r, g)},
		{"transactions", x.check(t, c, txnTopic)},
	}}
	if div := c.waitConverged(30*time.Second, txnTopic, "__transaction_state"); len(div) > 0 {
		row.cells[2].n.divergent += len(div)
		row.cells[2].n.note(div...)
	}
	for _, cell := range row.cells {
		if cell.n.bad() > 0 {
			t.Errorf("%s: %d violations:\n%s", cell.workload, cell.n.bad(), strings.Join(cell.n.problems, "\n"))
		}
	}
	t.Logf("transactions: %d committed, %d aborted, %d in doubt; errors: produce %s; txn %s; group %s; reader %s",
		x.commits.Load(), x.aborts.Load(), x.doubtful.Load(), produceErrs.String(), txnErrs.String(), groupErrs.String(), readErrs.String())
	if produceErrs.total() > 0 {
		t.Errorf("records failed although producers retry without end: %s", produceErrs.String())
	}
	t.Logf("soak matrix:\n%s", nfMatrix([]nfRow{row}))
	t.Logf("resources (each node; first-quarter max → last-quarter max):\n%s", res.report())
	for _, problem := range res.unbounded() {
		t.Error(problem)
	}
}

// soakChaos strikes a random fault every interval until d has passed,
// healing each and waiting for a full ISR before the next; it returns a
// count of the faults struck.
func soakChaos(t *testing.T, c *nfCluster, rng *rand.Rand, d time.Duration, topics []string) string {
	kinds := []string{"isolate", "cut-into", "client-cut", "slow-links", "sigstop", "sigkill"}
	struck := make(map[string]int)
	end := time.Now().Add(d)
	for time.Until(end) > 15*time.Second {
		time.Sleep(5 * time.Second)
		kind := kinds[rng.IntN(len(kinds))]
		id := int32(1 + rng.IntN(3))
		hold := time.Duration(4+rng.IntN(6)) * time.Second
		t.Logf("%s: %s node %d for %v", time.Now().Format("15:04:05"), kind, id, hold)
		switch kind {
		case "isolate":
			c.isolate(id)
			time.Sleep(hold)
		case "cut-into":
			for _, o := range others(id) {
				c.cutOneWay(o, id)
			}
			time.Sleep(hold)
		case "client-cut":
			link := c.clientLink[id-1]
			link.setBlackhole(false, true)
			time.Sleep(hold / 2)
			link.setCut(true)
			time.Sleep(hold / 2)
		case "slow-links":
			c.slow(id, 300*time.Millisecond)
			time.Sleep(hold)
		case "sigstop":
			c.pause(id)
			time.Sleep(hold)
			c.resume(id)
		case "sigkill":
			c.kill(id)
			time.Sleep(hold)
			c.restart(id)
		}
		c.healAll()
		struck[kind]++
		cuWait(t, 120*time.Second, "a full ISR after "+kind, func() error { return c.fullISR(topics...) })
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", struck[k], k))
	}
	return strings.Join(parts, ", ")
}

// soakWaitStable waits until the transactional topic's last stable
// offset reaches its end on every partition: no transaction left open.
func soakWaitStable(t *testing.T, c *nfCluster, topic string) {
	t.Helper()
	cuWait(t, 90*time.Second, "no open transaction on "+topic, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		ends, err := nfEndOffsets(c, topic)
		if err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
		if err != nil {
			return err
		}
		defer cl.Close()
		stable, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		var short []string
		stable.Each(func(o kadm.ListedOffset) {
			if o.Offset < ends[o.Partition] {
				short = append(short, fmt.Sprintf("%d: stable %d, end %d", o.Partition, o.Offset, ends[o.Partition]))
			}
		})
		if len(short) > 0 {
			return fmt.Errorf("%s", strings.Join(short, "; "))
		}
		return nil
	})
}

// soakSample is one reading of a node's process.
type soakSample struct {
	at                  time.Duration
	rssKB, fds, threads int64
	testGoroutines      int
	node                int32
	pid                 int
	ok                  bool
}

// soakSampler reads /proc for every node's process at intervals.
type soakSampler struct {
	c       *nfCluster
	start   time.Time
	mu      sync.Mutex
	samples []soakSample
}

func newSoakSampler(c *nfCluster) *soakSampler { return &soakSampler{c: c, start: time.Now()} }

func (s *soakSampler) run(ctx context.Context, every time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return done
}

func (s *soakSampler) sample() {
	at := time.Since(s.start)
	g := runtime.NumGoroutine()
	for _, n := range s.c.nodes {
		p := n.proc
		if p == nil || p.cmd.Process == nil {
			continue
		}
		select {
		case <-p.done:
			continue // killed: nothing to read until it restarts
		default:
		}
		smp := soakSample{at: at, node: n.id, pid: p.cmd.Process.Pid, testGoroutines: g}
		smp.rssKB, smp.threads, smp.ok = procStatus(smp.pid)
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", smp.pid)); err == nil {
			smp.fds = int64(len(ents))
		} else {
			smp.ok = false
		}
		if smp.ok {
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
	}
}

// procStatus reads VmRSS (kB) and Threads from /proc/<pid>/status.
func procStatus(pid int) (rssKB, threads int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	var haveRSS, haveThreads bool
	for _, line := range strings.Split(string(b), "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rssKB, haveRSS = n, true
		case "Threads":
			threads, haveThreads = n, true
		}
	}
	return rssKB, threads, haveRSS && haveThreads
}

// soakMetric names one figure of a sample and its growth allowance.
type soakMetric struct {
	name   string
	get    func(soakSample) int64
	factor int64
	margin int64
}

var soakMetrics = []soakMetric{
	{"RSS MiB", func(s soakSample) int64 { return s.rssKB / 1024 }, 2, 64},
	{"fds", func(s soakSample) int64 { return s.fds }, 2, 64},
	{"threads", func(s soakSample) int64 { return s.threads }, 2, 16},
	{"test goroutines", func(s soakSample) int64 { return int64(s.testGoroutines) }, 2, 200},
}

// quarters returns, for node id and metric m, the maximum over the first
// and the last quarter of the run, and the overall maximum.
func (s *soakSampler) quarters(id int32, m soakMetric) (first, last, most int64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var span time.Duration
	for _, smp := range s.samples {
		span = max(span, smp.at)
	}
	for _, smp := range s.samples {
		if smp.node != id {
			continue
		}
		v := m.get(smp)
		n++
		most = max(most, v)
		if smp.at <= span/4 {
			first = max(first, v)
		}
		if smp.at >= span-span/4 {
			last = max(last, v)
		}
	}
	return first, last, most, n
}

func (s *soakSampler) report() string {
	var b strings.Builder
	b.WriteString("| node | samples |")
	for _, m := range soakMetrics {
		fmt.Fprintf(&b, " %s |", m.name)
	}
	b.WriteString("\n|---|---:|")
	for range soakMetrics {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, n := range s.c.nodes {
		_, _, _, count := s.quarters(n.id, soakMetrics[0])
		fmt.Fprintf(&b, "| %d | %d |", n.id, count)
		for _, m := range soakMetrics {
			first, last, most, _ := s.quarters(n.id, m)
			fmt.Fprintf(&b, " %d → %d (max %d) |", first, last, most)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// unbounded lists every figure whose last-quarter maximum exceeds its
// allowance over the first quarter's.
func (s *soakSampler) unbounded() []string {
	var out []string
	for _, n := range s.c.nodes {
		for _, m := range soakMetrics {
			first, last, _, count := s.quarters(n.id, m)
			if count < 8 {
				out = append(out, fmt.Sprintf("node %d: only %d samples of %s", n.id, count, m.name))
				continue
			}
			if last > m.factor*first+m.margin {
				out = append(out, fmt.Sprintf("node %d: %s grew from %d (first quarter's max) to %d (last quarter's), more than %d×+%d",
					n.id, m.name, first, last, m.factor, m.margin))
			}
		}
	}
	return out
}
