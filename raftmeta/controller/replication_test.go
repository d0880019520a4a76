package controller

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const testSession = 9 * time.Second

// livenessController starts a single node whose controller fences brokers
// after testSession without heartbeats, on a fake clock, and registers
// and unfences brokers 1 to n.
func livenessController(t *testing.T, brokers int32, mods ...func(*Config)) (*testNode, *Controller, *fakeClock, map[int32]int64) {
	t.Helper()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	n := startNode(t, t.TempDir(), func(c *nodeConfig) {
		c.Controller = Config{
			BrokerSessionTimeout:               testSession,
			AutoLeaderRebalance:                true,
			LeaderImbalanceCheckInterval:       300 * time.Second,
			LeaderImbalancePerBrokerPercentage: 10,
			Now:                                clk.Now,
		}
		for _, m := range mods {
			m(&c.Controller)
		}
	})
	c := n.Controller()
	epochs := map[int32]int64{}
	for id := int32(1); id <= brokers; id++ {
		epoch, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: id, IncarnationID: [16]byte{15: byte(id)}})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := n.Image().Broker(id); !b.Fenced {
			t.Fatalf("broker %d registered unfenced with heartbeats on", id)
		}
		epochs[id] = epoch
		heartbeat(t, n, id, epoch)
		if b, _ := n.Image().Broker(id); b.Fenced {
			t.Fatalf("broker %d still fenced after a caught-up heartbeat", id)
		}
	}
	return n, c, clk, epochs
}

func heartbeat(t *testing.T, n *testNode, id int32, epoch int64) BrokerHeartbeatResult {
	t.Helper()
	res, err := n.Controller().BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: id, BrokerEpoch: epoch, CurrentMetadataOffset: int64(n.Image().Offset())})
	if err != nil {
		t.Fatalf("heartbeat of broker %d: %v", id, err)
	}
	return res
}

func createAssigned(t *testing.T, c *Controller, name string, assign map[int32][]int32, configs map[string]string) [16]byte {
	t.Helper()
	res := c.CreateTopics(ctxT(t), []CreateTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1, Assignments: assign, Configs: configs}}, false)
	if res[0].Err != nil {
		t.Fatalf("create %s: %v", name, res[0].Err)
	}
	return res[0].ID
}

func part(t *testing.T, n *testNode, topic string, p int32) image.PartitionImage {
	t.Helper()
	tp, ok := n.Image().Topic(topic)
	if !ok || int(p) >= len(tp.Partitions) {
		t.Fatalf("no partition %s-%d", topic, p)
	}
	return tp.Partitions[p]
}

func runPeriodic(t *testing.T, c *Controller) {
	t.Helper()
	if err := c.do(ctxT(t), c.periodic); err != nil {
		t.Fatal(err)
	}
}

