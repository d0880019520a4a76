package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/internal/replica"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// replicaFetch sends, over the socket, the fetch of partition 0 that
// broker replica would send at broker epoch epoch from offset, and returns
// the partition's error code.
func replicaFetch(t *testing.T, cl *kgo.Client, p *partition.Partition, replica int32, epoch, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = replica
	req.ReplicaState.ID = replica
	req.ReplicaState.Epoch = epoch
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = p.Topic, p.TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p.Index
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = p.LeaderEpoch.Load()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 15 || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer v%d: %+v", resp.Version, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// KIP-903: a follower qualifies for the ISR only under the broker epoch
// of its current registration. Broker 2 (registered in this node's
// cluster, followed by hand over real Fetch requests) fetches under epoch
// e1 and then restarts as e2 (say with its disk lost): a late fetch from
// e1 is refused, the leader's ISR change naming 2 at the recorded e1 is
// refused by the controller, the new incarnation gets no credit for what
// e1 fetched, and it joins once it has caught up itself.
func TestISRExpansionChecksBrokerEpoch(t *testing.T) {
	ts := startServer(t, "")
	ctx := testContext(t)
	e1, err := ts.ctrl.RegisterBroker(ctx, image.RegisterBrokerRecord{BrokerID: 2, IncarnationID: [16]byte{15: 1}})
	if err != nil {
		t.Fatal(err)
	}
	res := ts.ctrl.CreateTopics(ctx, []controller.CreateTopic{{Name: "kip903", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: map[int32][]int32{0: {1, 2}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	var p *partition.Partition
	waitFor(t, "the partition led here", func() bool {
		p = ts.parts.get("kip903", 0)
		return p != nil && p.IsLeader(1)
	})
	// Take broker 2 out of the ISR, as the leader would once it lagged.
	a := p.Assign.Load()
	pi, err := ts.ctrl.AlterPartition(ctx, p.TopicID, 0, a.LeaderEpoch, a.PartitionEpoch,
		[]controller.ISRMember{{ID: 1, BrokerEpoch: ts.epoch.Load()}})
	if err != nil {
		t.Fatalf("shrink: %v", err)
	}
	ts.applyAssignment(p, pi)
	cl := ts.client(t, kgo.DefaultProduceTopic("kip903"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if hw := p.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}

	// The first incarnation fetches, not yet caught up: its epoch is
	// recorded and it stays out.
	if code := replicaFetch(t, cl, p, 2, e1, 5); code != 0 {
		t.Fatalf("fetch at e1: code %d", code)
	}
	p.Mu.Lock()
	recorded := p.Followers[2].BrokerEpoch
	p.Mu.Unlock()
	if recorded != e1 {
		t.Fatalf("recorded broker epoch %d, want %d", recorded, e1)
	}

	// Broker 2 restarts.
	e2, err := ts.ctrl.RegisterBroker(ctx, image.RegisterBrokerRecord{BrokerID: 2, IncarnationID: [16]byte{15: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if e2 <= e1 {
		t.Fatalf("new epoch %d not above %d", e2, e1)
	}
	waitFor(t, "the new registration in the image", func() bool {
		b, ok := ts.meta.Image().Broker(2)
		return ok && b.Epoch == e2
	})

	// A fetch from the first incarnation arriving now is stale: refused,
	// and it neither moves the recorded state nor adds broker 2.
	if code := replicaFetch(t, cl, p, 2, e1, 10); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("late fetch at e1: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	p.Mu.Lock()
	f := *p.Followers[2]
	members := ts.isrMembersLocked(p, []int32{1, 2})
	p.Mu.Unlock()
	if f.BrokerEpoch != e1 || f.LEO != 5 {
		t.Fatalf("after the late fetch: epoch %d, log end %d", f.BrokerEpoch, f.LEO)
	}
	want := []controller.ISRMember{{ID: 1, BrokerEpoch: ts.epoch.Load()}, {ID: 2, BrokerEpoch: e1}}
	if !slices.Equal(members, want) {
		t.Fatalf("ISR members %+v, want %+v", members, want)
	}
	// Had the leader decided on the e1 fetch before it saw e2, its ISR
	// change would name e1, which the controller refuses.
	ts.alterISR(p, p.Assign.Load(), members)
	if isr := p.Assign.Load().ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR %v after a change naming the old incarnation", isr)
	}
	if got := imagePartition(t, ts, "kip903"); !slices.Equal(got.ISR, []int32{1}) {
		t.Fatalf("image ISR %v after a change naming the old incarnation", got.ISR)
	}
	p.Mu.Lock()
	joining := p.Followers[2].Joining
	p.Mu.Unlock()
	if joining {
		t.Fatal("a refused joiner still counts for the high watermark")
	}

	// The new incarnation starts empty: it gets no credit for e1's fetches.
	if code := replicaFetch(t, cl, p, 2, e2, 0); code != 0 {
		t.Fatalf("fetch at e2: code %d", code)
	}
	p.Mu.Lock()
	f = *p.Followers[2]
	p.Mu.Unlock()
	if f.BrokerEpoch != e2 || f.LEO != 0 || !f.LastCaughtUp.IsZero() || f.Joining {
		t.Fatalf("after the new incarnation's first fetch: %+v", f)
	}
	if isr := p.Assign.Load().ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR %v with the new incarnation at offset 0", isr)
	}

	// Caught up, it joins: the controller takes its epoch and the leader's.
	if code := replicaFetch(t, cl, p, 2, e2, 10); code != 0 {
		t.Fatalf("caught-up fetch at e2: code %d", code)
	}
	waitFor(t, "broker 2 back in the ISR", func() bool {
		return slices.Equal(p.Assign.Load().ISR, []int32{1, 2}) && slices.Equal(imagePartition(t, ts, "kip903").ISR, []int32{1, 2})
	})
}

// imagePartition is partition 0 of topic in the node's metadata image.
func imagePartition(t *testing.T, ts *testServer, topic string) image.PartitionImage {
	t.Helper()
	tp, ok := ts.meta.Image().Topic(topic)
	if !ok || len(tp.Partitions) == 0 {
		t.Fatalf("topic %s not in the image", topic)
	}
	return tp.Partitions[0]
}

// A follower's fetcher names its broker epoch in its fetches, and the
// leader records it. Broker 2 here is a second (single-node) server whose
// fetcher fetches a partition of the first, which has been told by hand
// that 2 is a replica.
func TestReplicaFetcherSendsBrokerEpoch(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "kip903f", 1, nil)
	p := ts.parts.get("kip903f", 0)
	if p == nil || !p.IsLeader(1) {
		t.Fatal("partition kip903f-0 is not led here")
	}
	a := p.Assign.Load()
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1,
		LeaderEpoch: a.LeaderEpoch + 1, PartitionEpoch: a.PartitionEpoch + 1})

	ts2 := startServer(t, "", func(c *config.Broker) {
		c.NodeID = 2
		c.ControllerQuorumVoters = map[int32]string{2: c.ControllerQuorumVoters[1]}
	})
	if ts2.ownBrokerEpoch() <= 0 {
		t.Fatalf("server 2 has no broker epoch: %d", ts2.ownBrokerEpoch())
	}
	createTopic(t, ts2.admin(t), "kip903f", 1, nil)
	local := ts2.parts.get("kip903f", 0)
	if local == nil {
		t.Fatal("server 2 hosts no kip903f-0")
	}
	// The follower's copy, under the leader's topic ID.
	follower := &partition.Partition{Topic: "kip903f", Index: 0, TopicID: p.TopicID, Log: local.Log, Self: 2, Env: ts2.partEnv}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	parts := map[*partition.Partition]*replica.FollowState{follower: {Epoch: p.LeaderEpoch.Load(), Truncated: true}}
	if err := ts2.fetchers.FetchOnce(testContext(t), 1, cl, parts); err != nil {
		t.Fatal(err)
	}
	p.Mu.Lock()
	got := p.Followers[2].BrokerEpoch
	lastFetch := p.Followers[2].LastFetch
	p.Mu.Unlock()
	if lastFetch.IsZero() || got != ts2.ownBrokerEpoch() {
		t.Fatalf("leader recorded broker epoch %d (fetched: %v), want %d", got, !lastFetch.IsZero(), ts2.ownBrokerEpoch())
	}
}
