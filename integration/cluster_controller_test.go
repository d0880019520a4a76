package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterControllerKill: SIGKILL the active controller (the raft
// leader, found with DescribeQuorum) of a three-node cluster. Another node
// becomes the active controller; topic creation works through it; the
// killed node, being a broker too, is fenced once its session expires and
// its leaderships and ISR places move to the others; fenced brokers get
// no new replicas. Restarted, the node is unfenced, sees every topic with
// the IDs and configs they had, and rejoins the ISRs; records written
// before the kill read back.
func TestClusterControllerKill(t *testing.T) {
	// The session path: a closed connection's fast fence
	// (broker.disconnect.grace.ms) is TestClusterDisconnectControllerFailover's.
	c := cuStartCluster(t, 3, 0, "broker.disconnect.grace.ms=0")
	cl := c.client(nil, kgo.RecordRetries(20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)

	// Topics made before the kill: one with three partitions, so that each
	// broker leads one, and one with a config to find again.
	retention := "123456789"
	cuCreateAssigned(t, cl, "ck-spread", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	cuCreateTopic(t, cl, "ck-config", 1, 3, map[string]*string{"retention.ms": &retention, "cleanup.policy": kmsg.StringPtr("compact")})
	var written []string
	for p := range int32(3) {
		for i := range 5 {
			written = append(written, fmt.Sprintf("before-%d-%d", p, i))
		}
		cuProduceSync(t, cl, "ck-spread", p, written[len(written)-5:]...)
	}
	before := cuTopicIDs(t, adm, "ck-spread", "ck-config")

	var ctrl, term int32
	cuWait(t, 30*time.Second, "an active controller", func() error {
		var err error
		ctrl, term, err = cuQuorumLeader(cl)
		if err == nil && ctrl < 1 {
			err = fmt.Errorf("leader %d", ctrl)
		}
		return err
	})
	var led []int32
	for p := range int32(3) {
		st, err := cuPartitionState(cl, "ck-spread", p)
		if err != nil {
			t.Fatal(err)
		}
		if st.leader == ctrl {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatalf("the active controller %d leads no partition of ck-spread: no leadership to move", ctrl)
	}
	t.Logf("active controller %d (term %d) leads ck-spread partitions %v; killing it", ctrl, term, led)

	killed := time.Now()
	c.kill(ctrl)
	live := c.client(c.seedsExcept(ctrl), kgo.RecordRetries(20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	liveAdm := kadm.NewClient(live)

	var next, nextTerm int32
	cuWait(t, 30*time.Second, "a new active controller", func() error {
		var err error
		next, nextTerm, err = cuQuorumLeader(live)
		switch {
		case err != nil:
			return err
		case next == ctrl || next < 1:
			return fmt.Errorf("leader is %d", next)
		case nextTerm <= term:
			return fmt.Errorf("new leader %d in term %d, not after %d", next, nextTerm, term)
		}
		return nil
	})
	elected := time.Since(killed)

	// The first CreateTopics the new controller accepts: replication
	// factor 1, which needs only one unfenced broker, so the probe
	// measures the controller, not the fencing.
	cuWait(t, 30*time.Second, "create a topic after the controller kill", func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		resp, err := liveAdm.CreateTopic(ctx, 1, 1, nil, "ck-probe")
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	created := time.Since(killed)

	// Fencing: the dead node's session runs out (3 s); it leaves every ISR
	// and leads nothing.
	cuWait(t, 30*time.Second, fmt.Sprintf("broker %d fenced", ctrl), func() error {
		f, err := cuFenced(live)
		if err != nil {
			return err
		}
		if fenced, ok := f[ctrl]; !ok || !fenced {
			return fmt.Errorf("brokers (fenced or not): %v", f)
		}
		for id, fenced := range f {
			if id != ctrl && fenced {
				return fmt.Errorf("live broker %d is fenced", id)
			}
		}
		return nil
	})
	fenced := time.Since(killed)
	// The new controller gives every broker a whole session from its
	// activation, and the dead one had heartbeated at most an interval
	// (0.5 s) before the kill: no fencing before the session could end.
	if fenced < 2500*time.Millisecond {
		t.Fatalf("broker %d fenced %v after its kill, before broker.session.timeout.ms (3 s) could pass", ctrl, fenced)
	}
	cuWait(t, 30*time.Second, "leaders and ISRs without the dead broker", func() error {
		for _, topic := range []string{"ck-spread", "ck-config"} {
			for p := range before[topic].parts {
				st, err := cuPartitionState(live, topic, p)
				if err != nil {
					return err
				}
				if st.leader == ctrl || st.leader < 0 || slices.Contains(st.isr, ctrl) {
					return fmt.Errorf("%s-%d: leader %d, ISR %v", topic, p, st.leader, st.isr)
				}
			}
		}
		return nil
	})

	// A fenced broker gets no replicas: three replicas cannot be placed on
	// two brokers, two can, and not on the dead one.
	ctx := testContext(t, 30*time.Second)
	resp, err := liveAdm.CreateTopic(ctx, 3, 3, nil, "ck-three")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("create with 3 replicas on 2 unfenced brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	cuCreateTopic(t, live, "ck-after", 3, 2, nil)
	var liveIDs []int32
	for _, n := range c.nodes {
		if n.id != ctrl {
			liveIDs = append(liveIDs, n.id)
		}
	}
	for _, id := range liveIDs {
		n := c.node(id)
		cuWait(t, 30*time.Second, fmt.Sprintf("ck-after in broker %d's metadata", id), func() error {
			resp, err := cuMetadataFrom(n, "ck-after")
			if err != nil {
				return err
			}
			for p := range int32(3) {
				st, err := cuFindPartition(resp, "ck-after", p)
				if err != nil {
					return err
				}
				if !slices.Contains(liveIDs, st.leader) || len(st.replicas) != 2 || slices.Contains(st.replicas, ctrl) {
					return fmt.Errorf("partition %d: leader %d, replicas %v", p, st.leader, st.replicas)
				}
			}
			return nil
		})
	}
	cuProduceSync(t, live, "ck-after", 0, "after-kill")

	// Back: the node is unfenced, knows everything made while it was down
	// and everything made before, and rejoins the ISRs.
	c.restart(ctrl)
	cuWait(t, 30*time.Second, fmt.Sprintf("broker %d unfenced", ctrl), func() error {
		f, err := cuFenced(cl)
		if err != nil {
			return err
		}
		for _, n := range c.nodes {
			if fenced, ok := f[n.id]; !ok || fenced {
				return fmt.Errorf("brokers (fenced or not): %v", f)
			}
		}
		return nil
	})
	// The quorum has its three voters again, the returned one caught up
	// with the log (as kafka-metadata-quorum --describe would show).
	cuWait(t, 30*time.Second, fmt.Sprintf("controller %d caught up in DescribeQuorum", ctrl), func() error {
		q, err := cuDescribeQuorum(cl)
		if err != nil {
			return err
		}
		var ids []int32
		lagging := fmt.Errorf("voter %d not listed", ctrl)
		for _, v := range q.CurrentVoters {
			ids = append(ids, v.ReplicaID)
			if v.ReplicaID == ctrl {
				lagging = nil
				if v.LogEndOffset < q.HighWatermark {
					lagging = fmt.Errorf("voter %d at %d, high watermark %d", ctrl, v.LogEndOffset, q.HighWatermark)
				}
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []int32{1, 2, 3}) {
			return fmt.Errorf("voters %v", ids)
		}
		return lagging
	})
	restarted := c.node(ctrl)
	cuWait(t, 30*time.Second, fmt.Sprintf("broker %d's own metadata", ctrl), func() error {
		resp, err := cuMetadataFrom(restarted, "ck-spread", "ck-config", "ck-after", "ck-probe")
		if err != nil {
			return err
		}
		for _, mt := range resp.Topics {
			if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
				return fmt.Errorf("%s: %w", *mt.Topic, err)
			}
			if b, ok := before[*mt.Topic]; ok && (b.id != mt.TopicID || int(b.parts) != len(mt.Partitions)) {
				t.Fatalf("%s after the restart: id %x, %d partitions; before the kill: id %x, %d partitions",
					*mt.Topic, mt.TopicID, len(mt.Partitions), b.id, b.parts)
			}
		}
		return nil
	})
	after := cuTopicIDs(t, adm, "ck-spread", "ck-config")
	for name, b := range before {
		if after[name] != b {
			t.Fatalf("%s: %+v before the controller kill, %+v after", name, b, after[name])
		}
	}
	rc, err := adm.DescribeTopicConfigs(testContext(t, 30*time.Second), "ck-config")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On("ck-config", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range cfg.Configs {
		if kv.Source == kmsg.ConfigSourceDynamicTopicConfig && kv.Value != nil {
			got[kv.Key] = *kv.Value
		}
	}
	if got["retention.ms"] != retention || got["cleanup.policy"] != "compact" {
		t.Fatalf("ck-config's topic configs after the controller kill: %v", got)
	}
	cuWait(t, 30*time.Second, fmt.Sprintf("broker %d back in the ISRs", ctrl), func() error {
		for p := range int32(3) {
			st, err := cuPartitionState(cl, "ck-spread", p)
			if err != nil {
				return err
			}
			if len(st.isr) != 3 {
				return fmt.Errorf("ck-spread-%d: ISR %v", p, st.isr)
			}
		}
		return nil
	})
	var read []string
	for _, recs := range readAllFrom(t, c.seeds(), "ck-spread") {
		for _, r := range recs {
			read = append(read, string(r.Value))
		}
	}
	slices.Sort(read)
	slices.Sort(written)
	if !slices.Equal(read, written) {
		t.Fatalf("ck-spread read back %d records %v, wrote %d %v", len(read), read, len(written), written)
	}
	t.Logf("controller failover: new active controller %d after %v, first CreateTopics after %v, dead broker fenced after %v",
		next, elected.Round(time.Millisecond), created.Round(time.Millisecond), fenced.Round(time.Millisecond))
}

// cuTopic is what a topic's metadata must keep through failures.
type cuTopic struct {
	id    [16]byte
	parts int32
}

// cuTopicIDs lists topics' IDs and partition counts, failing the test if
// one is missing.
func cuTopicIDs(t *testing.T, adm *kadm.Client, topics ...string) map[string]cuTopic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]cuTopic)
	for _, name := range topics {
		d, ok := td[name]
		if !ok || d.Err != nil {
			t.Fatalf("topic %s: listed %v, %v", name, ok, d.Err)
		}
		out[name] = cuTopic{id: d.ID, parts: int32(len(d.Partitions))}
	}
	return out
}

// TestClusterPreferredLeaderRebalance: with auto.leader.rebalance.enable
// and a one-second leader.imbalance.check.interval.seconds, a broker that
// was killed, lost its leaderships and came back gets them again once it
// is back in the ISR: every partition ends up led by its preferred
// replica (the first of its replicas), with no record lost on the way.
func TestClusterPreferredLeaderRebalance(t *testing.T) {
	const topic = "rebalance"
	c := cuStartCluster(t, 3, 0, "auto.leader.rebalance.enable=true", "leader.imbalance.check.interval.seconds=1")
	cl := c.client(nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(100))
	cuCreateAssigned(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	preferredLeaders := func(cl *kgo.Client) error {
		for p := range int32(3) {
			st, err := cuPartitionState(cl, topic, p)
			if err != nil {
				return err
			}
			if st.leader != st.replicas[0] || len(st.isr) != 3 {
				return fmt.Errorf("%s-%d: leader %d, replicas %v, ISR %v", topic, p, st.leader, st.replicas, st.isr)
			}
		}
		return nil
	}
	cuWait(t, 30*time.Second, "preferred leaders at the start", func() error { return preferredLeaders(cl) })
	var want []string
	produce := func(cl *kgo.Client, tag string) {
		for p := range int32(3) {
			v := fmt.Sprintf("%s-%d", tag, p)
			cuProduceSync(t, cl, topic, p, v)
			want = append(want, v)
		}
	}
	produce(cl, "start")

	// Broker 2 dies: partition 1 moves to another ISR member.
	c.kill(2)
	live := c.client(c.seedsExcept(2), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(100))
	cuWait(t, 30*time.Second, "partition 1 led elsewhere", func() error {
		st, err := cuPartitionState(live, topic, 1)
		if err == nil && (st.leader == 2 || st.leader < 0) {
			err = fmt.Errorf("leader %d, ISR %v", st.leader, st.isr)
		}
		return err
	})
	produce(live, "down")

	// Back: the rebalance returns partition 1 to it once it is in sync.
	c.restart(2)
	back := time.Now()
	cuWait(t, 45*time.Second, "preferred leaders after broker 2 returned", func() error { return preferredLeaders(cl) })
	t.Logf("partition leadership returned to the preferred replica %v after the restart", time.Since(back).Round(time.Millisecond))
	produce(cl, "back")

	var got []string
	for _, recs := range readAllFrom(t, c.seeds(), topic) {
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
}
