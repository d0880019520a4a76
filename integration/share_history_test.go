package integration

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareConsumerEnv names the environment variable that makes the test
// binary a share consumer process: seeds|group|topic|random seed.
const shareConsumerEnv = "GREGOR_SHARE_CONSUMER"

// shareConsumerMain is a franz-go share consumer (kgo.ShareGroup) in a
// process of its own, so that the test can SIGKILL it. For every poll it
// prints one line per record delivered ("D offset deliveryCount"), marks
// each record ACCEPT, RELEASE or REJECT at random and prints it
// ("M offset type"), flushes the acknowledgements and prints "C" when
// the broker confirmed them all, "F" when not. It runs until killed.
func shareConsumerMain(spec string) int {
	parts := strings.Split(spec, "|")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "bad consumer spec", spec)
		return 2
	}
	seed, _ := strconv.ParseUint(parts[3], 10, 64)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var mu sync.Mutex
	var ackErr error
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(parts[0], ",")...),
		kgo.ShareGroup(parts[1]), kgo.ConsumeTopics(parts[2]), kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict(),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			if err := rs.Error(); err != nil {
				mu.Lock()
				ackErr = err
				mu.Unlock()
			}
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "share consumer:", err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "S")
	out.Flush()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		for _, r := range recs {
			fmt.Fprintf(out, "D %d %d\n", r.Offset, r.DeliveryCount())
		}
		out.Flush()
		// "Processing": slow enough that kills find records in flight.
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		for _, r := range recs {
			st := kgo.AckAccept
			switch x := rng.IntN(100); {
			case x < 25:
				st = kgo.AckRelease
			case x < 35:
				st = kgo.AckReject
			}
			r.Ack(st)
			fmt.Fprintf(out, "M %d %d\n", r.Offset, st)
		}
		out.Flush()
		mu.Lock()
		ackErr = nil
		mu.Unlock()
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.FlushAcks(ctx)
		cancel()
		mu.Lock()
		if err == nil {
			err = ackErr
		}
		mu.Unlock()
		if err == nil {
			fmt.Fprintln(out, "C")
		} else {
			fmt.Fprintln(out, "F", err)
		}
		out.Flush()
	}
}

// shareEvent is one line of a consumer process, in the order the test
// read them.
type shareEvent struct {
	consumer int
	kind     byte // D delivered, M marked, C confirmed, F not confirmed
	offset   int64
	value    int32 // delivery count (D) or acknowledge type (M)
}

// shareHistory collects the consumers' lines.
type shareHistory struct {
	mu     sync.Mutex
	events []shareEvent
}

// startShareConsumer starts consumer id as a process of the test binary
// and feeds its lines into h.
func startShareConsumer(t *testing.T, h *shareHistory, id int, spec string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), shareConsumerEnv+"="+spec)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			ev := shareEvent{consumer: id, kind: f[0][0]}
			if len(f) >= 3 && (ev.kind == 'D' || ev.kind == 'M') {
				ev.offset, _ = strconv.ParseInt(f[1], 10, 64)
				v, _ := strconv.ParseInt(f[2], 10, 32)
				ev.value = int32(v)
			}
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	})
	return cmd
}

// shareStartOffset asks the group's coordinator for the share partition's
// start offset (DescribeShareGroupOffsets); -1 while it has none.
func shareStartOffset(cl *kgo.Client, group, topic string) (int64, error) {
	node, err := groupCoordinator(cl, group)
	if err != nil {
		return -1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Groups = append(req.Groups, rg)
	r, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return -1, err
	}
	resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(g.ErrorCode)
	}
	if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("describe share group offsets: %+v", g)
	}
	p := g.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(p.ErrorCode)
	}
	return p.StartOffset, nil
}

