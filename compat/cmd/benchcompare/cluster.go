package main

// The cluster targets of the performance issue, each its own optional
// flag (none is in the default matrix: each takes minutes on this
// machine):
//
//   - -replicated: `gregor perf produce` acks=all to replication factor 3
//     (min.insync.replicas 2) against replication factor 1 on the same
//     three-node cluster, with -brokers kafka the same on a three-node
//     Kafka reference;
//   - -failover: SIGKILL of a partition's leader to the producer's next
//     acknowledged write, every acknowledged record read back after;
//   - -groups: KIP-848 members as raw ConsumerGroupHeartbeat loops, from
//     the first heartbeat to a stable group (every member holds its
//     assignment, no partition twice).
//
// The gregor cluster is the one `make cluster` runs: scripts/cluster.sh
// prints each node's serve arguments (on free ports here), so the
// session and heartbeat settings are those the project ships for dev.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/compat/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterOptions select and size the cluster cases.
type clusterOptions struct {
	replicated     bool
	replRecords    int64
	replPartitions int
	replRounds     int
	failover       bool
	kills          int
	// killController makes the partition's leader the active controller
	// before each kill, so that every kill is the worse case: the quorum
	// must elect a new controller before the partition can move.
	killController bool
	groups         bool
	groupSizes     string // "members x partitions", comma-separated
	groupHeartbeat time.Duration
	// groupIntervals are the group-level consumer.assignment.interval.ms
	// values each size is measured with, comma-separated; "default" is
	// none (the broker's group.consumer.assignment.interval.ms, Kafka's
	// 1 s).
	groupIntervals string
	groupTimeout   time.Duration // how long a group may take to become stable
	// groupTimeline, when not zero, logs the members' progress at this
	// period while a group becomes stable (groupTimeline).
	groupTimeline time.Duration
	// groupClients is how many clients (connections) the members share.
	// A coordinator answers a connection's requests one at a time, as
	// Kafka's, so fewer connections than members queue heartbeats behind
	// each other's appends that Java consumers, one connection each,
	// would not.
	groupClients int
	profile      string // directory for perf(1) profiles of the brokers; empty for none
	kafka        bool
}

func (c clusterOptions) any() bool { return c.replicated || c.failover || c.groups }

// clNode is one `gregor serve` of the three-node cluster.
type clNode struct {
	id   int
	args []string
	addr string // the EXTERNAL (client) listener
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// clCluster is the three-node gregor cluster of scripts/cluster.sh.
type clCluster struct {
	bin   string
	dir   string
	nodes []*clNode
}

// freeBase picks the first client port of scripts/cluster.sh's layout
// (node N: base+2(N-1) for clients, +10000 replication, +10001 quorum,
// base+552+(N-1) HTTP) such that every one of those ports is free now and
// below the ephemeral range (32768 and up on Linux), where an outgoing
// connection could take one between this check and the node's start:
// bases 12000 to 22700, their highest port, base+10005, under 32768.
func freeBase() (int, error) {
	for try := 0; try < 50; try++ {
		var b [2]byte
		rand.Read(b[:])
		base := 12000 + 2*((int(b[0])<<8|int(b[1]))%5350)
		var ports []int
		for n := 0; n < 3; n++ {
			ports = append(ports, base+2*n, base+10000+2*n, base+10001+2*n, base+552+n)
		}
		ok := true
		for _, p := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free port range for a three-node cluster")
}

// startGregorCluster starts the three nodes of scripts/cluster.sh with
// their data under dir and waits until every node knows all three
// brokers.
func startGregorCluster(ctx context.Context, bin, dir string) (*clCluster, error) {
	base, err := freeBase()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	c := &clCluster{bin: bin, dir: dir}
	for n := 1; n <= 3; n++ {
		cmd := exec.CommandContext(ctx, "bash", "../scripts/cluster.sh", "--print", strconv.Itoa(n))
		cmd.Env = append(os.Environ(), "GREGOR_CLUSTER_PORT="+strconv.Itoa(base), "GREGOR_CLUSTER_DIR="+dir)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("scripts/cluster.sh --print %d: %w", n, err)
		}
		args := strings.Split(strings.TrimSpace(string(out)), "\n")
		c.nodes = append(c.nodes, &clNode{id: n, args: args, addr: "127.0.0.1:" + strconv.Itoa(base+2*(n-1)),
			log: filepath.Join(dir, fmt.Sprintf("node%d", n))})
	}
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitBrokers(ctx, 3, 2*time.Minute); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// start runs node n (again: a restart keeps its data and ports).
func (c *clCluster) start(n *clNode) error {
	n.runs++
	logPath := fmt.Sprintf("%s-%d.log", n.log, n.runs)
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("start node %d: %w", n.id, err)
	}
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start node %d: %w", n.id, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	done := n.done
	go func() { cmd.Wait(); f.Close(); close(done) }()
	return nil
}

// kill SIGKILLs node n and waits for it to exit.
func (c *clCluster) kill(n *clNode) {
	n.cmd.Process.Kill()
	<-n.done
}

// stop ends every running node with SIGTERM, SIGKILL after 20 s.
func (c *clCluster) stop() {
	for _, n := range c.nodes {
		if n.cmd != nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.done:
		case <-time.After(20 * time.Second):
			n.cmd.Process.Kill()
			<-n.done
		}
	}
}

func (c *clCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr)
	}
	return s
}

