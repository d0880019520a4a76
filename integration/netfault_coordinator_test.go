package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNetFaultCoordinatorFailoverKeepsCommits: an offset commit the group
// coordinator acknowledged must be what the next coordinator answers,
// however soon after the acknowledgement the old one dies. The commit is
// acknowledged once the __consumer_offsets partition's high watermark
// covers it on the leader, but a follower learns that high watermark
// only with its next fetch answer; a follower elected leader in between
// has the commit in its log, above its own high watermark. Each round
// commits an offset, kills the coordinator at once with SIGKILL and asks
// the new coordinator for the group's offset.
//
// It failed every round while the new coordinator loaded the partition
// only up to its high watermark at the moment it became leader, which lags
// the old leader's (the last acknowledged commits were in its log but not
// in its state); readPartition in broker/groups.go now loads to the log
// end.
func TestNetFaultCoordinatorFailoverKeepsCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	const topic, group, rounds = "cf", "cf-group", 4
	c := cuStartCluster(t, 3, 0, "replica.fetch.wait.max.ms=500", "group.initial.rebalance.delay.ms=0")
	cl := c.client(nil, kgo.MetadataMinAge(100*time.Millisecond))
	cuCreateTopic(t, cl, topic, 1, 3, nil)
	adm := kadm.NewClient(cl)
	var lost []string
	for round := range rounds {
		offset := int64(100*round + 7)
		coord, part := cfCoordinator(t, c, nil, group, -1)
		cuWaitISR(t, cl, "__consumer_offsets", part, []int32{1, 2, 3})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, offs)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("round %d: commit offset %d: %v", round, offset, err)
		}
		c.kill(coord) // at once: the followers may not know the new high watermark yet
		next, _ := cfCoordinator(t, c, c.seedsExcept(coord), group, coord)
		survivor := c.client(c.seedsExcept(coord), kgo.MetadataMinAge(100*time.Millisecond))
		got := cfFetchOffset(t, survivor, group, topic)
		t.Logf("round %d: committed %d through node %d (__consumer_offsets-%d), node %d answers %d after the SIGKILL", round, offset, coord, part, next, got)
		if got != offset {
			lost = append(lost, fmt.Sprintf("round %d: commit of offset %d acknowledged by coordinator %d; after its SIGKILL coordinator %d answers %d", round, offset, coord, next, got))
		}
		survivor.Close()
		c.restart(coord)
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged commits lost across a coordinator failover:\n%v", len(lost), rounds, lost)
	}
}

// cfCoordinator asks (through seeds, every node when nil) which node
// coordinates group, and returns it with the group's __consumer_offsets
// partition, waiting while the cluster settles and while the answer is
// the node not (a dead one).
func cfCoordinator(t *testing.T, c *cuCluster, seeds []string, group string, not int32) (node, partition int32) {
	t.Helper()
	cl := c.client(seeds)
	defer cl.Close()
	cuWait(t, 60*time.Second, "the coordinator of "+group, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		node, err = -1, nil
		if len(resp.Coordinators) == 1 {
			co := resp.Coordinators[0]
			node, err = co.NodeID, kerr.ErrorForCode(co.ErrorCode)
		} else {
			node, err = resp.NodeID, kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && (node < 1 || node == not) {
			err = fmt.Errorf("coordinator %d", node)
		}
		return err
	})
	adm := kadm.NewClient(cl)
	ctx, cancel := cuCtx()
	defer cancel()
	described, err := adm.DescribeGroups(ctx, group)
	if err == nil && described[group].Coordinator.NodeID != node {
		t.Logf("DescribeGroups names coordinator %d, FindCoordinator %d", described[group].Coordinator.NodeID, node)
	}
	return node, cfOffsetsPartition(t, cl, group, node)
}

// cfOffsetsPartition finds the __consumer_offsets partition of group: the
// one led by the coordinator whose index is Kafka's hash of the group id.
func cfOffsetsPartition(t *testing.T, cl *kgo.Client, group string, coord int32) int32 {
	t.Helper()
	ctx, cancel := cuCtx()
	defer cancel()
	tds, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatalf("describe __consumer_offsets: %v", err)
	}
	n := int32(len(tds["__consumer_offsets"].Partitions))
	if n == 0 {
		t.Fatalf("__consumer_offsets has no partitions")
	}
	h := int32(0)
	for _, b := range []byte(group) {
		h = 31*h + int32(b) // Java's String.hashCode
	}
	p := (h & 0x7fffffff) % n
	if l := tds["__consumer_offsets"].Partitions[p].Leader; l != coord {
		t.Logf("__consumer_offsets-%d is led by %d, the coordinator is %d", p, l, coord)
	}
	return p
}