func TestAlterPartition(t *testing.T) {
	n, c, _, epochs := livenessController(t, 3)
	id := createAssigned(t, c, "t", map[int32][]int32{0: {1, 2, 3}}, nil)
	steps := []struct {
		name                string
		topic               [16]byte
		partition           int32
		leaderEpoch, pEpoch int32
		isr                 []int32
		want                *kerr.Error
		wantISR             []int32
		wantPartitionEpoch  int32
	}{
		{"unknown topic", [16]byte{1}, 0, 0, 0, []int32{1}, kerr.UnknownTopicID, nil, 0},
		{"unknown partition", id, 3, 0, 0, []int32{1}, kerr.UnknownTopicOrPartition, nil, 0},
		{"newer leader epoch", id, 0, 1, 0, []int32{1}, kerr.NotController, nil, 0},
		{"newer partition epoch", id, 0, 0, 1, []int32{1}, kerr.NotController, nil, 0},
		{"shrink", id, 0, 0, 0, []int32{1, 2}, nil, []int32{1, 2}, 1},
		{"stale partition epoch", id, 0, 0, 0, []int32{1}, kerr.InvalidUpdateVersion, nil, 0},
		{"not a replica", id, 0, 0, 1, []int32{1, 9}, kerr.InvalidRequest, nil, 0},
		{"without the leader", id, 0, 0, 1, []int32{2, 3}, kerr.InvalidRequest, nil, 0},
		{"duplicate", id, 0, 0, 1, []int32{1, 1}, kerr.InvalidRequest, nil, 0},
		{"empty", id, 0, 0, 1, []int32{}, kerr.InvalidRequest, nil, 0},
		{"no change", id, 0, 0, 1, []int32{1, 2}, nil, []int32{1, 2}, 1},
		{"expand", id, 0, 0, 1, []int32{1, 2, 3}, nil, []int32{1, 2, 3}, 2},
	}
	for _, s := range steps {
		p, err := c.AlterPartition(ctxT(t), s.topic, s.partition, s.leaderEpoch, s.pEpoch, isrOf(s.isr...))
		if s.want != nil {
			if !errors.Is(err, s.want) {
				t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !slices.Equal(p.ISR, s.wantISR) || p.PartitionEpoch != s.wantPartitionEpoch || p.Leader != 1 {
			t.Fatalf("%s: got %+v", s.name, p)
		}
		if got := part(t, n, "t", 0); !slices.Equal(got.ISR, s.wantISR) || got.PartitionEpoch != s.wantPartitionEpoch {
			t.Fatalf("%s: image has %+v", s.name, got)
		}
	}

	// A fenced broker may not join the ISR.
	if _, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 3, BrokerEpoch: epochs[3], CurrentMetadataOffset: int64(n.Image().Offset()), WantFence: true}); err != nil {
		t.Fatal(err)
	}
	p := part(t, n, "t", 0)
	if !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("ISR after fencing 3: %v", p.ISR)
	}
	if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch, isrOf(1, 2, 3)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("fenced replica in ISR: %v", err)
	}
	// A leader change fences the old leader's epoch.
	if _, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epochs[1], WantFence: true}); err != nil {
		t.Fatal(err)
	}
	if q := part(t, n, "t", 0); q.Leader != 2 || q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("after fencing the leader: %+v", q)
	}
	if _, err := c.AlterPartition(ctxT(t), id, 0, p.LeaderEpoch, p.PartitionEpoch+1, isrOf(1, 2)); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("old leader epoch: %v", err)
	}
}