func (c *clCluster) pids() []int {
	var p []int
	for _, n := range c.nodes {
		p = append(p, n.cmd.Process.Pid)
	}
	return p
}

// waitBrokers waits until Metadata from the cluster lists want brokers.
func (c *clCluster) waitBrokers(ctx context.Context, want int, timeout time.Duration) error {
	cl, adm, err := clAdmin(c.seeds())
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFor(ctx, timeout, func(ctx context.Context) error {
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return err
		}
		if len(bs) != want {
			return fmt.Errorf("%d brokers registered, want %d", len(bs), want)
		}
		return nil
	})
}

// waitFor calls f every 100 ms until it returns nil or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(cctx, 10*time.Second)
		err := f(rctx)
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("after %v: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clAdmin is adminClient over several seeds.
func clAdmin(seeds []string) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("bench-compare"), kgo.RequestTimeoutOverhead(5*time.Minute))
	if err != nil {
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32((5 * time.Minute).Milliseconds()))
	return cl, adm, nil
}

// createReplicated creates topic with partitions partitions of
// replication factor rf (min.insync.replicas 2 when rf is 3, else 1) and waits
// until every partition has a leader answering and, for rf 3, all three
// replicas in sync.
func createReplicated(ctx context.Context, adm *kadm.Client, topic string, partitions int, rf int16) error {
	// Explicit for both: scripts/cluster.sh sets min.insync.replicas=2
	// for the whole cluster, which an RF 1 topic can never meet (acks=all
	// would be refused with NOT_ENOUGH_REPLICAS and retried for ever).
	minISR := "1"
	if rf == 3 {
		minISR = "2"
	}
	cfg := map[string]*string{"min.insync.replicas": kadm.StringPtr(minISR)}
	if _, err := adm.CreateTopic(ctx, int32(partitions), rf, cfg, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return waitFor(ctx, 5*time.Minute, func(ctx context.Context) error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		t := md.Topics[topic]
		if t.Err != nil {
			return t.Err
		}
		if len(t.Partitions) != partitions {
			return fmt.Errorf("%d partitions of %d", len(t.Partitions), partitions)
		}
		for _, p := range t.Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) != int(rf) {
				return fmt.Errorf("partition %d: leader %d, ISR %v, err %v", p.Partition, p.Leader, p.ISR, p.Err)
			}
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
}

// cpuOf is the CPU ticks of each of pids.
func cpuOf(pids []int) ([]int64, error) {
	out := make([]int64, len(pids))
	for i, p := range pids {
		t, err := procCPU(p)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// replRun is one `gregor perf produce` of the replicated case.
type replRun struct {
	MiBPS, CPUPerGiB, P99 float64
	// ClientCPUPerGiB is the producer's (gregor perf produce) CPU
	// seconds per GiB: on shared cores the ratio of RF 3 to RF 1 is
	// bounded by it against the brokers'.
	ClientCPUPerGiB float64
	// NodeCPUPerGiB is each broker's CPU seconds per GiB produced, in the
	// order of the pids; Load the load average when the run ended.
	NodeCPUPerGiB []float64
	Load          float64
}

// perfProduceOn runs gregor perf produce acks=all against bootstrap and
// reads the CPU time of pids (the brokers) around it.
func perfProduceOn(ctx context.Context, bin, bootstrap, topic string, records int64, pids []int, tick float64) (replRun, error) {
	args := []string{"perf", "produce", "--bootstrap", bootstrap, "--topic", topic, "--records", strconv.FormatInt(records, 10),
		"--record-size", "1024", "--acks", "all", "--json"}
	before, err := cpuOf(pids)
	if err != nil {
		return replRun{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return replRun{}, fmt.Errorf("perf produce to %s: %w\n%s", topic, err, stderr.String())
	}
	after, err := cpuOf(pids)
	if err != nil {
		return replRun{}, err
	}
	r, err := parsePerfJSON(out, "produce")
	if err != nil {
		return replRun{}, err
	}
	if r.Records != records {
		return replRun{}, fmt.Errorf("perf produce to %s: %d records acknowledged of %d", topic, r.Records, records)
	}
	gib := float64(r.Bytes) / (1 << 30)
	run := replRun{MiBPS: r.MiBPerS}
	if ps := cmd.ProcessState; ps != nil {
		run.ClientCPUPerGiB = (ps.UserTime() + ps.SystemTime()).Seconds() / gib
	}
	for i := range pids {
		node := float64(after[i]-before[i]) / tick / gib
		run.NodeCPUPerGiB = append(run.NodeCPUPerGiB, node)
		run.CPUPerGiB += node
	}
	if r.Latency != nil {
		run.P99 = r.Latency.P99
	}
	if s, err := os.ReadFile("/proc/loadavg"); err == nil {
		run.Load, _ = loadAvg(string(s))
	}
	return run, nil
}

// replicated measures RF 3 against RF 1 on one cluster (seeds, pids),
// the two taking turns going first over rounds, on fresh topics deleted
// after each round. It returns the medians.
func replicated(ctx context.Context, o clusterOptions, name, bin string, seeds []string, pids []int, tick float64) (rf3, rf1 replRun, err error) {
	cl, adm, err := clAdmin(seeds)
	if err != nil {
		return rf3, rf1, err
	}
	defer cl.Close()
	var r3, r1 []replRun
	bootstrap := strings.Join(seeds, ",")
	for round := 1; round <= o.replRounds; round++ {
		t3, t1 := fmt.Sprintf("repl-rf3-%d", round), fmt.Sprintf("repl-rf1-%d", round)
		if err := createReplicated(ctx, adm, t3, o.replPartitions, 3); err != nil {
			return rf3, rf1, err
		}
		if err := createReplicated(ctx, adm, t1, o.replPartitions, 1); err != nil {
			return rf3, rf1, err
		}
		order := []string{t3, t1}
		if round%2 == 0 {
			order = []string{t1, t3}
		}
		for _, t := range order {
			run, err := perfProduceOn(ctx, bin, bootstrap, t, o.replRecords, pids, tick)
			if err != nil {
				return rf3, rf1, fmt.Errorf("%s round %d: %w", name, round, err)
			}
			slog.Info("replicated", "broker", name, "round", round, "topic", t, "MiB/s", fmtNum(run.MiBPS, 1),
				"cpu_s_per_GiB", fmtNum(run.CPUPerGiB, 2), "per_node", fmtNodes(run.NodeCPUPerGiB),
				"client_cpu_s_per_GiB", fmtNum(run.ClientCPUPerGiB, 2), "load", fmtNum(run.Load, 1))
			if t == t3 {
				r3 = append(r3, run)
			} else {
				r1 = append(r1, run)
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := adm.DeleteTopics(dctx, t3, t1)
		cancel()
		if err != nil {
			slog.Warn("delete topics", "broker", name, "err", err)
		}
	}
	med := func(rs []replRun) replRun {
		var m, c, p, l, cc []float64
		nodes := make([][]float64, len(pids))
		for _, r := range rs {
			m, c, p, l = append(m, r.MiBPS), append(c, r.CPUPerGiB), append(p, r.P99), append(l, r.Load)
			cc = append(cc, r.ClientCPUPerGiB)
			for i, n := range r.NodeCPUPerGiB {
				nodes[i] = append(nodes[i], n)
			}
		}
		out := replRun{MiBPS: median(m), CPUPerGiB: median(c), P99: median(p), Load: median(l), ClientCPUPerGiB: median(cc)}
		for _, n := range nodes {
			out.NodeCPUPerGiB = append(out.NodeCPUPerGiB, median(n))
		}
		return out
	}
	return med(r3), med(r1), nil
}

// ack is one acknowledged record of the failover producer.
type ack struct {
	seq    int64
	offset int64
	at     time.Time
}

// failoverResult is one kill.
type failoverResult struct {
	node       int
	controller bool
	took       time.Duration
}

// activeController asks the metadata quorum which node leads it.
func activeController(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("describe quorum: no partition in the answer")
	}
	return resp.Topics[0].Partitions[0].LeaderID, nil
}

// leaderOf returns the leader of topic's partition 0.
func leaderOf(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	return md.Topics[topic].Partitions[0].Leader, nil
}

// moveLeaderTo makes node the leader of topic's partition 0: it becomes
// the first of the same replicas and the preferred leader is elected,
// until the metadata names it (its replica may first need to catch up).
func moveLeaderTo(ctx context.Context, adm *kadm.Client, topic string, node int32, replicas []int32) error {
	order := append([]int32{node}, slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return r == node })...)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, order)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("reorder the replicas of %s to %v: %w", topic, order, err)
	}
	return waitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}}); err != nil {
			return fmt.Errorf("elect the preferred leader of %s: %w", topic, err)
		}
		leader, err := leaderOf(ctx, adm, topic)
		if err == nil && leader != node {
			err = fmt.Errorf("the leader of %s is %d, not %d", topic, leader, node)
		}
		return err
	})
}