// cfFetchOffset asks the group's coordinator for its committed offset of
// topic-0, retrying while the coordinator moves or loads.
func cfFetchOffset(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	var got int64 = -1
	cuWait(t, 60*time.Second, "the committed offset of "+group, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		if err := resp.Error(); err != nil {
			return err
		}
		o, ok := resp.Lookup(topic, 0)
		if !ok {
			got = -1
			return nil
		}
		got = o.At
		return nil
	})
	return got
}

// TestNetFaultTxnCoordinatorFailoverKeepsCommits: a transaction whose
// commit the transaction coordinator acknowledged stays committed when
// the coordinator dies right after the acknowledgement. Each round a new
// transactional producer (same transactional id) commits a transaction
// of ten records, the coordinator is killed at once with SIGKILL, and
// the next round's producer initializes on the new coordinator. At the
// end every record of every acknowledged commit must be readable at
// read_committed, once.
//
// It takes half a minute, so it runs with -netfault.all.
func TestNetFaultTxnCoordinatorFailoverKeepsCommits(t *testing.T) {
	if !*nfAll {
		t.Skip("runs with -netfault.all")
	}
	const topic, txnID, rounds = "tcf", "tcf-txn", 4
	c := cuStartCluster(t, 3, 0, "replica.fetch.wait.max.ms=500")
	cl := c.client(nil, kgo.MetadataMinAge(100*time.Millisecond))
	cuCreateTopic(t, cl, topic, 1, 3, nil)
	var want []string
	var kills []string
	for round := range rounds {
		seeds := c.seeds()
		p := c.client(seeds, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionTimeout(5*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := p.BeginTransaction(); err != nil {
			t.Fatalf("round %d: begin: %v", round, err)
		}
		var recs []*kgo.Record
		var vals []string
		for i := range 10 {
			v := fmt.Sprintf("round-%d-%d", round, i)
			vals = append(vals, v)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
		cancel()
		want = append(want, vals...)
		coord := tcfCoordinator(t, c, txnID, -1)
		c.kill(coord) // at once, before the followers hear the new high watermark
		p.Close()
		next := tcfCoordinator(t, c, txnID, coord)
		kills = append(kills, fmt.Sprintf("round %d: coordinator %d killed, %d took over", round, coord, next))
		c.restart(coord)
	}
	t.Log(strings.Join(kills, "; "))
	// Let any transaction the new coordinators consider open time out
	// (5 s) and be aborted, then read.
	time.Sleep(8 * time.Second)
	seen := ctReadCommittedFrom(t, c.seeds(), topic, len(want))
	var missing []string
	for _, v := range want {
		if seen[v] != 1 {
			missing = append(missing, fmt.Sprintf("%s read %d times", v, seen[v]))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d records of acknowledged commits not read once at read_committed: %v", len(missing), len(want), missing)
	}
}

// tcfCoordinator asks the live nodes which node coordinates txnID,
// waiting while the answer is not (a dead node) or an error.
func tcfCoordinator(t *testing.T, c *cuCluster, txnID string, not int32) int32 {
	t.Helper()
	seeds := c.seeds()
	if not > 0 {
		seeds = c.seedsExcept(not)
	}
	cl := c.client(seeds)
	defer cl.Close()
	var node int32
	cuWait(t, 60*time.Second, "the coordinator of "+txnID, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		req.CoordinatorKey, req.CoordinatorKeys = txnID, []string{txnID}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Coordinators) == 1 {
			co := resp.Coordinators[0]
			node, err = co.NodeID, kerr.ErrorForCode(co.ErrorCode)
		} else {
			node, err = resp.NodeID, kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && (node < 1 || node == not) {
			err = fmt.Errorf("coordinator %d", node)
		}
		return err
	})
	return node
}

// ctReadCommittedFrom reads topic at read_committed until want records
// or 30 s, and a second more, counting each value.
func ctReadCommittedFrom(t *testing.T, seeds []string, topic string, want int) map[string]int {
	t.Helper()
	cl := newClient(t, strings.Join(seeds, ","), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
	}
	extra, cancelExtra := context.WithTimeout(context.Background(), time.Second)
	defer cancelExtra()
	cl.PollFetches(extra).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	return seen
}
