package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers for the leader-failure tests of the three-node cluster
// (cluster_leaderkill_test.go, cluster_figures_test.go): kill and restart
// a node, ask each node what it knows of a partition, wait for leaders and
// for the ISR to fill again, find the active controller.
//
// Member i of a cluster has node id i+1.

// clusterOps drives a cluster: one client per node, to ask that node alone
// (its own metadata image), and an admin client over all of them.
type clusterOps struct {
	*cluster
	nodes [3]*kgo.Client
	adm   *kadm.Client
}

func newClusterOps(t *testing.T, c *cluster) *clusterOps {
	t.Helper()
	o := &clusterOps{cluster: c}
	for i := range 3 {
		o.nodes[i] = newClient(t, fmt.Sprintf("127.0.0.1:%d", c.ports[i]))
	}
	// Admin requests go to whichever node answers; the short minimum
	// metadata age lets it find the new controller soon after a kill.
	o.adm = kadm.NewClient(newClient(t, strings.Join(c.seeds(), ","), kgo.MetadataMinAge(100*time.Millisecond)))
	return o
}

// member is the cluster member (index) of a node id.
func member(node int32) int { return int(node) - 1 }

// alive reports whether member i's process is running.
func (o *clusterOps) alive(i int) bool {
	p := o.procs[i]
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to member i and waits for the process to be gone.
func (o *clusterOps) kill(i int) { o.procs[i].kill() }

// restart starts member i again on its data dir and ports and waits for
// its start-up line.
func (o *clusterOps) restart(i int) { o.start(i) }

// waitCond polls cond every 100 ms until it holds or d passes; it reports
// whether it held. Polling, not sleeping, keeps the tests robust on a
// loaded machine: d is a generous ceiling, not the expected time.
func waitCond(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTopic creates topic through any node, retrying while the cluster
// settles (a controller election, brokers still fenced), then waits until
// every live node knows a leader for every partition.
func (o *clusterOps) createTopic(t *testing.T, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	var last error
	created := waitCond(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := o.adm.CreateTopic(ctx, partitions, rf, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = nil // an earlier try that timed out on our side went through
		}
		last = err
		return err == nil
	})
	if !created {
		t.Fatalf("create topic %s: %v", topic, last)
	}
	if !waitCond(60*time.Second, func() bool {
		for i := range 3 {
			if !o.alive(i) {
				continue
			}
			view, err := o.partitions(i, topic)
			if err != nil || len(view) != int(partitions) {
				return false
			}
			for _, p := range view {
				if p.Leader < 0 || len(p.ISR) != int(rf) {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("topic %s: partitions have no leader or a short ISR after a minute", topic)
	}
}

// partitions asks member i alone what its metadata image says of topic's
// partitions.
func (o *clusterOps) partitions(i int, topic string) (map[int32]kmsg.MetadataResponseTopicPartition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	seeds := o.nodes[i].SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("node %d: no seed broker", i+1)
	}
	resp, err := req.RequestWith(ctx, seeds[0])
	if err != nil {
		return nil, fmt.Errorf("metadata from node %d: %w", i+1, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata from node %d: %d topics", i+1, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata from node %d for %s: %w", i+1, topic, err)
	}
	out := make(map[int32]kmsg.MetadataResponseTopicPartition)
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p
	}
	return out, nil
}

// leader is the leader of topic/partition by the newest view among the
// live nodes (the highest leader epoch), with that epoch.
func (o *clusterOps) leader(topic string, partition int32) (leader, epoch int32, err error) {
	leader, epoch = -1, -1
	for i := range 3 {
		if !o.alive(i) {
			continue
		}
		view, verr := o.partitions(i, topic)
		if verr != nil {
			err = verr
			continue
		}
		if p, ok := view[partition]; ok && p.LeaderEpoch > epoch {
			leader, epoch = p.Leader, p.LeaderEpoch
		}
	}
	if epoch >= 0 {
		err = nil
	}
	return leader, epoch, err
}

// fullISR reports whether every live node sees every partition of topic
// with its whole replica set in sync and a live leader.
func (o *clusterOps) fullISR(topic string) bool {
	for i := range 3 {
		if !o.alive(i) {
			return false
		}
		view, err := o.partitions(i, topic)
		if err != nil || len(view) == 0 {
			return false
		}
		for _, p := range view {
			if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
	}
	return true
}

// inISR reports whether every live node sees node in the ISR of
// topic/partition.
func (o *clusterOps) inISR(topic string, partition, node int32) bool {
	seen := false
	for i := range 3 {
		if !o.alive(i) {
			continue
		}
		view, err := o.partitions(i, topic)
		if err != nil {
			return false
		}
		p, ok := view[partition]
		if !ok || !slices.Contains(p.ISR, node) {
			return false
		}
		seen = true
	}
	return seen
}

// waitFullISR waits until fullISR holds; it reports whether it did within d.
func (o *clusterOps) waitFullISR(topic string, d time.Duration) bool {
	return waitCond(d, func() bool { return o.fullISR(topic) })
}

// activeController asks the live nodes, through DescribeQuorum (key 55),
// which node leads the metadata quorum; any node forwards the question to
// the active controller.
func (o *clusterOps) activeController() (int32, error) {
	var last error
	for i := range 3 {
		if !o.alive(i) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.DescribeQuorumResponse
		var err error
		if seeds := o.nodes[i].SeedBrokers(); len(seeds) > 0 {
			resp, err = req.RequestWith(ctx, seeds[0])
		} else {
			err = fmt.Errorf("node %d: no seed broker", i+1)
		}
		cancel()
		if err == nil && resp.ErrorCode != 0 {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
			err = fmt.Errorf("describe quorum from node %d: no partition in the answer", i+1)
		}
		if err == nil {
			sp := resp.Topics[0].Partitions[0]
			if err = kerr.ErrorForCode(sp.ErrorCode); err == nil && sp.LeaderID > 0 {
				return sp.LeaderID, nil
			}
			if err == nil {
				err = fmt.Errorf("describe quorum from node %d: no leader", i+1)
			}
		}
		last = err
	}
	if last == nil {
		last = errors.New("no live node")
	}
	return -1, last
}

// durationStats are the median and the maximum of ds.
func durationStats(ds []time.Duration) (median, maximum time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

// TestHistoryCheckerConsumedTruncated: the history checker reports a
// record a consumer read that is no longer in the final log, or that the
// log now holds another record at its offset, or that two reads of one
// offset disagreed.
func TestHistoryCheckerConsumedTruncated(t *testing.T) {
	log := []readRecord{{0, 0, recordValue("a", 0)}, {0, 1, recordValue("a", 1)}}
	good := newHistory()
	good.ack("a", 0, 0, 0)
	good.consume(0, 0, recordValue("a", 0))
	good.consume(0, 0, recordValue("a", 0)) // read again after a rewind: fine
	good.consume(0, 1, recordValue("a", 1))
	if p := good.check(log); len(p) != 0 {
		t.Fatalf("clean history: %v", p)
	}
	for name, consumed := range map[string][]readRecord{
		"truncated": {{0, 2, recordValue("a", 2)}},
		"replaced":  {{0, 1, recordValue("b", 7)}},
		"disagreed": {{0, 0, recordValue("a", 0)}, {0, 0, recordValue("z", 0)}},
	} {
		h := newHistory()
		for _, r := range consumed {
			h.consume(r.partition, r.offset, r.value)
		}
		if p := h.check(log); len(p) == 0 {
			t.Errorf("%s: no problem found", name)
		}
	}
}
