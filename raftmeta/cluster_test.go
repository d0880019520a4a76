package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// tcpCluster runs three voters (1, 2, 3) and any learners in one process,
// talking over real TCP on loopback.
type tcpCluster struct {
	t       *testing.T
	addrs   map[uint64]string
	dirs    map[uint64]string
	nodes   map[uint64]*tcpNode
	mod     func(id uint64, c *Config)
	pending map[uint64]net.Listener // listeners reserved before their node starts
	// bootstrapLearners makes learners find the controllers as Kafka 4
	// brokers do: by controller.quorum.bootstrap.servers alone, knowing
	// neither their IDs nor the voter set.
	bootstrapLearners bool
}

type tcpNode struct {
	node   *Node
	tr     *raftnode.TCPTransport
	client *controller.Client
	served chan struct{}
}

const testTick = 20 * time.Millisecond

var testVoters = []uint64{1, 2, 3}

func newTCPCluster(t *testing.T, mod func(id uint64, c *Config)) *tcpCluster {
	t.Helper()
	c := &tcpCluster{t: t, addrs: map[uint64]string{}, dirs: map[uint64]string{}, nodes: map[uint64]*tcpNode{}, mod: mod, pending: map[uint64]net.Listener{}}
	for _, id := range testVoters {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.addrs[id] = ln.Addr().String()
		c.pending[id] = ln
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id, false)
		}
		for _, ln := range c.pending {
			ln.Close()
		}
	})
	return c
}

// start starts node id (a voter if it is 1, 2 or 3, else a learner) with
// its directory from an earlier start, if any.
func (c *tcpCluster) start(id uint64) *tcpNode {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	tcfg := raftnode.TransportConfig{
		NodeID: id, ClusterID: "tcp-cluster", Peers: c.addrs, Logger: discardLogger(),
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	}
	voters := testVoters
	_, voter := c.addrs[id]
	if !voter && c.bootstrapLearners {
		tcfg.Peers, voters = nil, nil
		for _, vid := range testVoters {
			tcfg.Bootstrap = append(tcfg.Bootstrap, c.addrs[vid])
		}
	}
	tr, err := raftnode.NewTCPTransport(tcfg)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := Config{
		NodeID: id, Voters: voters, Observer: !voter, Dir: c.dirs[id], Logger: discardLogger(),
		ClusterID: "tcp-cluster", TickInterval: testTick, Transport: tr,
	}
	if c.mod != nil {
		c.mod(id, &cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		tr.Close()
		c.t.Fatalf("start node %d: %v", id, err)
	}
	tn := &tcpNode{node: n, tr: tr, client: controller.NewClient(n, tr), served: make(chan struct{})}
	if addr, ok := c.addrs[id]; ok {
		ln := c.pending[id]
		delete(c.pending, id)
		if ln == nil {
			if ln, err = net.Listen("tcp", addr); err != nil {
				c.t.Fatalf("listen again on %s: %v", addr, err)
			}
		}
		go func() {
			defer close(tn.served)
			if err := tr.Serve(ln); err != nil {
				c.t.Errorf("serve: %v", err)
			}
		}()
	} else {
		close(tn.served)
	}
	c.nodes[id] = tn
	return tn
}

// stop closes node id, handing leadership over first if transfer is set.
func (c *tcpCluster) stop(id uint64, transfer bool) {
	tn := c.nodes[id]
	if tn == nil {
		return
	}
	delete(c.nodes, id)
	if transfer {
		tn.node.Close()
	} else {
		tn.node.Stop()
	}
	tn.tr.Close()
	<-tn.served
}

func (c *tcpCluster) leader() *tcpNode {
	for _, tn := range c.nodes {
		if tn.node.IsLeader() {
			return tn
		}
	}
	return nil
}

func (c *tcpCluster) waitLeader() *tcpNode {
	c.t.Helper()
	var l *tcpNode
	waitFor(c.t, "an active controller", func() bool { l = c.leader(); return l != nil })
	return l
}

// follower returns a running voter that is not the leader.
func (c *tcpCluster) follower() *tcpNode {
	for _, id := range testVoters {
		if tn := c.nodes[id]; tn != nil && !tn.node.IsLeader() {
			return tn
		}
	}
	return nil
}

// waitConverged waits until every running node has applied the leader's
// image.
func (c *tcpCluster) waitConverged() {
	c.t.Helper()
	waitFor(c.t, "all nodes to apply the same image", func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		want := l.node.Image().Records()
		for _, tn := range c.nodes {
			if !reflect.DeepEqual(tn.node.Image().Records(), want) {
				return false
			}
		}
		return true
	})
}

