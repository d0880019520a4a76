package integration

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var nfKnownBugs = flag.Bool("netfault.knownbugs", false, "run the fault tests that fail on a known, reported bug")

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
// Known bug (fails every round): the new coordinator loads the partition
// only up to its high watermark at the moment it becomes leader
// (readPartition in broker/groups.go), which lags the old leader's, so
// the last acknowledged commits are in its log but not in its state; the
// next failover loads them, one commit late. -netfault.knownbugs runs it.
func TestNetFaultCoordinatorFailoverKeepsCommits(t *testing.T) {
	if !*nfKnownBugs {
		t.Skip("known bug: a new group coordinator loads __consumer_offsets only up to its lagging high watermark and " +
			"answers OffsetFetch with the commit before the last acknowledged one (-netfault.knownbugs runs it)")
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
