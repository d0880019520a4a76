package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterReassignMovesPartitions: a three-node cluster, a topic with
// replication factor 2 placed by hand (partition 0 on brokers 1,2 led by
// 1; partition 1 on 3,1 led by 3). Records are produced (idempotent,
// acks=all) before and while AlterPartitionReassignments moves partition
// 0 to 3,2 and partition 1 to 1,2, so both leaders are removed. Once
// ListPartitionReassignments is empty, Metadata shows the target replicas
// with new leaders, every acknowledged record reads back from them in
// order and exactly once, and the brokers that lost a replica deleted its
// directory. Then, with broker 2 down, a reassignment onto it stays in
// progress (listed with its adding and removing replicas) until it is
// cancelled, which restores the old replicas.
func TestClusterReassignMovesPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	c := newCluster(t)
	cl := newClient(t, strings.Join(c.seeds(), ","))
	adm := kadm.NewClient(cl)
	ctx := testContext(t, 150*time.Second)

	const topic = "ra-moved"
	raCreateAssigned(t, ctx, cl, topic, [][]int32{{1, 2}, {3, 1}})
	raWaitPartitions(t, ctx, adm, topic, map[int32][]int32{0: {1, 2}, 1: {3, 1}}, map[int32]int32{0: 1, 1: 3})

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1<<30),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := map[int32][]string{}
	produce := func(from, to int) error {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			for p := int32(0); p < 2; p++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "ra-%d-%05d", p, i)})
			}
		}
		res := prod.ProduceSync(ctx, recs...)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
			acked[r.Record.Partition] = append(acked[r.Record.Partition], string(r.Record.Value))
		}
		return nil
	}
	const before, during = 1500, 1500
	for i := 0; i < before; i += 100 {
		if err := produce(i, i+100); err != nil {
			t.Fatalf("produce before the move: %v", err)
		}
	}

	// Keep producing while the partitions move.
	done := make(chan error, 1)
	go func() {
		for i := before; i < before+during; i += 50 {
			if err := produce(i, i+50); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{3, 2})
	req.Assign(topic, 1, []int32{1, 2})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatalf("AlterPartitionAssignments: %v", err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			t.Fatalf("reassign %s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked[0]) + len(acked[1])
	}
	atStart := ackedNow()
	start := time.Now()
	sawInProgress := false
	raWaitFor(t, ctx, "the reassignments to complete", func() error {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
		if err != nil {
			return err
		}
		if n := len(l.Sorted()); n > 0 {
			sawInProgress = true
			return fmt.Errorf("%d reassignments in progress: %+v", n, l.Sorted())
		}
		return nil
	})
	moved := time.Since(start)
	atEnd := ackedNow()
	raWaitPartitions(t, ctx, adm, topic, map[int32][]int32{0: {3, 2}, 1: {1, 2}}, nil)
	if err := <-done; err != nil {
		t.Fatalf("produce during the move: %v", err)
	}

	// The removed leaders gave way to target replicas.
	leaders := map[int32]int32{}
	td := raDescribe(t, ctx, adm, topic)
	for p, pd := range td.Partitions {
		leaders[p] = pd.Leader
		if pd.Err != nil {
			t.Fatalf("partition %d: %v", p, pd.Err)
		}
	}
	if l := leaders[0]; l != 3 && l != 2 {
		t.Fatalf("partition 0 led by %d after moving to 3,2", l)
	}
	if l := leaders[1]; l != 1 && l != 2 {
		t.Fatalf("partition 1 led by %d after moving to 1,2", l)
	}

	// Every acknowledged record, from the new leaders, in order, once.
	for p, leader := range leaders {
		got := raReadPartition(t, ctx, []string{fmt.Sprintf("127.0.0.1:%d", c.ports[leader-1])}, topic, p)
		mu.Lock()
		want := acked[p]
		mu.Unlock()
		if len(want) != before+during {
			t.Fatalf("partition %d: %d acknowledged, want %d", p, len(want), before+during)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d: read %d records, acknowledged %d; first difference at %d", p, len(got), len(want), raFirstDiff(got, want))
		}
	}

	// The brokers that lost a replica deleted its directory; the new
	// replicas have theirs.
	dir := func(node int, p int32) string { return filepath.Join(c.dirs[node-1], fmt.Sprintf("%s-%d", topic, p)) }
	raWaitFor(t, ctx, "removed replicas to be deleted", func() error {
		for _, gone := range []string{dir(1, 0), dir(3, 1)} {
			if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s still there (%v)", gone, err)
			}
		}
		return nil
	})
	for _, kept := range []string{dir(3, 0), dir(2, 0), dir(1, 1), dir(2, 1)} {
		if _, err := os.Stat(kept); err != nil {
			t.Fatalf("replica directory %s: %v", kept, err)
		}
	}
	for _, node := range []int{1, 3} {
		entries, err := os.ReadDir(c.dirs[node-1])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), topic+"-"+map[int]string{1: "0", 3: "1"}[node]) {
				t.Fatalf("broker %d still has %s", node, e.Name())
			}
		}
	}

	// Errors as Kafka answers them.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.CancelAssign(topic, 0)           // nothing in progress
	bad.Assign(topic, 7, []int32{1})     // no such partition
	bad.Assign(topic, 1, []int32{1, 1})  // duplicate
	bad.Assign("ra-nope", 0, []int32{1}) // no such topic
	bres, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	wantErr := map[string]error{
		topic + "-0": kerr.NoReassignmentInProgress,
		topic + "-7": kerr.UnknownTopicOrPartition,
		topic + "-1": kerr.InvalidReplicaAssignment,
		"ra-nope-0":  kerr.UnknownTopicOrPartition,
	}
	for _, r := range bres.Sorted() {
		if w := wantErr[fmt.Sprintf("%s-%d", r.Topic, r.Partition)]; !errors.Is(r.Err, w) {
			t.Errorf("%s-%d: %v, want %v", r.Topic, r.Partition, r.Err, w)
		}
	}
	var grow kadm.AlterPartitionAssignmentsReq
	grow.Assign(topic, 0, []int32{1, 2, 3})
	gres, err := adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), grow)
	if err != nil {
		t.Fatal(err)
	}
	if r := gres[topic][0]; !errors.Is(r.Err, kerr.InvalidReplicationFactor) || r.ErrMessage != "The replication factor is changed from 2 to 3" {
		t.Fatalf("RF change with AllowReplicationFactorChange false: %v %q", r.Err, r.ErrMessage)
	}

	// A reassignment onto a broker that is down stays in progress and is
	// listed, until it is cancelled.
	const stuck = "ra-stuck"
	raCreateAssigned(t, ctx, cl, stuck, [][]int32{{1, 3}})
	raWaitPartitions(t, ctx, adm, stuck, map[int32][]int32{0: {1, 3}}, nil)
	c.procs[1].kill()
	var onto kadm.AlterPartitionAssignmentsReq
	onto.Assign(stuck, 0, []int32{1, 2})
	ores, err := adm.AlterPartitionAssignments(ctx, onto)
	if err != nil || ores.Error() != nil {
		t.Fatalf("reassign onto a stopped broker: %v %v", err, ores.Error())
	}
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest() // null topics: all
	var listed kmsg.ListPartitionReassignmentsResponseTopic
	raWaitFor(t, ctx, "the stuck reassignment to be listed", func() error {
		resp, err := lreq.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if resp.ErrorCode != 0 {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("listed %+v", resp.Topics)
		}
		listed = resp.Topics[0]
		return nil
	})
	if listed.Topic != stuck || len(listed.Partitions) != 1 {
		t.Fatalf("listed %+v", listed)
	}
	if lp := listed.Partitions[0]; !slices.Equal(lp.Replicas, []int32{1, 2, 3}) ||
		!slices.Equal(lp.AddingReplicas, []int32{2}) || !slices.Equal(lp.RemovingReplicas, []int32{3}) {
		t.Fatalf("listed partition %+v", lp)
	}
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign(stuck, 0)
	cres, err := adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil || cres.Error() != nil {
		t.Fatalf("cancel: %v %v", err, cres.Error())
	}
	raWaitPartitions(t, ctx, adm, stuck, map[int32][]int32{0: {1, 3}}, nil)
	if l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{stuck: {0: {}}}); err != nil || len(l.Sorted()) != 0 {
		t.Fatalf("listed after cancel: %+v %v", l, err)
	}
	t.Logf("moved 2 partitions (%d records each) in %v while producing (%d acknowledged when the move started, %d when it ended); saw in progress: %v",
		before+during, moved.Round(time.Millisecond), atStart, atEnd, sawInProgress)
}