func mustCreate(t *testing.T, api controller.API, name string, partitions int32, rf int16) controller.CreateTopicResult {
	t.Helper()
	res := api.CreateTopics(ctxT(t), []controller.CreateTopic{{Name: name, NumPartitions: partitions, ReplicationFactor: rf}}, false)
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("create topic %s: %+v", name, res)
	}
	return res[0]
}

func TestTCPClusterForwardingAndLearner(t *testing.T) {
	c := newTCPCluster(t, nil)
	c.bootstrapLearners = true
	for _, id := range testVoters {
		c.start(id)
	}
	learner := c.start(4)
	leader := c.waitLeader()
	waitFor(t, "the learner to join", func() bool {
		for _, tn := range c.nodes {
			if !slices.Contains(tn.node.Learners(), 4) {
				return false
			}
		}
		return true
	})
	if got := learner.node.Voters(); !slices.Equal(got, testVoters) {
		t.Fatalf("voters seen by the learner: %v", got)
	}

	// Requests sent from a follower and from the learner reach the active
	// controller; their results are those of the local controller.
	f := c.follower()
	if _, err := f.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	res := mustCreate(t, f.client, "from-follower", 3, 1)
	if res.NumPartitions != 3 || res.ReplicationFactor != 1 || res.ID == ([16]byte{}) {
		t.Fatalf("forwarded result %+v", res)
	}
	mustCreate(t, learner.client, "from-learner", 1, 1)
	dup := learner.client.CreateTopics(ctxT(t), []controller.CreateTopic{{Name: "from-follower", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if !errors.Is(dup[0].Err, kerr.TopicAlreadyExists) || controller.ErrorMessage(dup[0].Err) == nil {
		t.Fatalf("duplicate forwarded: %+v", dup[0])
	}
	if err := learner.client.AlterConfigs(ctxT(t), image.ResourceTopic, "from-learner", map[string]*string{"retention.ms": strp("10")}, false); err != nil {
		t.Fatal(err)
	}
	if first, count, err := f.client.AllocateProducerIDs(ctxT(t), 1); err != nil || count != controller.ProducerIDBlockSize || first != 0 {
		t.Fatalf("AllocateProducerIDs: %d %d %v", first, count, err)
	}
	c.waitConverged()
	tp, ok := learner.node.Image().Topic("from-learner")
	if !ok || tp.Configs["retention.ms"] != "10" {
		t.Fatalf("learner image: %+v %v", tp, ok)
	}

	// DescribeQuorum, asked anywhere, answers with the leader's view.
	q, err := learner.client.DescribeQuorum(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if q.LeaderID != int32(leader.node.NodeID()) || q.LeaderEpoch < 1 || q.HighWatermark < int64(learner.node.Image().Offset()) {
		t.Fatalf("quorum %+v (leader %d)", q, leader.node.NodeID())
	}
	if len(q.Voters) != 3 || len(q.Observers) != 1 || q.Observers[0].ID != 4 {
		t.Fatalf("quorum replicas %+v / %+v", q.Voters, q.Observers)
	}
	for _, r := range append(q.Voters, q.Observers...) {
		if r.LogEndOffset <= 0 || r.LastFetchTimestamp <= 0 || r.LastCaughtUpTimestamp <= 0 {
			t.Fatalf("replica %+v", r)
		}
	}
	if _, err := f.node.Controller().DescribeQuorum(ctxT(t)); !errors.Is(err, kerr.NotController) {
		t.Fatalf("DescribeQuorum on a follower's controller: %v", err)
	}
}

// A leader that dies without handing over loses no acknowledged record:
// every CreateTopics that succeeded is in the new leader's image.
func TestTCPClusterLeaderKill(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	leader := c.waitLeader()
	if _, err := leader.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	f := c.follower()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	stopc := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopc:
				return
			default:
			}
			name := fmt.Sprintf("t%03d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res := f.client.CreateTopics(ctx, []controller.CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}, false)
			cancel()
			if err := res[0].Err; err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}
	}()
	waitFor(t, "some topics", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 5 })
	old := leader.node.NodeID()
	c.stop(old, false)
	var next *tcpNode
	waitFor(t, "a new active controller", func() bool { next = c.leader(); return next != nil })
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	waitFor(t, "topics under the new leader", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= n+5 })
	close(stopc)
	wg.Wait()
	c.waitConverged()
	img := c.leader().node.Image()
	for _, name := range acked {
		if _, ok := img.Topic(name); !ok {
			t.Fatalf("acknowledged topic %s lost after failover (%d acknowledged)", name, len(acked))
		}
	}
	if next.node.NodeID() == old {
		t.Fatal("the dead node leads")
	}
	c.start(old)
	c.waitConverged()
}

