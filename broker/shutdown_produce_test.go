package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
)

// TestCloseAnswersWaitingProduce: in a three-node cluster whose followers
// have stopped fetching, an acks=all produce to the leader waits for them;
// closing the leader answers it NOT_LEADER_OR_FOLLOWER at once (Kafka's
// answer for a partition this broker no longer leads), instead of leaving
// it to the closed connection.
func TestCloseAnswersWaitingProduce(t *testing.T) {
	closeAnswersWaitingProduce(t, 0)
}

// TestCloseAnswersProduceAnsweredLate: as TestCloseAnswersWaitingProduce,
// with the produce's answer handed to its connection's writer 300 ms after
// its wait ended (Server.hookAnswered): Close has by then stopped waiting
// for the produce and shut the connection's read side, and the answer
// must still be written before the connection closes. Before the writer
// waited for it (conn.awaitOnClose), the connection closed unanswered.
func TestCloseAnswersProduceAnsweredLate(t *testing.T) {
	closeAnswersWaitingProduce(t, 300*time.Millisecond)
}

func closeAnswersWaitingProduce(t *testing.T, lateBy time.Duration) {
	nodes := startTestCluster(t)
	// The leader is not the active controller, so its Close does not
	// wait for a new controller to be elected first.
	var leader *testNode
	var followers []*testNode
	for _, n := range nodes {
		if leader == nil && !n.meta.IsLeader() {
			leader = n
			continue
		}
		followers = append(followers, n)
	}
	cl := clusterClient(t, nodes)
	ctx := testContext(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "leaving", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{leader.id, followers[0].id, followers[1].id}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, rt)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %v", err, cresp)
	}
	waitMetadata(t, cl, 30*time.Second, "leaving-0 led by its first replica with a full ISR", func(md map[string]map[int32]partitionState) bool {
		p, ok := md["leaving"][0]
		return ok && p.leader == leader.id && slices.Equal(p.isr, []int32{1, 2, 3})
	}, "leaving")
	// The Metadata answer may come from a node whose image is ahead of
	// the leader's: wait for the leader itself to lead the partition.
	var p *partition.Partition
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if p = leader.parts.get("leaving", 0); p != nil && p.IsLeader(leader.id) {
			if a := p.Assign.Load(); a != nil && len(a.ISR) == 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader does not lead leaving-0 with a full ISR")
		}
	}

	// The followers make the partition when their metadata watchers
	// apply the topic, which may be after CreateTopics answered; a
	// reconcile after the fetchers close would start them again. Wait
	// until each follower hosts it and its reconcile is done.
	for _, f := range followers {
		for deadline := time.Now().Add(20 * time.Second); f.parts.get("leaving", 0) == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("follower %d does not host leaving-0", f.id)
			}
		}
		f.reconcileMu.Lock()
		f.reconcileMu.Unlock()
	}
	// The followers stop fetching (as if paused); they stay in the ISR
	// for replica.lag.time.max.ms, so the produce waits for them.
	for _, f := range followers {
		f.fetchers.Close()
	}
	answer := produceAsync(leader.Addr().String(), "leaving", testBatch(t, "never-replicated"), 60*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for p.Log.LogEndOffset() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the produce was not appended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case got := <-answer:
		t.Fatalf("answered (code %d) before the followers fetched", got.ErrorCode)
	case <-time.After(300 * time.Millisecond):
	}

	if lateBy > 0 {
		late := func() { time.Sleep(lateBy) }
		leader.hookAnswered.Store(&late)
	}
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		leader.Close()
		close(closed)
	}()
	select {
	case got := <-answer:
		if got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("closing leader answered code %d (%v) at offset %d, want NOT_LEADER_OR_FOLLOWER",
				got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
		}
		t.Logf("answered NOT_LEADER_OR_FOLLOWER %v after Close began", time.Since(start))
	case <-time.After(3 * time.Second):
		t.Fatal("no answer within 3s of Close")
	}
	<-closed
}