func TestFencingElectsFromISR(t *testing.T) {
	n, c, clk, epochs := livenessController(t, 3)
	createAssigned(t, c, "led", map[int32][]int32{0: {3, 1, 2}}, nil)
	createAssigned(t, c, "solo", map[int32][]int32{0: {3}}, nil)
	uid := createAssigned(t, c, "unclean", map[int32][]int32{0: {3, 1}}, map[string]string{"unclean.leader.election.enable": "true"})
	up := part(t, n, "unclean", 0)
	if _, err := c.AlterPartition(ctxT(t), uid, 0, up.LeaderEpoch, up.PartitionEpoch, isrOf(3)); err != nil {
		t.Fatal(err)
	}
	before := map[string]image.PartitionImage{}
	for _, name := range []string{"led", "solo", "unclean"} {
		before[name] = part(t, n, name, 0)
	}

	// Brokers 1 and 2 keep their sessions; 3 goes silent.
	clk.Advance(testSession / 2)
	heartbeat(t, n, 1, epochs[1])
	heartbeat(t, n, 2, epochs[2])
	runPeriodic(t, c)
	if b, _ := n.Image().Broker(3); b.Fenced {
		t.Fatal("broker 3 fenced before its session expired")
	}
	clk.Advance(testSession/2 + time.Second)
	heartbeat(t, n, 1, epochs[1])
	heartbeat(t, n, 2, epochs[2])
	runPeriodic(t, c)
	if b, _ := n.Image().Broker(3); !b.Fenced {
		t.Fatal("broker 3 not fenced after its session expired")
	}
	for _, b := range []int32{1, 2} {
		if bi, _ := n.Image().Broker(b); bi.Fenced {
			t.Fatalf("broker %d fenced", b)
		}
	}
	cases := []struct {
		topic  string
		leader int32
		isr    []int32
	}{
		{"led", 1, []int32{1, 2}},            // next replica in the ISR
		{"solo", image.NoLeader, []int32{3}}, // no one else: leaderless, ISR kept
		{"unclean", 1, []int32{1}},           // outside the ISR, as the topic allows
	}
	for _, tc := range cases {
		p := part(t, n, tc.topic, 0)
		if p.Leader != tc.leader || !slices.Equal(p.ISR, tc.isr) || p.LeaderEpoch != before[tc.topic].LeaderEpoch+1 {
			t.Fatalf("%s after fencing: %+v (before %+v)", tc.topic, p, before[tc.topic])
		}
	}

	// Broker 3 heartbeats again: it is unfenced and leads its leaderless
	// partition again; the others keep their leaders.
	res := heartbeat(t, n, 3, epochs[3])
	if res.IsFenced || !res.IsCaughtUp {
		t.Fatalf("heartbeat answer %+v", res)
	}
	if p := part(t, n, "solo", 0); p.Leader != 3 || p.LeaderEpoch != before["solo"].LeaderEpoch+2 {
		t.Fatalf("solo after unfencing: %+v", p)
	}
	if p := part(t, n, "led", 0); p.Leader != 1 {
		t.Fatalf("led after unfencing: %+v", p)
	}

	// Once the leader adds 3 back to the ISR, the rebalance check moves
	// leadership back to it, the preferred replica.
	lp := part(t, n, "led", 0)
	lid, _ := n.Image().Topic("led")
	if _, err := c.AlterPartition(ctxT(t), lid.ID, 0, lp.LeaderEpoch, lp.PartitionEpoch, isrOf(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(300 * time.Second)
	for _, b := range []int32{1, 2, 3} {
		heartbeat(t, n, b, epochs[b])
	}
	runPeriodic(t, c)
	if p := part(t, n, "led", 0); p.Leader != 3 || p.LeaderEpoch != lp.LeaderEpoch+1 {
		t.Fatalf("led after rebalance: %+v", p)
	}
	if p := part(t, n, "unclean", 0); p.Leader != 1 {
		t.Fatalf("unclean moved to a replica outside its ISR: %+v", p)
	}
}

func TestElectLeaders(t *testing.T) {
	n, c, _, epochs := livenessController(t, 3)
	createAssigned(t, c, "a", map[int32][]int32{0: {1, 2}, 1: {2, 1}}, nil)
	bid := createAssigned(t, c, "b", map[int32][]int32{0: {3, 1}}, nil)
	// Fence 1: a-0 moves to 2.
	if _, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epochs[1], WantFence: true}); err != nil {
		t.Fatal(err)
	}
	// Shrink b-0 to its leader, then fence it: b-0 is leaderless.
	bp := part(t, n, "b", 0)
	if _, err := c.AlterPartition(ctxT(t), bid, 0, bp.LeaderEpoch, bp.PartitionEpoch, isrOf(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 3, BrokerEpoch: epochs[3], WantFence: true}); err != nil {
		t.Fatal(err)
	}
	if p := part(t, n, "b", 0); p.Leader != image.NoLeader {
		t.Fatalf("b-0: %+v", p)
	}
	code := func(err error) int16 { return ErrorCode(err) }
	steps := []struct {
		name   string
		before func()
		typ    ElectionType
		topics []TopicPartitions
		want   map[string]map[int32]int16
	}{
		{"preferred", nil, ElectPreferred, []TopicPartitions{{"a", []int32{0, 1, 5}}, {"zz", []int32{0}}},
			map[string]map[int32]int16{
				"a":  {0: kerr.PreferredLeaderNotAvailable.Code, 1: kerr.ElectionNotNeeded.Code, 5: kerr.UnknownTopicOrPartition.Code},
				"zz": {0: kerr.UnknownTopicOrPartition.Code},
			}},
		{"unclean with a leader", nil, ElectUnclean, []TopicPartitions{{"a", []int32{0}}},
			map[string]map[int32]int16{"a": {0: kerr.ElectionNotNeeded.Code}}},
		{"all preferred", nil, ElectPreferred, nil,
			// Partitions that need no election are left out.
			map[string]map[int32]int16{"a": {0: kerr.PreferredLeaderNotAvailable.Code}, "b": {0: kerr.PreferredLeaderNotAvailable.Code}}},
		{"unclean, no replica active", nil, ElectUnclean, []TopicPartitions{{"b", []int32{0}}},
			map[string]map[int32]int16{"b": {0: kerr.EligibleLeadersNotAvailable.Code}}},
		// Broker 1 comes back, out of b-0's ISR: only an unclean election
		// gives b-0 a leader.
		{"unclean", func() { heartbeat(t, n, 1, epochs[1]) }, ElectUnclean, []TopicPartitions{{"b", []int32{0}}},
			map[string]map[int32]int16{"b": {0: 0}}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		res, err := c.ElectLeaders(ctxT(t), s.typ, s.topics)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := map[string]map[int32]int16{}
		for _, tr := range res {
			got[tr.Topic] = map[int32]int16{}
			for _, p := range tr.Partitions {
				got[tr.Topic][p.Partition] = code(p.Err)
			}
		}
		for topic, ps := range s.want {
			for p, want := range ps {
				if g, ok := got[topic][p]; !ok || g != want {
					t.Fatalf("%s: %s-%d got %d (%v), want %d", s.name, topic, p, g, ok, want)
				}
			}
			if len(got[topic]) != len(ps) {
				t.Fatalf("%s: %s got %v, want %v", s.name, topic, got[topic], ps)
			}
		}
	}
	if p := part(t, n, "b", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("b-0 after unclean election: %+v", p)
	}
	if _, err := c.ElectLeaders(ctxT(t), 7, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("bad election type: %v", err)
	}
}

func TestBrokerHeartbeat(t *testing.T) {
	n, c, _, epochs := livenessController(t, 2)
	createAssigned(t, c, "t", map[int32][]int32{0: {1, 2}, 1: {2, 1}}, nil)
	errCases := []struct {
		hb   BrokerHeartbeat
		want *kerr.Error
	}{
		{BrokerHeartbeat{BrokerID: 9, BrokerEpoch: 1}, kerr.BrokerIDNotRegistered},
		{BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epochs[1] + 100}, kerr.StaleBrokerEpoch},
	}
	for _, tc := range errCases {
		if _, err := c.BrokerHeartbeat(ctxT(t), tc.hb); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.hb, err, tc.want)
		}
	}

	// Controlled shutdown of broker 2 moves its leadership to 1, and it is
	// told to shut down once it leads nothing.
	res, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 2, BrokerEpoch: epochs[2], CurrentMetadataOffset: int64(n.Image().Offset()), WantShutdown: true})
	if err != nil || !res.ShouldShutdown || !res.IsFenced {
		t.Fatalf("shutdown heartbeat: %+v %v", res, err)
	}
	if p := part(t, n, "t", 1); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("t-1 after controlled shutdown: %+v", p)
	}

	// A new incarnation re-registers fenced and catches up before it is
	// unfenced.
	epoch, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 2, IncarnationID: [16]byte{1, 2}})
	if err != nil || epoch <= epochs[2] {
		t.Fatalf("re-register: %d %v", epoch, err)
	}
	res, err = c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 2, BrokerEpoch: epoch, CurrentMetadataOffset: epoch - 1})
	if err != nil || res.IsCaughtUp || !res.IsFenced {
		t.Fatalf("behind heartbeat: %+v %v", res, err)
	}
	if res := heartbeat(t, n, 2, epoch); res.IsFenced || !res.IsCaughtUp {
		t.Fatalf("caught-up heartbeat: %+v", res)
	}
	// Broker 2 rejoins t-0's ISR only. Re-registering broker 1, which
	// leads both partitions, moves t-0 to 2 and leaves t-1, whose ISR
	// holds only 1, without a leader: only ISR members lead.
	p0 := part(t, n, "t", 0)
	tid, _ := n.Image().Topic("t")
	if _, err := c.AlterPartition(ctxT(t), tid.ID, 0, p0.LeaderEpoch, p0.PartitionEpoch, isrOf(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: [16]byte{9}}); err != nil {
		t.Fatal(err)
	}
	if p := part(t, n, "t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("t-0 after 1 restarted: %+v", p)
	}
	if p := part(t, n, "t", 1); p.Leader != image.NoLeader || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("t-1 after 1 restarted: %+v", p)
	}
}