// TestShareGroupHistoryCluster: a share group on a partition of a
// three-node cluster of gregor processes, read by four franz-go share
// consumers, each a process of its own, that accept, release or reject
// every record at random (delivery limit 3). Consumers are SIGKILLed and
// replaced every few seconds; the partition's leader, then the group's
// coordinator, then the leader again are SIGKILLed and restarted. Once
// the share partition's start offset reaches the end, the consumers'
// history is checked: no record was delivered with a delivery count over
// the limit, or more often than the limit plus the gregor kills (Kafka's
// at-least-once for what was in flight on a leader that died:
// acquisitions are not written), none was delivered
// again after its acceptance or rejection was confirmed, every record was
// delivered, and each one not accepted was rejected or delivered up to
// the limit (the rules under which a share partition archives it).
func TestShareGroupHistoryCluster(t *testing.T) {
	const (
		n      = 1000
		limit  = 3
		group  = "hist"
		topic  = "shist"
		kills  = 3
		budget = 150 * time.Second
	)
	c := cuStartCluster(t, 3, 0,
		fmt.Sprintf("group.share.delivery.count.limit=%d", limit),
		"group.share.record.lock.duration.ms=4000",
		"group.share.session.timeout.ms=6000",
		"group.share.heartbeat.interval.ms=1000",
		"share.coordinator.state.topic.replication.factor=3",
		"offsets.topic.num.partitions=5",
		"share.coordinator.state.topic.num.partitions=5",
	)
	admin := c.client(nil, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(60*time.Second))
	cuCreateTopic(t, admin, topic, 1, 3, nil)
	cuWaitLeaders(t, admin, topic, 1)

	cfg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, rc)
	cfg.Resources = append(cfg.Resources, res)
	if resp, err := cfg.RequestWith(testContext(t, 20*time.Second), admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set share.auto.offset.reset: %v %+v", err, resp)
	}
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for j := i; j < i+10; j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(j))})
		}
		if err := admin.ProduceSync(testContext(t, 60*time.Second), recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	h := &shareHistory{}
	seeds := strings.Join(c.seeds(), ",")
	next := 0
	procs := map[int]*exec.Cmd{}
	start := func() {
		procs[next] = startShareConsumer(t, h, next, fmt.Sprintf("%s|%s|%s|%d", seeds, group, topic, next+1))
		next++
	}
	for range 4 {
		start()
	}
	rng := rand.New(rand.NewPCG(7, 11))
	deadline := time.Now().Add(budget)
	leaderKills := 0
	lastKill := time.Now()
	var startOffset int64 = -1
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
		if so, err := shareStartOffset(admin, group, topic); err == nil {
			startOffset = so
			// Kills still due after the last record is done test that
			// a restart delivers nothing again; the last one gets a few
			// seconds of consumers polling before the history is read.
			if so >= n && leaderKills >= kills && time.Since(lastKill) > 8*time.Second {
				break
			}
		}
		if leaderKills < kills && time.Since(lastKill) > 8*time.Second {
			// The partition's leader, then the group's coordinator (the
			// node clients find; it keeps membership and share state),
			// then the leader again.
			what := "partition leader"
			victim, _, err := cuPartitionLeader(admin, topic)
			if leaderKills == 1 {
				what = "group coordinator"
				victim, err = groupCoordinator(admin, group)
			}
			if err == nil && victim > 0 {
				t.Logf("SIGKILL of the %s, node %d, at start offset %d", what, victim, startOffset)
				c.kill(victim)
				time.Sleep(2 * time.Second)
				c.restart(victim)
				leaderKills++
				lastKill = time.Now()
				continue
			}
		}
		// SIGKILL a consumer and start another.
		ids := make([]int, 0, len(procs))
		for id := range procs {
			ids = append(ids, id)
		}
		victim := ids[rng.IntN(len(ids))]
		procs[victim].Process.Signal(syscall.SIGKILL)
		delete(procs, victim)
		start()
	}
	if startOffset < n {
		t.Fatalf("the share partition's start offset is %d after %v, want %d", startOffset, budget, n)
	}
	if leaderKills < kills {
		t.Errorf("gregor was killed %d times, want %d", leaderKills, kills)
	}
	for _, p := range procs {
		p.Process.Signal(syscall.SIGKILL)
	}
	time.Sleep(200 * time.Millisecond)

	h.mu.Lock()
	events := append([]shareEvent(nil), h.events...)
	h.mu.Unlock()
	checkShareHistory(t, events, n, limit, leaderKills)
}