// failover kills the leader of a one-partition RF 3 topic o.kills times
// while one idempotent producer writes to it, and measures each kill to
// the producer's next acknowledgement. It then reads the partition back
// and returns the number of acknowledged records missing from it.
func failover(ctx context.Context, o clusterOptions, c *clCluster) (res []failoverResult, acked, lost, dups int64, err error) {
	cl, adm, err := clAdmin(c.seeds())
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer cl.Close()
	const topic = "failover"
	if err := createReplicated(ctx, adm, topic, 1, 3); err != nil {
		return nil, 0, 0, 0, err
	}
	// The producer refreshes metadata at most every 100 ms, as the Java
	// producer does after a NOT_LEADER error (retry.backoff.ms 100);
	// franz-go's default minimum age of 5 s would be the client's, not
	// the cluster's, failover time.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("producer: %w", err)
	}
	var (
		mu            sync.Mutex
		acks          []ack
		failed        atomic.Int64
		stopped       = make(chan struct{})
		pctx, pcancel = context.WithCancel(ctx)
	)
	go func() {
		defer close(stopped)
		for seq := int64(0); pctx.Err() == nil; seq++ {
			r := &kgo.Record{Value: []byte(strconv.FormatInt(seq, 10))}
			if err := prod.ProduceSync(pctx, r).FirstErr(); err != nil {
				failed.Add(1)
				continue
			}
			mu.Lock()
			acks = append(acks, ack{seq: seq, offset: r.Offset, at: time.Now()})
			mu.Unlock()
		}
	}()
	defer func() {
		pcancel()
		<-stopped
		prod.Close()
	}()
	ackedSince := func(t time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		if n := len(acks); n > 0 && acks[n-1].at.After(t) {
			i, _ := slices.BinarySearchFunc(acks, t, func(a ack, t time.Time) int { return a.at.Compare(t) })
			for i < n && !acks[i].at.After(t) {
				i++
			}
			return acks[i].at, true
		}
		return time.Time{}, false
	}
	for k := 1; k <= o.kills; k++ {
		// A full ISR and the producer writing before each kill.
		if err := createReplicated(ctx, adm, topic, 1, 3); err != nil {
			return res, 0, 0, 0, fmt.Errorf("kill %d: the replicas did not catch up: %w", k, err)
		}
		if err := waitFor(ctx, time.Minute, func(context.Context) error {
			if _, ok := ackedSince(time.Now().Add(-200 * time.Millisecond)); !ok {
				return errors.New("no acknowledgement in the last 200 ms")
			}
			return nil
		}); err != nil {
			return res, 0, 0, 0, fmt.Errorf("kill %d: %w", k, err)
		}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return res, 0, 0, 0, fmt.Errorf("kill %d: %w", k, err)
		}
		leader := md.Topics[topic].Partitions[0].Leader
		ctrl, err := activeController(ctx, cl)
		if err != nil {
			slog.Warn("active controller unknown", "err", err)
		}
		if o.killController && err == nil && ctrl != leader {
			if err := moveLeaderTo(ctx, adm, topic, ctrl, md.Topics[topic].Partitions[0].Replicas); err != nil {
				return res, 0, 0, 0, fmt.Errorf("kill %d: %w", k, err)
			}
			k-- // again from the checks above, with the leader moved
			continue
		}
		if leader < 1 || int(leader) > len(c.nodes) {
			return res, 0, 0, 0, fmt.Errorf("kill %d: leader %d is not a node of the cluster", k, leader)
		}
		n := c.nodes[leader-1]
		killAt := time.Now()
		c.kill(n)
		var next time.Time
		if err := waitFor(ctx, 2*time.Minute, func(context.Context) error {
			t, ok := ackedSince(killAt)
			if !ok {
				return errors.New("no acknowledgement since the kill")
			}
			next = t
			return nil
		}); err != nil {
			return res, 0, 0, 0, fmt.Errorf("kill %d of node %d: %w", k, leader, err)
		}
		r := failoverResult{node: int(leader), controller: ctrl == leader, took: next.Sub(killAt)}
		// An acknowledgement within 20 ms of the kill means the node
		// was no longer the leader: the Metadata answer was older than
		// a leadership move (the preferred leader coming back after its
		// restart). Such a kill measures nothing and is not counted. A
		// real failover takes longer: the survivors learn of the death
		// by a dial refused after a 20 ms backoff
		// (controller.quorum.retry.backoff.ms), and a wrong kill is
		// followed by an acknowledgement within a millisecond.
		if r.took < 20*time.Millisecond {
			slog.Warn("failover: the killed node was not the leader any more; not counted", "kill", k, "node", leader, "took", r.took)
			k--
		} else {
			res = append(res, r)
		}
		slog.Info("failover", "kill", k, "node", leader, "active_controller", r.controller, "took", r.took.Round(time.Millisecond))
		if err := c.start(n); err != nil {
			return res, 0, 0, 0, err
		}
		if err := c.waitBrokers(ctx, 3, 2*time.Minute); err != nil {
			return res, 0, 0, 0, fmt.Errorf("restart node %d: %w", leader, err)
		}
	}
	pcancel()
	<-stopped

	// Read the partition back from the start to its end.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return res, 0, 0, 0, fmt.Errorf("end offset of %s: %v %v", topic, err, ends.Error())
	}
	end, _ := ends.Lookup(topic, 0)
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return res, 0, 0, 0, fmt.Errorf("consumer: %w", err)
	}
	defer cons.Close()
	seen := map[int64]int64{} // seq -> offset
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for read := int64(0); read < end.Offset; {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			return res, 0, 0, 0, fmt.Errorf("read back %s: %d of %d records", topic, read, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read = r.Offset + 1
			seq, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				return
			}
			if _, dup := seen[seq]; dup {
				dups++
			}
			seen[seq] = r.Offset
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		if off, ok := seen[a.seq]; !ok || off != a.offset {
			lost++
		}
	}
	slog.Info("read back", "acknowledged", len(acks), "in_log", end.Offset, "lost", lost, "duplicates", dups, "failed_sends", failed.Load())
	return res, int64(len(acks)), lost, dups, nil
}

