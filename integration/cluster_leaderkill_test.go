package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var clusterKills = flag.Int("cluster.kills", 3,
	"leader kills in TestClusterLeaderKill, 10 s apart (raise it for a longer run)")

// leaderKillRun is one leader-kill scenario: producers at a steady rate on
// a replicated topic while the leader of the busiest partition is killed
// with SIGKILL every interval and restarted after down.
type leaderKillRun struct {
	topic      string
	partitions int32
	kills      int
	interval   time.Duration // from one kill to the next
	down       time.Duration // how long a killed leader stays down
	producers  int
	rate       int // records per second per producer
	// preferred moves leadership back to the preferred replicas once a
	// restarted node is in sync again (as auto.leader.rebalance.enable
	// would, later): live leaders step down with produce requests in
	// flight.
	preferred bool
}

// killResult is what one kill did.
type killResult struct {
	node      int32 // the node killed
	partition int32 // the partition whose leader it was
	epoch     int32 // the partition's leader epoch when it was killed
	// controller says the node killed was the active controller too, so
	// the failover waited for a new one.
	controller bool
	failover   time.Duration
	newLeader  int32
	newEpoch   int32
}

// failoverWatch measures one failover: from the SIGKILL of a partition's
// leader to the first acknowledgement of a record on that partition that
// a producer receives after the killed process has exited (so it cannot
// be an answer the dead leader sent).
type failoverWatch struct {
	mu        sync.Mutex
	partition int32
	start     time.Time
	active    bool
	done      chan time.Duration
}

// arm starts a measurement for partition from start; the watch counts no
// ack until activate.
func (w *failoverWatch) arm(partition int32, start time.Time) <-chan time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partition, w.start, w.active = partition, start, false
	w.done = make(chan time.Duration, 1)
	return w.done
}

// activate is called once the killed process has exited.
func (w *failoverWatch) activate() {
	w.mu.Lock()
	w.active = true
	w.mu.Unlock()
}

func (w *failoverWatch) acked(partition int32, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active || partition != w.partition {
		return
	}
	w.active = false
	w.done <- at.Sub(w.start)
}

// errorCounts counts produce and consume errors by message.
type errorCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errorCounts) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[string]int)
	}
	e.m[err.Error()]++
}

func (e *errorCounts) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for msg, n := range e.m {
		parts = append(parts, fmt.Sprintf("%d× %s", n, msg))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func (e *errorCounts) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.m {
		n += c
	}
	return n
}