// groupCoordinator is the node FindCoordinator names for a group.
func groupCoordinator(cl *kgo.Client, group string) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{group}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(fr.Coordinators) != 1 || fr.Coordinators[0].ErrorCode != 0 {
		return -1, fmt.Errorf("find coordinator: %+v", fr.Coordinators)
	}
	return fr.Coordinators[0].NodeID, nil
}

// cuPartitionLeader is the leader of a topic's partition 0 and its epoch.
func cuPartitionLeader(cl *kgo.Client, topic string) (int32, int32, error) {
	p, err := cuPartitionState(cl, topic, 0)
	if err != nil {
		return -1, -1, err
	}
	return p.leader, p.epoch, nil
}

// checkShareHistory checks the consumers' lines against the share-group
// rules (see TestShareGroupHistoryCluster).
func checkShareHistory(t *testing.T, events []shareEvent, n int64, limit int32, leaderKills int) {
	t.Helper()
	type rec struct {
		deliveries []int32 // delivery counts, in order read
		maxCount   int32
		accepted   bool  // an ACCEPT was marked
		rejected   bool  // a REJECT was marked
		doneAt     int32 // delivery count of a confirmed ACCEPT or REJECT, 0 if none
	}
	recs := make([]rec, n)
	// pending are each consumer's marks since its last confirmation, with
	// the delivery count each record had.
	type mark struct {
		offset int64
		typ    int32
		count  int32
	}
	pending := map[int][]mark{}
	lastCount := map[int]map[int64]int32{}
	var violations []string
	fail := func(format string, args ...any) {
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	for _, ev := range events {
		switch ev.kind {
		case 'D':
			if ev.offset < 0 || ev.offset >= n {
				fail("consumer %d: delivered offset %d outside [0, %d)", ev.consumer, ev.offset, n)
				continue
			}
			r := &recs[ev.offset]
			if ev.value < 1 || ev.value > limit {
				fail("offset %d delivered with count %d (limit %d)", ev.offset, ev.value, limit)
			}
			if r.doneAt > 0 && ev.value > r.doneAt {
				fail("offset %d delivered again (count %d) after its acceptance or rejection at count %d was confirmed", ev.offset, ev.value, r.doneAt)
			}
			r.deliveries = append(r.deliveries, ev.value)
			r.maxCount = max(r.maxCount, ev.value)
			if lastCount[ev.consumer] == nil {
				lastCount[ev.consumer] = map[int64]int32{}
			}
			lastCount[ev.consumer][ev.offset] = ev.value
		case 'M':
			if ev.offset < 0 || ev.offset >= n {
				continue
			}
			switch kgo.AckStatus(ev.value) {
			case kgo.AckAccept:
				recs[ev.offset].accepted = true
			case kgo.AckReject:
				recs[ev.offset].rejected = true
			}
			pending[ev.consumer] = append(pending[ev.consumer], mark{ev.offset, ev.value, lastCount[ev.consumer][ev.offset]})
		case 'C':
			for _, m := range pending[ev.consumer] {
				if st := kgo.AckStatus(m.typ); st == kgo.AckAccept || st == kgo.AckReject {
					recs[m.offset].doneAt = m.count
				}
			}
			pending[ev.consumer] = nil
		case 'F':
			pending[ev.consumer] = nil
		}
	}
	delivered := 0
	counts := map[string]int{}
	for off := range recs {
		r := recs[off]
		if len(r.deliveries) == 0 {
			fail("offset %d was never delivered", off)
			continue
		}
		delivered += len(r.deliveries)
		if len(r.deliveries) > int(limit)+leaderKills {
			fail("offset %d delivered %d times %v (limit %d, %d gregor kills)", off, len(r.deliveries), r.deliveries, limit, leaderKills)
		}
		switch {
		case r.accepted:
			counts["accepted"]++
		case r.rejected:
			counts["rejected"]++
		case r.maxCount >= limit:
			counts["archived at the limit"]++
		default:
			fail("offset %d is done but was neither accepted, rejected nor delivered %d times: %v", off, limit, r.deliveries)
		}
	}
	t.Logf("share history: %d records, %d deliveries, %v, %d gregor kills, %d events", n, delivered, counts, leaderKills, len(events))
	for _, v := range violations {
		t.Error(v)
	}
}