// raCreateAssigned creates topic with partition i on assignment[i],
// retrying while the cluster is still starting.
func raCreateAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, assignment [][]int32) {
	t.Helper()
	raWaitFor(t, ctx, "topic "+topic+" to be created", func() error {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, replicas := range assignment {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil // an earlier try that timed out did it
		}
		return err
	})
}

// raDescribe returns the topic as Metadata describes it.
func raDescribe(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) kadm.TopicDetail {
	t.Helper()
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return tds[topic]
}

// raWaitPartitions waits until Metadata (from every broker the client
// asks) shows each partition with the given replicas, all of them in the
// ISR, and the given leader where one is named.
func raWaitPartitions(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, replicas map[int32][]int32, leaders map[int32]int32) {
	t.Helper()
	raWaitFor(t, ctx, fmt.Sprintf("%s to have replicas %v", topic, replicas), func() error {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		td := tds[topic]
		if td.Err != nil {
			return td.Err
		}
		for p, want := range replicas {
			pd, ok := td.Partitions[p]
			if !ok {
				return fmt.Errorf("no partition %d", p)
			}
			if !slices.Equal(pd.Replicas, want) {
				return fmt.Errorf("partition %d replicas %v", p, pd.Replicas)
			}
			isr := slices.Sorted(slices.Values(pd.ISR))
			if !slices.Equal(isr, slices.Sorted(slices.Values(want))) {
				return fmt.Errorf("partition %d ISR %v", p, pd.ISR)
			}
			if l, ok := leaders[p]; ok && pd.Leader != l {
				return fmt.Errorf("partition %d leader %d", p, pd.Leader)
			}
			if pd.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p)
			}
		}
		return nil
	})
}

// raReadPartition reads one partition from its start to its end offset.
func raReadPartition(t *testing.T, ctx context.Context, seeds []string, topic string, p int32) []string {
	t.Helper()
	cl := newClient(t, strings.Join(seeds, ","), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, p)
	var out []string
	next := int64(0)
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("partition %d: read %d of %d records", p, next, end.Offset)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("partition %d: offset %d, want %d", p, r.Offset, next)
			}
			out = append(out, string(r.Value))
			next++
		})
	}
	return out
}

func raFirstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// raWaitFor polls cond until it succeeds, failing the test with the last
// error when ctx ends.
func raWaitFor(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
