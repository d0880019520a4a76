package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// logCapture records franz-go's log lines so a test can see which group
// protocol the client chose.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (l *logCapture) Log(_ kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprint(msg, kv))
	l.mu.Unlock()
}
func (l *logCapture) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestConsumerGroupKIP848: two franz-go members of a next-gen (KIP-848)
// group split a topic's partitions through ConsumerGroupHeartbeat, read
// everything once, and commit; the committed offsets cover the topic.
func TestConsumerGroupKIP848(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "g848", 6, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("g848"))
	produceAll(t, prod, keyedRecords("g848", 600, "n"))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := make(map[string]int)
	var logs [2]logCapture
	var wg sync.WaitGroup
	for m := 0; m < 2; m++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup("g848-group"), kgo.ConsumeTopics("g848"),
				kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
				kgo.WithLogger(&logs[m]))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollRecords(ctx, 100)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
					if len(seen) == 600 {
						cancel()
					}
					mu.Unlock()
				})
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := cl.CommitUncommittedOffsets(cctx); err != nil {
					t.Logf("commit: %v", err) // STALE_MEMBER_EPOCH may happen during reconciliation
				}
				ccancel()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 600 {
		t.Fatalf("group read %d distinct records, want 600", len(seen))
	}
	if !logs[0].contains("next-gen") && !logs[1].contains("next-gen") {
		t.Fatalf("the client did not use the KIP-848 protocol")
	}
	described, err := ts.admin(t).DescribeConsumerGroups(testContext(t), "g848-group")
	if err != nil {
		t.Fatalf("describe consumer group: %v", err)
	}
	if d := described["g848-group"]; d.Err != nil {
		t.Fatalf("describe consumer group: %v", d.Err)
	}
	offs, err := ts.admin(t).FetchOffsets(testContext(t), "g848-group")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed == 0 {
		t.Fatalf("no offsets committed")
	}
}