// run executes the scenario on o and checks the history at the end: every
// acknowledged record read back once at its offset, each producer's
// records in order per partition, and nothing a consumer read during the
// run later truncated. It returns each kill's failover.
func (r leaderKillRun) run(t *testing.T, o *clusterOps) []killResult {
	o.createTopic(t, r.topic, r.partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})

	h := newHistory()
	var watch failoverWatch
	perPartition := make([]atomic.Int64, r.partitions)
	var produceErrs, consumeErrs errorCounts

	// Producers: idempotent (franz-go's default), acks=all, retrying
	// without end as an application riding through failovers would; the
	// short metadata age lets them find a new leader at once.
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	var unflushed atomic.Int64
	for w := 0; w < r.producers; w++ {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			name := fmt.Sprintf("producer-%d", w)
			cl, err := kgo.NewClient(kgo.SeedBrokers(o.seeds()...), kgo.DefaultProduceTopic(r.topic),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30),
				kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
				kgo.MetadataMinAge(100*time.Millisecond))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			const tick = 10 * time.Millisecond
			perTick := max(1, r.rate/int(time.Second/tick))
			tk := time.NewTicker(tick)
			defer tk.Stop()
			seq := 0
			for {
				select {
				case <-stop:
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					if err := cl.Flush(ctx); err != nil {
						unflushed.Add(int64(cl.BufferedProduceRecords()))
						t.Errorf("%s: flush after the run: %v", name, err)
					}
					cancel()
					return
				case <-tk.C:
				}
				for range perTick {
					v := recordValue(name, seq)
					cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(seq % 64)), Value: v}, func(rec *kgo.Record, err error) {
						if err != nil {
							produceErrs.add(err)
							return
						}
						now := time.Now()
						_, s, _ := parseValue(rec.Value)
						h.ack(name, s, rec.Partition, rec.Offset)
						perPartition[rec.Partition].Add(1)
						watch.acked(rec.Partition, now)
					})
					seq++
				}
			}
		}()
	}

	// A consumer reads the topic from the start throughout, at
	// read_uncommitted, noting every record it sees.
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	consumedTo := make([]atomic.Int64, r.partitions)
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(o.seeds()...), kgo.ConsumeTopics(r.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					consumeErrs.add(err)
				}
			})
			fs.EachRecord(func(rec *kgo.Record) {
				h.consume(rec.Partition, rec.Offset, rec.Value)
				consumedTo[rec.Partition].Store(rec.Offset + 1)
			})
		}
	}()

	// On every way out, the producers stop (and flush) before the
	// cluster does.
	stopProducers := sync.OnceFunc(func() {
		close(stop)
		pwg.Wait()
	})
	defer stopProducers()

	// Let the producers get going before the first kill.
	if !waitCond(60*time.Second, func() bool { return h.count() >= 200 }) {
		t.Fatalf("producers got only %d acks in a minute before any kill (errors: %s)", h.count(), produceErrs.String())
	}
	var results []killResult
	last := make([]int64, r.partitions)
	lastKilled := int32(-1)
	begin := time.Now()
	for k := 0; k < r.kills; k++ {
		if d := time.Until(begin.Add(time.Duration(k) * r.interval)); d > 0 {
			time.Sleep(d)
		}
		// Kill only a whole cluster: a leader killed while the last
		// restarted node is still catching up would leave one replica
		// in sync, below min.insync.replicas.
		if !o.waitFullISR(r.topic, 60*time.Second) {
			t.Errorf("kill %d: the ISR is not full a minute after the last restart", k+1)
			break
		}
		// The busiest partitions by acks since the last kill; the
		// busiest whose leader is not the node killed last, so the kills
		// go round the nodes (the active controller among them).
		byLoad := make([]int32, r.partitions)
		window := make([]int64, r.partitions)
		for p := range perPartition {
			n := perPartition[p].Load()
			byLoad[p], window[p], last[p] = int32(p), n-last[p], n
		}
		sort.SliceStable(byLoad, func(i, j int) bool { return window[byLoad[i]] > window[byLoad[j]] })
		busiest, leader, epoch := int32(-1), int32(-1), int32(-1)
		for _, p := range byLoad {
			l, e, err := o.leader(r.topic, p)
			if err != nil || l < 1 {
				t.Errorf("kill %d: leader of partition %d: %d, %v", k+1, p, l, err)
				break
			}
			if busiest < 0 || (leader == lastKilled && l != lastKilled) {
				busiest, leader, epoch = p, l, e
			}
		}
		if busiest < 0 || leader < 1 {
			break
		}
		lastKilled = leader
		ctrl, _ := o.activeController()
		done := watch.arm(busiest, time.Now())
		o.kill(member(leader))
		watch.activate()
		time.Sleep(r.down)
		o.restart(member(leader))
		res := killResult{node: leader, partition: busiest, epoch: epoch, controller: ctrl == leader}
		select {
		case res.failover = <-done:
		case <-time.After(60 * time.Second):
		}
		if res.failover == 0 {
			t.Errorf("kill %d (node %d, leader of partition %d): no ack on the partition within a minute after the restart (errors: %s)",
				k+1, leader, busiest, produceErrs.String())
			break
		}
		res.newLeader, res.newEpoch, _ = o.leader(r.topic, busiest)
		t.Logf("kill %d: node %d (active controller: %v) led partition %d at epoch %d; first ack after %v; leader now %d at epoch %d",
			k+1, res.node, res.controller, res.partition, res.epoch, res.failover.Round(time.Millisecond), res.newLeader, res.newEpoch)
		results = append(results, res)
		if r.preferred {
			r.electPreferred(t, o)
		}
	}

	// Let the last restarted node rejoin and records flow a little more
	// through the whole cluster, then stop and flush the producers.
	if !o.waitFullISR(r.topic, 60*time.Second) {
		t.Errorf("the ISR is not full a minute after the last restart")
	}
	before := h.count()
	if !waitCond(30*time.Second, func() bool { return h.count() > before+100 }) {
		t.Errorf("no records acknowledged after the last restart (errors: %s)", produceErrs.String())
	}
	stopProducers()

	// The consumer must have read up to the end of every partition.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ends, err := o.adm.ListEndOffsets(ctx, r.topic)
	cancel()
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	caughtUp := waitCond(60*time.Second, func() bool {
		ok := true
		ends.Each(func(lo kadm.ListedOffset) {
			if consumedTo[lo.Partition].Load() < lo.Offset {
				ok = false
			}
		})
		return ok
	})
	ccancel()
	cwg.Wait()
	if !caughtUp {
		t.Errorf("the consumer did not reach the end offsets within a minute")
	}

	var log []readRecord
	for part, recs := range readAllFrom(t, o.seeds(), r.topic) {
		for _, rec := range recs {
			log = append(log, readRecord{part, rec.Offset, rec.Value})
		}
	}
	if problems := h.check(log); len(problems) > 0 {
		n := len(problems)
		if n > 20 {
			problems = problems[:20]
		}
		t.Errorf("history check failed (%d problems):\n%s", n, strings.Join(problems, "\n"))
	}
	// Producers retry without end: every record they sent was
	// acknowledged in the end, none failed.
	if n := produceErrs.total(); n > 0 || unflushed.Load() > 0 {
		t.Errorf("%d records failed, %d never flushed: %s", n, unflushed.Load(), produceErrs.String())
	}
	t.Logf("%d records acknowledged, %d in the log, %d offsets consumed during the run; consumer errors: %s",
		h.count(), len(log), len(h.consumed), consumeErrs.String())
	return results
}