// TestUncleanEnabledDynamic: unclean.leader.election.enable resolves as
// Kafka's controller resolves it: the topic, this controller node's
// dynamic config, the cluster-wide dynamic default, then the file.
func TestUncleanEnabledDynamic(t *testing.T) {
	n, c := startController(t, t.TempDir())
	createTopic(t, c, "u", 1)
	node := strconv.Itoa(int(n.NodeID()))
	steps := []struct {
		name string
		set  map[string]*string
		want bool
	}{
		{"", nil, false},
		{"", map[string]*string{"unclean.leader.election.enable": strp("true")}, true},
		{node, map[string]*string{"unclean.leader.election.enable": strp("false")}, false},
		{"", map[string]*string{"unclean.leader.election.enable": nil}, false},
		{node, map[string]*string{"unclean.leader.election.enable": strp("true")}, true},
	}
	for i, s := range steps {
		if s.set != nil {
			if err := c.AlterConfigs(ctxT(t), image.ResourceBroker, s.name, s.set, false); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		img := n.Image()
		tp, _ := img.Topic("u")
		if got := c.uncleanEnabled(img, tp); got != s.want {
			t.Errorf("step %d (broker %q %v): unclean enabled %v, want %v", i, s.name, s.set, got, s.want)
		}
	}
}