// TestConsumerGroupRegexResolution: the broker resolves a KIP-848 regex
// subscription as Kafka's TopicRegexResolver: RE2 matching whole topic
// names (a bare name is that topic alone), internal topics included (the
// classic client's exclude.internal.topics is not the broker's business;
// franz-go's Test848RegexBrokerResolves relies on it), and topics created
// later join the subscription on the next heartbeat.
func TestConsumerGroupRegexResolution(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "rx-orders", 1, nil)
	createTopic(t, adm, "rx-orders-v2", 1, nil)
	c := cghClient{t, ts.client(t)}
	str := func(s string) *string { return &s }

	// Raw Metadata to the broker: the client's cached view could lag.
	topicIDs := func() map[[16]byte]string {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(testContext(t), c.cl.SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[[16]byte]string)
		for _, mt := range resp.Topics {
			out[mt.TopicID] = *mt.Topic
		}
		return out
	}
	assigned := func(r *kmsg.ConsumerGroupHeartbeatResponse) map[string]int {
		t.Helper()
		if r.Assignment == nil {
			t.Fatalf("no assignment in %+v", r)
		}
		ids := topicIDs()
		out := make(map[string]int)
		for _, at := range r.Assignment.Topics {
			out[ids[at.TopicID]] += len(at.Partitions)
		}
		return out
	}

	bare := cghJoin("rx-bare", "m1")
	bare.SubscribedTopicNames, bare.SubscribedTopicRegex = nil, str("rx-orders")
	if got := assigned(c.expect(bare, nil)); len(got) != 1 || got["rx-orders"] != 1 {
		t.Fatalf("bare name regex assigned %v, want rx-orders alone", got)
	}

	// franz-go's wrapping of ConsumeTopics("rx-orders", "__consumer_offsets").
	wrapped := cghJoin("rx-wrapped", "m1")
	wrapped.SubscribedTopicNames = nil
	wrapped.SubscribedTopicRegex = str(".*(?:(?:rx-orders)|(?:__consumer_offsets)).*")
	r := c.expect(wrapped, nil)
	got := assigned(r)
	if got["rx-orders"] != 1 || got["rx-orders-v2"] != 1 || got["__consumer_offsets"] == 0 || len(got) != 3 {
		t.Fatalf("wrapped regex assigned %v, want rx-orders, rx-orders-v2 and __consumer_offsets", got)
	}

	// A topic created later is resolved on the next heartbeat.
	createTopic(t, adm, "rx-orders-v3", 2, nil)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "rx-wrapped", "m1", r.MemberEpoch
	deadline := time.Now().Add(15 * time.Second)
	for {
		next := c.expect(hb, nil)
		hb.MemberEpoch = next.MemberEpoch
		if next.Assignment != nil {
			if got := assigned(next); got["rx-orders-v3"] == 2 && len(got) == 4 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("rx-orders-v3 was never assigned")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consumeValues polls cl until it has n records or the deadline passes,
// and returns their values.
func consumeValues(t *testing.T, cl *kgo.Client, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != n {
		t.Fatalf("consumed %d records (%v), want %d", len(got), got, n)
	}
	return got
}

// TestConsumerGroupEmptyGroupConversion: an empty group changes protocol
// with its committed offsets, both ways, as Kafka does whatever
// group.consumer.migration.policy says (maybeDeleteEmptyClassicGroup,
// maybeDeleteEmptyConsumerGroup): a classic group that commits and leaves
// is taken over by a KIP-848 member, which resumes from the commits; when
// it leaves, a classic member takes the group back and resumes in turn.
func TestConsumerGroupEmptyGroupConversion(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	createTopic(t, ts.admin(t), "conv", 2, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("conv"))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(testContext(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase := func(serverSide bool, from, to int) {
		t.Helper()
		produce(from, to)
		opts := []kgo.Opt{kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup("conv-g"), kgo.ConsumeTopics("conv"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100 * time.Millisecond)}
		if serverSide {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got := consumeValues(t, cl, to-from)
		for _, v := range got {
			var n int
			fmt.Sscan(v, &n)
			if n < from || n >= to {
				t.Fatalf("read %q, want only records %d..%d: the group did not resume from its commits", v, from, to-1)
			}
		}
		// The group is of the kind the member speaks.
		adm := kadm.NewClient(cl)
		if serverSide {
			d, err := adm.DescribeConsumerGroups(testContext(t), "conv-g")
			if err != nil || d["conv-g"].Err != nil || len(d["conv-g"].Members) != 1 {
				t.Fatalf("ConsumerGroupDescribe: %v %+v", err, d["conv-g"])
			}
		} else {
			d, err := adm.DescribeGroups(testContext(t), "conv-g")
			if err != nil || d["conv-g"].ProtocolType != "consumer" || len(d["conv-g"].Members) != 1 {
				t.Fatalf("DescribeGroups: %v %+v", err, d["conv-g"])
			}
		}
		if err := cl.CommitUncommittedOffsets(testContext(t)); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	phase(false, 0, 10) // classic
	phase(true, 10, 15) // the empty classic group becomes a consumer group
	phase(false, 15, 20)
	offs, err := ts.admin(t).FetchOffsets(testContext(t), "conv-g")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 20 {
		t.Fatalf("committed offsets sum to %d, want 20", committed)
	}
}

// ownership tracks which client owns which partition, from the clients'
// assignment callbacks, and counts partitions owned by two clients at once.
type ownership struct {
	mu     sync.Mutex
	owner  map[int32]string
	double []string
}

func (o *ownership) assigned(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps["upg"] {
		if prev, ok := o.owner[p]; ok && prev != who {
			o.double = append(o.double, fmt.Sprintf("partition %d to %s while %s owns it", p, who, prev))
		}
		o.owner[p] = who
	}
}

func (o *ownership) revoked(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps["upg"] {
		if o.owner[p] == who {
			delete(o.owner, p)
		}
	}
}

// owners returns, per client, how many partitions it owns.
func (o *ownership) owners() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int)
	for _, who := range o.owner {
		out[who]++
	}
	return out
}

// migration runs franz-go members of one group over topic "upg", classic
// or KIP-848, and records what they own and read.
type migration struct {
	t    *testing.T
	ts   *testServer
	prod *kgo.Client
	own  *ownership

	mu   sync.Mutex
	seen map[string]bool
}

const migrationPartitions, migrationBatch = 6, 300

func newMigration(t *testing.T) *migration {
	ts := startServer(t, "", func(c *config.Broker) {
		c.GroupInitialRebalanceDelayMs = 0
		// KIP-848 members learn of freed partitions on their next
		// heartbeat: keep the test short.
		c.GroupConsumerHeartbeatIntervalMs = 500
	})
	createTopic(t, ts.admin(t), "upg", migrationPartitions, nil)
	return &migration{t: t, ts: ts, prod: ts.client(t, kgo.DefaultProduceTopic("upg")),
		own: &ownership{owner: make(map[int32]string)}, seen: make(map[string]bool)}
}

// start runs a member that polls and commits until the returned stop,
// which leaves the group.
func (mg *migration) start(name string, serverSide bool) (stop func()) {
	own := mg.own
	opts := []kgo.Opt{kgo.SeedBrokers(mg.ts.addr), kgo.ConsumerGroup("upg-g"), kgo.ConsumeTopics("upg"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			cl.CommitUncommittedOffsets(ctx)
			own.revoked(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.revoked(name, ps) }),
	}
	if serverSide {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		mg.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 100)
			fs.EachRecord(func(r *kgo.Record) {
				mg.mu.Lock()
				mg.seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
				mg.mu.Unlock()
			})
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.CommitUncommittedOffsets(cctx)
			ccancel()
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		cl.Close() // leaves the group
	}
	mg.t.Cleanup(stop)
	return stop
}

func (mg *migration) waitFor(what string, cond func() bool) {
	mg.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			mg.t.Fatalf("timed out waiting for %s (owners %v)", what, mg.own.owners())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// owners waits until the named clients, and only they, own every
// partition, each at least one.
func (mg *migration) owners(what string, names ...string) {
	mg.t.Helper()
	mg.waitFor(what, func() bool {
		o := mg.own.owners()
		total := 0
		for _, n := range names {
			if o[n] == 0 {
				return false
			}
			total += o[n]
		}
		return total == migrationPartitions && len(o) == len(names)
	})
}

// produceAndRead produces a batch and waits until everything produced so
// far has been read.
func (mg *migration) produceAndRead(tag string, batches int) {
	mg.t.Helper()
	produceAll(mg.t, mg.prod, keyedRecords("upg", migrationBatch, tag))
	mg.waitFor("the group to read every record of "+tag, func() bool {
		mg.mu.Lock()
		defer mg.mu.Unlock()
		return len(mg.seen) >= batches*migrationBatch
	})
}

// describe is ConsumerGroupDescribe of the group: its error and the
// member types (0 classic, 1 consumer).
func (mg *migration) describe() ([]int8, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"upg-g"}
	resp, err := req.RequestWith(testContext(mg.t), mg.ts.client(mg.t))
	if err != nil || len(resp.Groups) != 1 {
		mg.t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
	}
	var types []int8
	for _, m := range resp.Groups[0].Members {
		types = append(types, m.MemberType)
	}
	slices.Sort(types)
	return types, kerr.ErrorForCode(resp.Groups[0].ErrorCode)
}

func (mg *migration) noDoubleOwners() {
	mg.own.mu.Lock()
	defer mg.own.mu.Unlock()
	if len(mg.own.double) > 0 {
		mg.t.Fatalf("partitions owned twice: %v", mg.own.double)
	}
}

// TestConsumerGroupOnlineUpgrade: a classic group of two franz-go members
// (default cooperative-sticky balancer) is consuming when a third member
// joins with the KIP-848 protocol. The group becomes a consumer group that
// serves the classic members through JoinGroup/SyncGroup/Heartbeat
// (group.consumer.migration.policy=bidirectional, Kafka's default): the
// partitions are shared among all three, none is owned twice, every record
// is read. When the classic members leave, the KIP-848 member owns
// everything and the group stays a consumer group.
func TestConsumerGroupOnlineUpgrade(t *testing.T) {
	mg := newMigration(t)
	stopA := mg.start("a", false)
	stopB := mg.start("b", false)
	mg.owners("the classic members to share the partitions", "a", "b")
	mg.produceAndRead("classic", 1)

	stopC := mg.start("c", true)
	mg.owners("the KIP-848 member to get partitions from the classic ones", "a", "b", "c")
	if types, err := mg.describe(); err != nil || !slices.Equal(types, []int8{0, 0, 1}) {
		t.Fatalf("the upgraded group: %v, member types %v, want a consumer group of 2 classic and 1 consumer member", err, types)
	}
	mg.produceAndRead("mixed", 2)

	stopA()
	stopB()
	mg.owners("the KIP-848 member to own every partition", "c")
	mg.produceAndRead("consumer", 3)
	if types, err := mg.describe(); err != nil || !slices.Equal(types, []int8{1}) {
		t.Fatalf("after the classic members left: %v, member types %v, want the KIP-848 member alone", err, types)
	}
	stopC()
	mg.noDoubleOwners()
}

// TestConsumerGroupOnlineDowngrade: when the last KIP-848 member of a group
// that also has classic members leaves, the group becomes a classic group
// again and its classic members rebalance and read on.
func TestConsumerGroupOnlineDowngrade(t *testing.T) {
	mg := newMigration(t)
	mg.start("a", false)
	mg.start("b", false)
	mg.owners("the classic members to share the partitions", "a", "b")
	stopC := mg.start("c", true)
	mg.owners("the KIP-848 member to get partitions", "a", "b", "c")
	mg.produceAndRead("mixed", 1)

	stopC()
	mg.owners("the classic members to take the partitions back", "a", "b")
	if _, err := mg.describe(); err != kerr.GroupIDNotFound {
		t.Fatalf("ConsumerGroupDescribe after the downgrade: %v, want GROUP_ID_NOT_FOUND", err)
	}
	d, err := kadm.NewClient(mg.ts.client(t)).DescribeGroups(testContext(t), "upg-g")
	if err != nil || d["upg-g"].State != "Stable" || d["upg-g"].ProtocolType != "consumer" || len(d["upg-g"].Members) != 2 {
		t.Fatalf("DescribeGroups after the downgrade: %v %+v, want a stable classic group of 2", err, d["upg-g"])
	}
	mg.produceAndRead("classic", 2)
	mg.noDoubleOwners()
}
