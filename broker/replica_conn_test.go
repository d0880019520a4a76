package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/internal/replica"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// followerOf sets up what TestReplicaFetcherSendsBrokerEpoch does: the
// leader ts is told by hand that broker 2 replicates topic-0, and a second
// single-node server plays broker 2, with a follower's copy of the
// partition over a log of its own. It returns the leader's partition, the
// follower server and the follower's partition.
func followerOf(t *testing.T, ts *testServer, topic string, tweak func(*config.Broker)) (*partition.Partition, *testServer, *partition.Partition) {
	t.Helper()
	createTopic(t, ts.admin(t), topic, 1, nil)
	p := ts.parts.get(topic, 0)
	if p == nil || !p.IsLeader(1) {
		t.Fatalf("partition %s-0 is not led here", topic)
	}
	a := p.Assign.Load()
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1,
		LeaderEpoch: a.LeaderEpoch + 1, PartitionEpoch: a.PartitionEpoch + 1})
	ts2 := startServer(t, "", func(c *config.Broker) {
		c.NodeID = 2
		c.ControllerQuorumVoters = map[int32]string{2: c.ControllerQuorumVoters[1]}
		if tweak != nil {
			tweak(c)
		}
	})
	createTopic(t, ts2.admin(t), topic, 1, nil)
	local := ts2.parts.get(topic, 0)
	if local == nil {
		t.Fatalf("server 2 hosts no %s-0", topic)
	}
	follower := &partition.Partition{Topic: topic, Index: 0, TopicID: p.TopicID, Log: local.Log, Self: 2, Env: ts2.partEnv}
	return p, ts2, follower
}

// logBytes reads a whole log's batches from offset 0.
func logBytes(t *testing.T, p *partition.Partition) []byte {
	t.Helper()
	rr, err := p.Log.Read(0, 64<<20, p.Log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	return rr.Data
}

// The follower's own connection (PLAINTEXT): fetches one after another
// over one connection, each response read into the buffer the one before
// used, leave the follower's log byte for byte the leader's, and the
// leader records the follower's log end from the fetch that follows.
func TestFollowerConnFetchesOverOneConnection(t *testing.T) {
	ts := startServer(t, "")
	p, ts2, follower := followerOf(t, ts, "ownconn", func(c *config.Broker) { c.ReplicaFetchWaitMaxMs = 50 })
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(n, size int, tag string) {
		var recs []*kgo.Record
		for i := range n {
			v := bytes.Repeat([]byte(fmt.Sprintf("%s-%d.", tag, i)), size)
			recs = append(recs, &kgo.Record{Topic: "ownconn", Partition: 0, Value: v})
		}
		if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	parts := map[*partition.Partition]*replica.FollowState{follower: {Epoch: p.LeaderEpoch.Load(), Truncated: true}}

	// Large records first, then small ones: the second response is read
	// over the first's bytes in the same buffer.
	produce(200, 400, "a")
	if err := ts2.fetchers.FetchRoundsAt(testContext(t), 1, ts.addr, parts, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := follower.Log.LogEndOffset(), p.Log.LogEndOffset(); got != want || want != 200 {
		t.Fatalf("follower log end %d after one fetch, leader's %d (want 200)", got, want)
	}
	produce(30, 1, "b")
	// The second fetch brings b, the third finds nothing new, waits out
	// replica.fetch.wait.max.ms and tells the leader where the follower's
	// log ends.
	if err := ts2.fetchers.FetchRoundsAt(testContext(t), 1, ts.addr, parts, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := follower.Log.LogEndOffset(), p.Log.LogEndOffset(); got != want || want != 230 {
		t.Fatalf("follower log end %d, leader's %d (want 230)", got, want)
	}
	if !bytes.Equal(logBytes(t, follower), logBytes(t, p)) {
		t.Fatal("the follower's log differs from the leader's")
	}
	if got := follower.HW.Load(); got != 230 {
		// The leader's high watermark is its own log end here (ISR {1}).
		t.Fatalf("follower high watermark %d, want 230", got)
	}
	p.Mu.Lock()
	leo := p.Followers[2].LEO
	p.Mu.Unlock()
	if leo != 230 {
		t.Fatalf("leader has the follower's log end at %d, want 230", leo)
	}
}

// A fetcher that stops breaks off a long poll in progress on its own
// connection at once, not when the leader's wait ends.
func TestFollowerConnStopsInLongPoll(t *testing.T) {
	ts := startServer(t, "")
	p, ts2, follower := followerOf(t, ts, "ownconnstop", func(c *config.Broker) { c.ReplicaFetchWaitMaxMs = 20000 })
	parts := map[*partition.Partition]*replica.FollowState{follower: {Epoch: p.LeaderEpoch.Load(), Truncated: true}}
	ctx, cancel := context.WithTimeout(testContext(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := ts2.fetchers.FetchRoundsAt(ctx, 1, ts.addr, parts, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch ended with %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the fetch took %v to stop", took)
	}
}