// groupSize is one -groups measurement: members over partitions.
type groupSize struct{ members, partitions int }

func parseGroupSizes(s string) ([]groupSize, error) {
	var out []groupSize
	for _, f := range strings.Split(s, ",") {
		m, p, ok := strings.Cut(strings.TrimSpace(f), "x")
		mi, err1 := strconv.Atoi(m)
		pi, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || mi < 1 || pi < 1 {
			return nil, fmt.Errorf("-groups-sizes: %q is not MEMBERSxPARTITIONS", f)
		}
		out = append(out, groupSize{mi, pi})
	}
	return out, nil
}

// tp is a partition of a topic by id.
type tp struct {
	topic     [16]byte
	partition int32
}

// hbMember is one KIP-848 member: its id, epoch and the partitions it
// holds (which it reconciles to at once: it owns nothing to commit).
type hbMember struct {
	id    string
	epoch int32
	owned []tp
}

// groupStable measures one group of size.members consumer-protocol
// members subscribed to topics (whose partitions sum to size.partitions)
// from their first heartbeats to the first moment every member holds its
// assignment at one epoch and the assignments cover every partition
// exactly once, provided the coordinator's ConsumerGroupDescribe then
// agrees (describedStable). Each member heartbeats again at once when its
// assignment changed (acknowledging it, as the Java consumer does after
// reconciling) and otherwise after the interval the coordinator gives.
func groupStable(ctx context.Context, addr, group string, topics []string, size groupSize, clients int, timeout, timeline time.Duration, cpu func() float64) (took time.Duration, cpuSeconds float64, errCount int64, err error) {
	var cls []*kgo.Client
	for i := 0; i < clients; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("bench-hb-%d", i)))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("heartbeat client: %w", err)
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	// The group's coordinator ready first: the first group request of a
	// fresh broker creates __consumer_offsets, which is not what this
	// measures.
	if err := waitFor(ctx, 5*time.Minute, func(ctx context.Context) error {
		_, err := kadm.NewClient(cls[0]).FetchOffsets(ctx, group)
		return err
	}); err != nil {
		return 0, 0, 0, fmt.Errorf("coordinator of %s: %w", group, err)
	}
	// Every client connected to the coordinator and knowing it before
	// the clock starts: the measure is from the first heartbeat, and a
	// client's first request also dials, asks ApiVersions and finds the
	// coordinator, which at a load of 20 took most of a second.
	warmErrs := make([]error, len(cls))
	var warm sync.WaitGroup
	for i, cl := range cls[1:] {
		warm.Go(func() {
			if _, err := kadm.NewClient(cl).FetchOffsets(ctx, group); err != nil {
				warmErrs[i] = fmt.Errorf("connect a heartbeat client to the coordinator of %s: %w", group, err)
			}
		})
	}
	warm.Wait()
	if err := errors.Join(warmErrs...); err != nil {
		return 0, 0, 0, err
	}
	members := make([]hbMember, size.members)
	var mu sync.Mutex
	for i := range members {
		var b [16]byte
		rand.Read(b[:])
		members[i].id = hex.EncodeToString(b[:])
	}
	var errs atomic.Int64
	var rtts rttStats
	gctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	cpu0 := cpu()
	start := time.Now()
	for i := range members {
		wg.Add(1)
		go func(i int, cl *kgo.Client) {
			defer wg.Done()
			mu.Lock()
			id := members[i].id
			mu.Unlock()
			epoch := int32(0)
			var owned []tp
			ownedChanged := true
			for gctx.Err() == nil {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Group, req.MemberID, req.MemberEpoch = group, id, epoch
				if epoch == 0 {
					req.RebalanceTimeoutMillis = 60000
					req.SubscribedTopicNames = topics
				}
				if ownedChanged {
					req.Topics = ownedTopics(owned)
				}
				sent := time.Now()
				resp, err := req.RequestWith(gctx, cl)
				rtts.add(time.Since(sent))
				if err != nil {
					if gctx.Err() == nil {
						errs.Add(1)
						slog.Debug("heartbeat", "member", i, "err", err)
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				hbErr := kerr.ErrorForCode(resp.ErrorCode)
				if hbErr != nil {
					slog.Debug("heartbeat", "member", i, "err", hbErr)
				}
				switch hbErr {
				case nil:
				case kerr.UnknownMemberID, kerr.FencedMemberEpoch:
					errs.Add(1)
					epoch, owned, ownedChanged = 0, nil, true
					continue
				default:
					errs.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				epoch = resp.MemberEpoch
				ownedChanged = false
				if resp.Assignment != nil {
					owned = owned[:0:0]
					for _, t := range resp.Assignment.Topics {
						for _, p := range t.Partitions {
							owned = append(owned, tp{t.TopicID, p})
						}
					}
					ownedChanged = true
				}
				mu.Lock()
				members[i].epoch, members[i].owned = epoch, owned
				mu.Unlock()
				if ownedChanged {
					continue
				}
				wait := time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
				select {
				case <-gctx.Done():
				case <-time.After(wait):
				}
			}
			// Leave, so the next measurement's group is alone.
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = group, id, -1
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			req.RequestWith(lctx, cl)
			lcancel()
		}(i, cls[i%len(cls)])
	}
	defer func() { cancel(); wg.Wait() }()
	var described time.Time // the last describe that did not agree; at most one per 100 ms
	var tick <-chan time.Time
	if timeline > 0 {
		t := time.NewTicker(timeline)
		defer t.Stop()
		tick = t.C
	}
	for {
		if time.Since(start) > timeout {
			return 0, 0, errs.Load(), fmt.Errorf("group %s of %d members over %d partitions not stable after %v (%d error answers)",
				group, size.members, size.partitions, timeout, errs.Load())
		}
		mu.Lock()
		stable := isStable(members, size.partitions)
		mu.Unlock()
		if stable && time.Since(described) >= 100*time.Millisecond {
			described = time.Now()
			// The members' view agrees; the coordinator's must too,
			// as Kafka's tools read it (kafka-consumer-groups
			// --describe --state), or the wait goes on.
			took := time.Since(start)
			ok, why, err := describedStable(ctx, cls[0], group, size)
			if err != nil {
				return 0, 0, errs.Load(), err
			}
			if ok {
				return took, cpu() - cpu0, errs.Load(), nil
			}
			slog.Info("the members hold their assignment, the coordinator's describe does not agree yet", "t", took.Round(time.Millisecond), "why", why)
		}
		select {
		case <-ctx.Done():
			return 0, 0, errs.Load(), ctx.Err()
		case <-tick:
			mu.Lock()
			logProgress(time.Since(start), members, &rtts)
			mu.Unlock()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// rttStats sums the heartbeats' round trips since the last progress line.
type rttStats struct {
	mu    sync.Mutex
	n     int
	sum   time.Duration
	worst time.Duration
}

func (r *rttStats) add(d time.Duration) {
	r.mu.Lock()
	r.n++
	r.sum += d
	r.worst = max(r.worst, d)
	r.mu.Unlock()
}

// take returns the window's count, mean and worst round trip and starts
// a new window.
func (r *rttStats) take() (int, time.Duration, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, sum, worst := r.n, r.sum, r.worst
	r.n, r.sum, r.worst = 0, 0, 0
	if n == 0 {
		return 0, 0, 0
	}
	return n, sum / time.Duration(n), worst
}

// logProgress logs where the members are at t: how many joined, the
// member epochs they are at (the most common first), how many hold
// partitions and how many partitions are held, and the heartbeats' round
// trips since the last line.
func logProgress(t time.Duration, members []hbMember, rtts *rttStats) {
	joined, holders, held := 0, 0, 0
	epochs := map[int32]int{}
	for _, m := range members {
		if m.epoch == 0 {
			continue
		}
		joined++
		epochs[m.epoch]++
		if len(m.owned) > 0 {
			holders++
			held += len(m.owned)
		}
	}
	keys := slices.Collect(maps.Keys(epochs))
	slices.SortFunc(keys, func(a, b int32) int { return epochs[b] - epochs[a] })
	var es []string
	for i, e := range keys {
		if i == 4 {
			es = append(es, fmt.Sprintf("+%d more", len(keys)-4))
			break
		}
		es = append(es, fmt.Sprintf("%d:%d", e, epochs[e]))
	}
	n, mean, worst := rtts.take()
	slog.Info("group progress", "t", t.Round(time.Millisecond), "joined", joined, "epochs", strings.Join(es, " "),
		"holders", holders, "held", held, "heartbeats", n, "rtt_mean", mean.Round(100*time.Microsecond), "rtt_max", worst.Round(100*time.Microsecond))
}

// ownedTopics is a member's owned partitions as a heartbeat sends them
// (an empty, not nil, list when it owns none).
func ownedTopics(owned []tp) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	idx := map[[16]byte]int{}
	for _, p := range owned {
		i, ok := idx[p.topic]
		if !ok {
			i = len(out)
			idx[p.topic] = i
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID = p.topic
			out = append(out, t)
		}
		out[i].Partitions = append(out[i].Partitions, p.partition)
	}
	return out
}

// describedStable reports whether ConsumerGroupDescribe shows the group as
// Kafka's tools count it stable: state Stable, its target assignment at
// the group epoch, every member at that epoch and every partition
// assigned once; else why not.
func describedStable(ctx context.Context, cl *kgo.Client, group string, size groupSize) (bool, string, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, "", fmt.Errorf("describe %s: %w", group, err)
	}
	if len(resp.Groups) != 1 {
		return false, "", fmt.Errorf("describe %s: %d groups answered", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return false, "", fmt.Errorf("describe %s: %w", group, err)
	}
	switch {
	case g.State != "Stable":
		return false, "state " + g.State, nil
	case g.Epoch != g.AssignmentEpoch:
		return false, fmt.Sprintf("group epoch %d, assignment epoch %d", g.Epoch, g.AssignmentEpoch), nil
	case len(g.Members) != size.members:
		return false, fmt.Sprintf("%d members", len(g.Members)), nil
	}
	seen := make(map[tp]struct{}, size.partitions)
	for _, m := range g.Members {
		if m.MemberEpoch != g.Epoch {
			return false, fmt.Sprintf("member %s at epoch %d, group at %d", m.MemberID, m.MemberEpoch, g.Epoch), nil
		}
		for _, t := range m.Assignment.TopicPartitions {
			for _, p := range t.Partitions {
				seen[tp{t.TopicID, p}] = struct{}{}
			}
		}
	}
	if len(seen) != size.partitions {
		return false, fmt.Sprintf("%d of %d partitions assigned", len(seen), size.partitions), nil
	}
	return true, "", nil
}

// isStable reports whether every member has joined at one epoch, each
// holds at least one partition (when there are enough) and together they
// hold every one of partitions exactly once.
func isStable(members []hbMember, partitions int) bool {
	epoch := members[0].epoch
	seen := make(map[tp]struct{}, partitions)
	for _, m := range members {
		if m.epoch == 0 || m.epoch != epoch {
			return false
		}
		if len(m.owned) == 0 && len(members) <= partitions {
			return false
		}
		for _, p := range m.owned {
			if _, dup := seen[p]; dup {
				return false
			}
			seen[p] = struct{}{}
		}
	}
	return len(seen) == partitions
}

// profileBrokers records a perf(1) CPU profile (with call graphs) of
// pids under dir/name.data until stop is called, when dir is not empty.
func profileBrokers(dir, name string, pids []int) (stop func()) {
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		slog.Warn("profile", "err", err)
		return func() {}
	}
	var ps []string
	for _, p := range pids {
		ps = append(ps, strconv.Itoa(p))
	}
	out := filepath.Join(dir, name+".data")
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-o", out, "-p", strings.Join(ps, ","))
	if err := cmd.Start(); err != nil {
		slog.Warn("profile: perf record", "err", err)
		return func() {}
	}
	return func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		slog.Info("profile written", "file", out, "report", "perf report -i "+out+" --no-children")
	}
}

// runCluster runs the cluster cases o asks for and returns the report's
// lines.
func runCluster(ctx context.Context, o clusterOptions, work, bin string, tick float64, m *machine) ([]figure, error) {
	var figs []figure
	sample := func() {
		if s, err := os.ReadFile("/proc/loadavg"); err == nil {
			if l, err := loadAvg(string(s)); err == nil {
				m.LoadMax = max(m.LoadMax, l)
			}
		}
	}
	if o.replicated || o.failover {
		dir := filepath.Join(work, "cluster")
		c, err := startGregorCluster(ctx, bin, dir)
		if err != nil {
			return nil, err
		}
		defer c.stop()
		slog.Info("gregor cluster up", "seeds", c.seeds())
		if o.replicated {
			sample()
			stop := profileBrokers(o.profile, "replicated", c.pids())
			rf3, rf1, err := replicated(ctx, o, "gregor", bin, c.seeds(), c.pids(), tick)
			stop()
			if err != nil {
				return nil, err
			}
			figs = append(figs, replFigures("gregor", o, rf3, rf1)...)
			if o.kafka {
				kf, err := kafkaReplicated(ctx, o, work, bin, tick)
				if err != nil {
					return nil, err
				}
				figs = append(figs, kf...)
			}
		}
		if o.failover {
			sample()
			res, acked, lost, dups, err := failover(ctx, o, c)
			if err != nil {
				return nil, err
			}
			figs = append(figs, failoverFigures(res, acked, lost, dups)...)
		}
	}
	if o.groups {
		sample()
		gf, err := groupsFigures(ctx, o, work, bin, tick)
		if err != nil {
			return nil, err
		}
		figs = append(figs, gf...)
	}
	return figs, nil
}

func replFigures(name string, o clusterOptions, rf3, rf1 replRun) []figure {
	r := rf3.MiBPS / rf1.MiBPS
	ratio := figure{What: fmt.Sprintf("%s: RF 3 over RF 1", name), Value: fmt.Sprintf("%.2f×", r)}
	if name == "gregor" {
		// The target is gregor's; Kafka's ratio is the reference.
		ratio.Target, ratio.Met = "≥ 0.7×", met848(r >= 0.7)
	}
	return []figure{
		{What: fmt.Sprintf("%s: produce acks=all, RF 3 (min ISR 2), %d partitions, %s x 1 KiB, median of %d", name, o.replPartitions, groupDigits(int(o.replRecords)), o.replRounds),
			Value: replValue(rf3)},
		{What: fmt.Sprintf("%s: the same, RF 1", name), Value: replValue(rf1)},
		ratio,
	}
}

// replValue is a replicated figure: MiB/s, the brokers' CPU per GiB
// produced in all and each broker's, the client's (medians of the
// rounds), the p99 and the median load average at the runs' ends.
func replValue(r replRun) string {
	return fmt.Sprintf("%.1f MiB/s, %.2f CPU s/GiB (3 brokers; per node %s; client %.2f), p99 %.0f ms, load %.1f",
		r.MiBPS, r.CPUPerGiB, fmtNodes(r.NodeCPUPerGiB), r.ClientCPUPerGiB, r.P99, r.Load)
}

// fmtNodes is each broker's CPU s/GiB, slash-separated.
func fmtNodes(ns []float64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmtNum(n, 2)
	}
	return strings.Join(parts, "/")
}

// kafkaReplicated runs the replicated case on a three-node Kafka
// reference (KRaft combined nodes), started and stopped here.
func kafkaReplicated(ctx context.Context, o clusterOptions, work, bin string, tick float64) ([]figure, error) {
	script, err := filepath.Abs("kafka-ref/kafka-ref.sh")
	if err != nil {
		return nil, err
	}
	k, err := harness.StartKafkaRef(ctx, script, filepath.Join(work, "kafka-cluster"), 3, nil)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	var pids []int
	for i := 1; i <= 3; i++ {
		p, err := k.Pid(i)
		if err != nil {
			return nil, err
		}
		pids = append(pids, p)
	}
	rf3, rf1, err := replicated(ctx, o, "Kafka", bin, strings.Split(k.Addr, ","), pids, tick)
	if err != nil {
		return nil, err
	}
	return replFigures("Kafka 3 nodes", o, rf3, rf1), nil
}

func failoverFigures(res []failoverResult, acked, lost, dups int64) []figure {
	var all, plain, ctrl []float64
	for _, r := range res {
		s := r.took.Seconds()
		all = append(all, s)
		if r.controller {
			ctrl = append(ctrl, s)
		} else {
			plain = append(plain, s)
		}
	}
	line := func(xs []float64) string {
		if len(xs) == 0 {
			return "none"
		}
		return fmt.Sprintf("median %.2f s, max %.2f s", median(xs), slices.Max(xs))
	}
	return []figure{
		{What: fmt.Sprintf("leader failover, SIGKILL of the leader to the next acknowledged write (%d kills)", len(all)),
			Value: line(all), Target: "≤ 1 s", Met: met848(len(all) > 0 && slices.Max(all) <= 1)},
		{What: fmt.Sprintf("— the killed node led the partition only (%d kills)", len(plain)), Value: line(plain)},
		{What: fmt.Sprintf("— the killed node was also the active controller (%d kills)", len(ctrl)), Value: line(ctrl)},
		{What: "acknowledged records read back after the kills", Value: fmt.Sprintf("%d of %d (%d lost, %d duplicated)", acked-lost, acked, lost, dups),
			Target: "none lost", Met: met848(lost == 0)},
	}
}

// groupsFigures starts a single gregor with the KIP-848 heartbeat
// interval o.groupHeartbeat, creates topics of 1,000 partitions up to the
// largest size, and measures each size on a group of its own.
func groupsFigures(ctx context.Context, o clusterOptions, work, bin string, tick float64) ([]figure, error) {
	sizes, err := parseGroupSizes(o.groupSizes)
	if err != nil {
		return nil, err
	}
	if o.groupClients < 1 {
		return nil, fmt.Errorf("-groups-clients %d: at least one client", o.groupClients)
	}
	hb := strconv.FormatInt(o.groupHeartbeat.Milliseconds(), 10)
	g, err := harness.Start(bin, work, harness.Options{Props: map[string]string{
		"group.consumer.min.heartbeat.interval.ms": hb,
		"group.consumer.heartbeat.interval.ms":     hb,
	}, StartTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	cl, adm, err := clAdmin([]string{g.Addr})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	most := 0
	for _, s := range sizes {
		most = max(most, s.partitions)
	}
	// Topics of 1,000 partitions (the last one smaller), as many as the
	// largest size needs; a size uses the first ones up to its count, so
	// its partition count must be whole topics but for the last.
	var topics []string
	var counts []int
	start := time.Now()
	for left := most; left > 0; left -= 1000 {
		n := min(left, 1000)
		t := fmt.Sprintf("groups-%d", len(topics))
		if err := createTopic(ctx, adm, t, n); err != nil {
			return nil, err
		}
		topics, counts = append(topics, t), append(counts, n)
	}
	slog.Info("created the groups' topics", "partitions", most, "took", time.Since(start).Round(time.Millisecond))
	intervals, err := parseGroupIntervals(o.groupIntervals)
	if err != nil {
		return nil, err
	}
	var figs []figure
	run := 0
	for _, s := range sizes {
		var use []string
		sum := 0
		for j := range topics {
			if sum >= s.partitions {
				break
			}
			use = append(use, topics[j])
			sum += counts[j]
		}
		if sum != s.partitions {
			return nil, fmt.Errorf("-groups-sizes: %d partitions is not a sum of whole topics of 1,000", s.partitions)
		}
		for _, iv := range intervals {
			group := fmt.Sprintf("bench-group-%d", run)
			run++
			name := fmt.Sprintf("groups-%dx%d", s.members, s.partitions)
			what := "default"
			if iv >= 0 {
				// The group's own consumer.assignment.interval.ms, set
				// before its first member joins.
				what = fmt.Sprintf("%d ms", iv)
				name += fmt.Sprintf("-interval%d", iv)
				if err := setGroupConfig(ctx, cl, group, "consumer.assignment.interval.ms", strconv.Itoa(iv)); err != nil {
					return nil, err
				}
			}
			stop := profileBrokers(o.profile, name, []int{g.Pid()})
			cpu := func() float64 {
				t, err := procCPU(g.Pid())
				if err != nil {
					return 0
				}
				return float64(t) / tick
			}
			took, cpuS, errs, err := groupStable(ctx, g.Addr, group, use, s, o.groupClients, o.groupTimeout, o.groupTimeline, cpu)
			stop()
			if err != nil {
				return nil, err
			}
			slog.Info("group stable", "members", s.members, "partitions", s.partitions, "assignment_interval", what, "took", took.Round(time.Millisecond), "broker_cpu_s", cpuS, "errors", errs)
			f := figure{What: fmt.Sprintf("KIP-848 group, %s members over %s partitions, first heartbeat to stable (heartbeat interval %v, assignment interval %s)",
				groupDigits(s.members), groupDigits(s.partitions), o.groupHeartbeat, what),
				Value: fmt.Sprintf("%.2f s, broker %.2f CPU-s (%d error answers)", took.Seconds(), cpuS, errs)}
			if s.members == 1000 && s.partitions == 10000 {
				f.Target, f.Met = "≤ 2 s", met848(took <= 2*time.Second)
			}
			figs = append(figs, f)
			// The members' leave heartbeats and the next group's joins
			// should not overlap.
			time.Sleep(2 * time.Second)
		}
	}
	return figs, nil
}

// parseGroupIntervals reads -groups-assignment-intervals: milliseconds, or
// "default" (-1) for the broker's.
func parseGroupIntervals(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "default" {
			out = append(out, -1)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-groups-assignment-intervals: %q is neither default nor milliseconds", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// setGroupConfig sets one group config (ConfigResource GROUP) through
// IncrementalAlterConfigs.
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, name, value string) error {
	req := &kmsg.IncrementalAlterConfigsRequest{Resources: []kmsg.IncrementalAlterConfigsRequestResource{{
		ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: &value}},
	}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("set %s=%s on group %s: %w", name, value, group, err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("set %s=%s on group %s: %w", name, value, group, err)
	}
	return nil
}

func met848(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