// A node that comes back after the leader has compacted past its log
// catches up from a snapshot sent over the transport.
func TestTCPClusterSnapshotCatchUp(t *testing.T) {
	c := newTCPCluster(t, func(_ uint64, cfg *Config) { cfg.SnapshotEvery, cfg.SnapshotMargin = 16, 4 })
	for _, id := range testVoters {
		c.start(id)
	}
	leader := c.waitLeader()
	if _, err := leader.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	lagging := c.follower().node.NodeID()
	c.stop(lagging, false)
	for i := range 40 {
		mustCreate(t, c.waitLeader().client, fmt.Sprintf("s%02d", i), 1, 1)
	}
	first := c.waitLeader().node.FirstIndex()
	back := c.start(lagging)
	c.waitConverged()
	if back.node.SnapshotsInstalled() == 0 {
		t.Fatalf("node %d caught up without a snapshot (leader log starts at %d)", lagging, first)
	}
	if _, ok := back.node.Image().Topic("s39"); !ok {
		t.Fatal("restarted node lacks the last topic")
	}
	// It then follows the log as usual.
	mustCreate(t, back.client, "after", 1, 1)
	c.waitConverged()
}

// A learner applies the log but never votes: with two of three voters
// gone there is no quorum, and the learner does not become leader.
func TestTCPClusterLearnerDoesNotVote(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	learner := c.start(4)
	leader := c.waitLeader()
	if _, err := learner.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 4, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, learner.client, "before", 1, 1)
	waitFor(t, "the learner to apply", func() bool { _, ok := learner.node.Image().Topic("before"); return ok })

	// Keep one voter that is not the leader, so that a new election is
	// needed and cannot be won.
	var keep uint64
	for _, id := range testVoters {
		if id != leader.node.NodeID() {
			keep = id
		}
	}
	for _, id := range testVoters {
		if id != keep {
			c.stop(id, false)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*raftnode.ElectionTicks*testTick)
	defer cancel()
	res := learner.client.CreateTopics(ctx, []controller.CreateTopic{{Name: "after", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if res[0].Err == nil {
		t.Fatal("a topic was created without a quorum")
	}
	for _, tn := range c.nodes {
		if tn.node.IsLeader() {
			t.Fatalf("node %d leads without a quorum", tn.node.NodeID())
		}
	}
	if id, _ := learner.node.LeaderID(); id == 4 {
		t.Fatal("the learner became leader")
	}
	if _, ok := learner.node.Image().Topic("after"); ok {
		t.Fatal("the learner applied an uncommitted topic")
	}
}

// Closing the active controller hands leadership to another voter at
// once instead of leaving the quorum to wait for an election timeout.
func TestTCPClusterGracefulTransfer(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	leader := c.waitLeader()
	if _, err := leader.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, leader.client, "a", 1, 1)
	c.waitConverged()
	old := leader.node.NodeID()
	c.stop(old, true)
	// Close returned once another node led; no election timeout passed.
	var next uint64
	for _, tn := range c.nodes {
		if id, ok := tn.node.LeaderID(); ok && id != old {
			next = id
		}
	}
	if next == 0 {
		t.Fatal("no other node knows a new leader when Close returns")
	}
	start := time.Now()
	nl := c.waitLeader()
	if d := time.Since(start); d > raftnode.ElectionTicks*testTick {
		t.Fatalf("new active controller after %v", d)
	}
	mustCreate(t, nl.client, "b", 1, 1)
	if _, ok := nl.node.Image().Topic("a"); !ok {
		t.Fatal("topic a lost in the transfer")
	}
}

// runHeartbeats sends broker id's heartbeats through api every interval
// until ctx ends, as a broker does.
func runHeartbeats(ctx context.Context, api controller.API, n *Node, id int32, epoch int64, every time.Duration) {
	for ctx.Err() == nil {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = api.BrokerHeartbeat(hctx, controller.BrokerHeartbeat{BrokerID: id, BrokerEpoch: epoch, CurrentMetadataOffset: int64(n.Image().Offset())})
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// A broker that stops sending heartbeats is fenced by the active
// controller, and its partitions get new leaders from their ISRs; when it
// heartbeats again it is unfenced.
func TestTCPClusterBrokerFencing(t *testing.T) {
	const session = 600 * time.Millisecond
	c := newTCPCluster(t, func(_ uint64, cfg *Config) { cfg.Controller.BrokerSessionTimeout = session })
	for _, id := range testVoters {
		c.start(id)
	}
	c.start(4)
	c.waitLeader()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	ctx4, stop4 := context.WithCancel(ctx)
	defer stop4()
	for id := int32(1); id <= 4; id++ {
		tn := c.nodes[uint64(id)]
		epoch, err := tn.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: id, IncarnationID: image.NewUUID()})
		if err != nil {
			t.Fatal(err)
		}
		hctx := ctx
		if id == 4 {
			hctx = ctx4
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runHeartbeats(hctx, tn.client, tn.node, id, epoch, 50*time.Millisecond)
		}()
	}
	learner := c.nodes[4]
	waitFor(t, "all brokers unfenced", func() bool { return len(learner.node.Image().UnfencedBrokerIDs()) == 4 })
	res := learner.client.CreateTopics(ctxT(t), []controller.CreateTopic{{Name: "p", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: map[int32][]int32{0: {4, 1, 2}, 1: {1, 4, 3}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	c.waitConverged()
	before := part(t, learner.node, "p", 0)
	if before.Leader != 4 {
		t.Fatalf("p-0 %+v", before)
	}

	stop4()
	waitFor(t, "broker 4 fenced", func() bool { b, _ := learner.node.Image().Broker(4); return b.Fenced })
	after := part(t, learner.node, "p", 0)
	if after.Leader != 1 || after.LeaderEpoch != before.LeaderEpoch+1 || !slices.Equal(after.ISR, []int32{1, 2}) {
		t.Fatalf("p-0 after fencing: %+v (before %+v)", after, before)
	}
	if p1 := part(t, learner.node, "p", 1); p1.Leader != 1 || !slices.Equal(p1.ISR, []int32{1, 3}) {
		t.Fatalf("p-1 after fencing: %+v", p1)
	}
	for id := int32(1); id <= 3; id++ {
		if b, _ := learner.node.Image().Broker(id); b.Fenced {
			t.Fatalf("broker %d fenced while heartbeating", id)
		}
	}

	// Heartbeats resume: broker 4 is unfenced.
	b4, _ := learner.node.Image().Broker(4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		runHeartbeats(ctx, learner.client, learner.node, 4, b4.Epoch, 50*time.Millisecond)
	}()
	waitFor(t, "broker 4 unfenced", func() bool { b, _ := learner.node.Image().Broker(4); return !b.Fenced })
}

func TestTCPClusterCloseLeaksNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	learner := c.start(4)
	if _, err := learner.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 4}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, learner.client, "a", 1, 1)
	if _, err := learner.client.DescribeQuorum(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{4, 1, 2, 3} {
		c.stop(id, true)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heartbeatingCluster starts the three voters with Kafka's dev tick and
// session settings and the given disconnect grace, each registered as a
// broker that heartbeats until the test ends, and returns the cluster
// with its active controller once the three brokers are unfenced.
func heartbeatingCluster(t *testing.T, tick, grace time.Duration) (*tcpCluster, *tcpNode) {
	c := newTCPCluster(t, func(_ uint64, cfg *Config) {
		cfg.TickInterval = tick
		cfg.Controller.BrokerSessionTimeout = 9 * time.Second
		cfg.Controller.BrokerHeartbeatInterval = 2 * time.Second
		cfg.Controller.BrokerDisconnectGrace = grace
	})
	for _, id := range testVoters {
		c.start(id)
	}
	leader := c.waitLeader()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, id := range testVoters {
		epoch, err := leader.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: int32(id), IncarnationID: image.NewUUID()})
		if err != nil {
			t.Fatal(err)
		}
		go runHeartbeats(ctx, c.nodes[id].client, c.nodes[id].node, int32(id), epoch, 200*time.Millisecond)
	}
	waitFor(t, "three unfenced brokers", func() bool {
		bs := leader.node.Image().Brokers()
		return len(bs) == 3 && !slices.ContainsFunc(bs, func(b *image.BrokerImage) bool { return b.Fenced })
	})
	return c, leader
}

// A killed broker that is not the active controller is fenced as soon as
// its controller listener refuses the controller's dial, long before its
// disconnect grace (here 4 s) would end. The bound leaves a loaded
// machine room for several of the controller's session checks (every
// 500 ms here), but not for the grace.
func TestTCPClusterDeadFollowerFencedAtOnce(t *testing.T) {
	const grace = 4 * time.Second
	c, leader := heartbeatingCluster(t, 100*time.Millisecond, grace)
	dead := c.follower().node.NodeID()
	killAt := time.Now()
	c.stop(dead, false)
	waitFor(t, "the dead node's broker fenced", func() bool {
		b, ok := leader.node.Image().Broker(int32(dead))
		return ok && b.Fenced
	})
	fenced := time.Since(killAt)
	t.Logf("node %d stopped; its broker fenced after %v", dead, fenced.Round(time.Millisecond))
	if limit := grace / 3; fenced > limit {
		t.Errorf("dead broker fenced after %v, want < %v", fenced, limit)
	}
	if !leader.node.IsLeader() {
		t.Fatal("the active controller changed")
	}
	if !leader.node.PeerDown(dead) {
		t.Fatalf("node %d not down for the controller", dead)
	}
	// Back: no longer down once it listens again.
	c.start(dead)
	waitFor(t, "the restarted node no longer down", func() bool { return !leader.node.PeerDown(dead) })
}

// A killed active controller's listener refuses connections at once, so
// the other voters elect a new leader without waiting out the election
// timeout (10 to 20 ticks): with Kafka's 100 ms dev tick, well within
// the 1 to 2 s the election would take. The new controller fences the
// dead node's broker, refused as well, as soon as it is active rather
// than twice the disconnect grace later.
func TestTCPClusterDeadLeaderReplacedAtOnce(t *testing.T) {
	const tick = 100 * time.Millisecond
	c, leader := heartbeatingCluster(t, tick, 300*time.Millisecond)
	old := leader.node.NodeID()
	mustCreate(t, leader.client, "before", 1, 3)
	c.waitConverged()

	killAt := time.Now()
	c.stop(old, false)
	next := c.waitLeader()
	elected := time.Since(killAt)
	waitFor(t, "the dead node's broker fenced", func() bool {
		b, ok := next.node.Image().Broker(int32(old))
		return ok && b.Fenced
	})
	fenced := time.Since(killAt)
	t.Logf("active controller %d stopped; %d active after %v, broker %d fenced after %v", old, next.node.NodeID(), elected.Round(time.Millisecond), old, fenced.Round(time.Millisecond))
	// An election timeout is at least ElectionTicks ticks; the bounds
	// leave room for a loaded machine.
	if limit := raftnode.ElectionTicks * tick * 3 / 4; elected > limit {
		t.Errorf("new active controller after %v, want < %v", elected, limit)
	}
	if limit := raftnode.ElectionTicks * tick; fenced > limit {
		t.Errorf("dead broker fenced after %v, want < %v", fenced, limit)
	}
	if _, ok := next.node.Image().Topic("before"); !ok {
		t.Fatal("topic created before the kill lost")
	}
	mustCreate(t, next.client, "after", 1, 2)
}

// A live leader is not deposed by one follower that believes it dead
// (its listener refused that follower's dial): the other follower still
// holds the leader's lease and ignores the pre-votes, so the leader, its
// term and the log stay.
func TestTCPClusterLiveLeaderKeepsLease(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	leader := c.waitLeader()
	if _, err := leader.client.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, leader.client, "a", 1, 1)
	c.waitConverged()
	id, term := leader.node.NodeID(), leader.node.ActiveTerm()
	f := c.follower()
	for range 5 {
		f.node.ReportPeerDown(id)
		time.Sleep(raftnode.ElectionTicks * testTick)
	}
	if !leader.node.IsLeader() || leader.node.ActiveTerm() != term {
		t.Fatalf("leader %d deposed (active %v, term %d, was %d)", id, leader.node.IsLeader(), leader.node.ActiveTerm(), term)
	}
	if got, _ := f.node.LeaderID(); got != id {
		t.Fatalf("follower %d follows %d, want %d", f.node.NodeID(), got, id)
	}
	mustCreate(t, leader.client, "b", 1, 1)
	c.waitConverged()
}