// electPreferred waits for the ISR to fill and moves every partition's
// leadership to its preferred replica, with the producers running.
func (r leaderKillRun) electPreferred(t *testing.T, o *clusterOps) {
	if !o.waitFullISR(r.topic, 60*time.Second) {
		t.Errorf("the ISR is not full a minute after a restart")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var set kadm.TopicsSet
	for p := range r.partitions {
		set.Add(r.topic, p)
	}
	res, err := o.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Errorf("preferred election: %v", err)
		return
	}
	var moved []int32
	for p, pr := range res[r.topic] {
		switch {
		case pr.Err == nil:
			moved = append(moved, p)
		case !errors.Is(pr.Err, kerr.ElectionNotNeeded):
			t.Errorf("preferred election of partition %d: %v", p, pr.Err)
		}
	}
	sort.Slice(moved, func(i, j int) bool { return moved[i] < moved[j] })
	t.Logf("preferred election moved the leaders of partitions %v", moved)
}

// TestClusterLeaderKill: a three-node cluster, a topic with replication
// factor 3, min.insync.replicas 2 and three partitions, three idempotent
// acks=all producers at a steady rate and a consumer reading all along.
// Every 10 s the leader of the busiest partition is killed with SIGKILL
// and restarted 5 s later (-cluster.kills times, 3 by default); once it is
// back in the ISR a preferred-leader election hands it its leadership
// back, deposing a live leader with produces in flight. The history must
// hold: no acknowledged record lost, none duplicated, each producer's
// records in order, nothing consumed later truncated, no record failed.
// Each kill's failover (SIGKILL to the next ack on that partition) is
// logged.
func TestClusterLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	o := newClusterOps(t, newCluster(t))
	res := leaderKillRun{
		topic: "leader-kill", partitions: 3, kills: *clusterKills,
		interval: 10 * time.Second, down: 5 * time.Second,
		producers: 3, rate: 300, preferred: true,
	}.run(t, o)
	if len(res) != *clusterKills {
		t.Fatalf("%d of %d kills completed", len(res), *clusterKills)
	}
	var ds []time.Duration
	for _, r := range res {
		if r.newEpoch <= r.epoch {
			t.Errorf("partition %d: leader epoch %d after killing its leader at epoch %d", r.partition, r.newEpoch, r.epoch)
		}
		ds = append(ds, r.failover)
	}
	med, most := durationStats(ds)
	t.Logf("failover over %d kills: median %v, max %v", len(ds), med.Round(time.Millisecond), most.Round(time.Millisecond))
}
