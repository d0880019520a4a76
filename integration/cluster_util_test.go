package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Helpers of the cluster behaviour tests (controller kill, divergence, min
// ISR, real clients, preferred leaders). cuCluster is newCluster's cluster
// with extra properties and optional broker-only nodes, so a test can
// keep the controller quorum alive while it kills brokers.

// cuNode is one gregor process of a cuCluster. Node ids count from 1; the
// first voters nodes are brokers and controllers, the rest brokers only.
type cuNode struct {
	id       int32
	voter    bool
	dir      string
	port     int // EXTERNAL: clients
	internal int // PLAINTEXT: replication
	ctrl     int // CONTROLLER, voters only
	proc     *process
}

// cuCluster is a cluster of gregor processes on loopback ports, each node
// with its own data dir, all with the same extra properties.
type cuCluster struct {
	t     *testing.T
	nodes []*cuNode
	props []string
}

// cuBaseProps shorten Kafka's timeouts so failovers take seconds; they are
// the ones cluster_test.go uses, with faster fetcher retries.
var cuBaseProps = []string{
	"replica.lag.time.max.ms=3000",
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=500",
	"replica.fetch.backoff.ms=200",
}

// cuStartCluster starts voters combined nodes and brokersOnly broker-only
// nodes with props added to cuBaseProps (later ones win), and waits for
// all of them to serve.
func cuStartCluster(t *testing.T, voters, brokersOnly int, props ...string) *cuCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	c := &cuCluster{t: t, props: append(slices.Clone(cuBaseProps), props...)}
	for i := range voters + brokersOnly {
		n := &cuNode{id: int32(i + 1), voter: i < voters, dir: t.TempDir(), port: freePort(t), internal: freePort(t)}
		if n.voter {
			n.ctrl = freePort(t)
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.proc = launchGregor(t, c.args(n)...)
	}
	for _, n := range c.nodes {
		n.proc.waitStarted()
	}
	return c
}

func (c *cuCluster) args(n *cuNode) []string {
	var voters []string
	for _, v := range c.nodes {
		if v.voter {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", v.id, v.ctrl))
		}
	}
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d", n.internal, n.port)
	listeners := advertised
	if n.voter {
		listeners += fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", n.ctrl)
	}
	props := clusterProperties(int(n.id), strings.Join(voters, ","), listeners, advertised, n.dir)
	if !n.voter {
		for i, kv := range props {
			if strings.HasPrefix(kv, "process.roles=") {
				props[i] = "process.roles=broker"
			}
		}
	}
	a := []string{"serve"}
	for _, kv := range append(props, c.props...) {
		a = append(a, "--override", kv)
	}
	return a
}

// node returns the node with id.
func (c *cuCluster) node(id int32) *cuNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %d", id)
	return nil
}

func (n *cuNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// seeds lists every node's client address, dead or alive: clients skip
// the ones that do not answer.
func (c *cuCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr())
	}
	return s
}

// seedsExcept lists the client addresses of the nodes not in ids.
func (c *cuCluster) seedsExcept(ids ...int32) []string {
	var s []string
	for _, n := range c.nodes {
		if !slices.Contains(ids, n.id) {
			s = append(s, n.addr())
		}
	}
	return s
}

// kill stops node id with SIGKILL.
func (c *cuCluster) kill(id int32) { c.node(id).proc.kill() }

// restart starts node id again on its data dir and ports and waits until
// it serves.
func (c *cuCluster) restart(id int32) {
	c.t.Helper()
	n := c.node(id)
	n.proc = startGregorArgs(c.t, c.args(n)...)
}

// pause freezes node id with SIGSTOP: its sockets stay open, but it
// neither sends nor answers anything.
func (c *cuCluster) pause(id int32) {
	c.t.Helper()
	n := c.node(id)
	if err := freeze(n.proc.cmd.Process); err != nil {
		c.t.Fatalf("SIGSTOP node %d: %v", id, err)
	}
	// A test that fails while the node is frozen still gets it back, so
	// the cleanup's SIGKILL and its log dump find a live process.
	p := n.proc
	c.t.Cleanup(func() { thaw(p.cmd.Process) })
}

// resume thaws a node frozen by pause.
func (c *cuCluster) resume(id int32) {
	c.t.Helper()
	if err := thaw(c.node(id).proc.cmd.Process); err != nil {
		c.t.Fatalf("SIGCONT node %d: %v", id, err)
	}
}

// client is a franz-go client seeded with seeds (every node when empty).
func (c *cuCluster) client(seeds []string, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	if len(seeds) == 0 {
		seeds = c.seeds()
	}
	return newClient(c.t, strings.Join(seeds, ","), opts...)
}

// cuWait polls cond every 100 ms until it returns nil or d passes, and
// then fails the test with cond's last error.
func cuWait(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cuCtx is a short deadline for one request of a polling loop.
func cuCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// cuCreateTopic creates topic, retrying while the cluster settles (a new
// controller, brokers still fenced) but failing on a definite refusal.
func cuCreateTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	cuWait(t, 60*time.Second, "create topic "+topic, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil // an earlier try got through, its answer did not
		}
		return err
	})
	cuWaitLeaders(t, cl, topic, partitions)
}

// cuWaitLeaders waits until every partition of topic has a leader.
func cuWaitLeaders(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	cuWait(t, 30*time.Second, "leaders of "+topic, func() error {
		for p := range partitions {
			st, err := cuPartitionState(cl, topic, p)
			if err != nil {
				return err
			}
			if st.leader < 0 {
				return fmt.Errorf("partition %d has no leader", p)
			}
		}
		return nil
	})
}

// cuPart is a partition as a Metadata response describes it.
type cuPart struct {
	leader, epoch int32
	replicas, isr []int32
}

// cuPartitionState asks the cluster (any broker cl picks) for one
// partition's leader, leader epoch, replicas and ISR.
func cuPartitionState(cl *kgo.Client, topic string, partition int32) (cuPart, error) {
	ctx, cancel := cuCtx()
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return cuPart{}, err
	}
	return cuFindPartition(resp, topic, partition)
}

func cuFindPartition(resp *kmsg.MetadataResponse, topic string, partition int32) (cuPart, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return cuPart{}, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
					return cuPart{}, fmt.Errorf("metadata of %s-%d: %w", topic, partition, err)
				}
				isr := slices.Clone(p.ISR)
				slices.Sort(isr)
				return cuPart{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: isr}, nil
			}
		}
		return cuPart{}, fmt.Errorf("metadata of %s has no partition %d", topic, partition)
	}
	return cuPart{}, fmt.Errorf("metadata has no topic %s", topic)
}

// cuMetadataFrom sends a Metadata request for topics to node n itself,
// not to whichever broker a client would pick.
func cuMetadataFrom(n *cuNode, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := cuCtx()
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// cuQuorumLeader asks DescribeQuorum (key 55) for the active controller
// and its raft epoch.
func cuQuorumLeader(cl *kgo.Client) (leader, epoch int32, err error) {
	p, err := cuDescribeQuorum(cl)
	if err != nil {
		return -1, -1, err
	}
	return p.LeaderID, p.LeaderEpoch, nil
}

// cuDescribeQuorum asks DescribeQuorum (key 55) for the metadata
// partition's state: leader, epoch, high watermark, voters' progress.
func cuDescribeQuorum(cl *kgo.Client) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	var none kmsg.DescribeQuorumResponseTopicPartition
	ctx, cancel := cuCtx()
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return none, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return none, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return none, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return none, err
	}
	return p, nil
}

// cuFenced asks DescribeCluster (v2, fenced brokers included) which
// registered brokers are fenced.
func cuFenced(cl *kgo.Client) (map[int32]bool, error) {
	ctx, cancel := cuCtx()
	defer cancel()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 2
	req.IncludeFencedBrokers = true
	req.EndpointType = 1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := make(map[int32]bool)
	for _, b := range resp.Brokers {
		out[b.NodeID] = b.IsFenced
	}
	return out, nil
}

// cuProduceSync produces values to topic/partition with cl (its acks;
// cl must use kgo.ManualPartitioner) and fails the test on any error.
func cuProduceSync(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s-%d: %v", topic, partition, err)
	}
	return recs
}

// cuLogBytes concatenates the .log segments of topic-partition in node's
// data dir, in offset order: what the node holds, byte for byte.
func cuLogBytes(n *cuNode, topic string, partition int32) ([]byte, error) {
	dir := filepath.Join(n.dir, fmt.Sprintf("%s-%d", topic, partition))
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("node %d: no segment in %s", n.id, dir)
	}
	sort.Strings(segs) // 20-digit zero-padded base offsets sort as numbers
	var out bytes.Buffer
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, err
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// cuBatches walks record batch headers in a log's bytes and returns each
// batch's base offset, last offset and partition leader epoch; it fails on
// bytes that are not whole batches.
func cuBatches(log []byte) ([]cuBatch, error) {
	var out []cuBatch
	for pos := 0; pos < len(log); {
		if len(log)-pos < 61 {
			return out, fmt.Errorf("%d stray bytes at position %d", len(log)-pos, pos)
		}
		h := log[pos:]
		base := int64(binary.BigEndian.Uint64(h[0:8]))
		length := int(int32(binary.BigEndian.Uint32(h[8:12])))
		if length < 49 || pos+12+length > len(log) {
			return out, fmt.Errorf("batch at position %d has length %d, %d bytes left", pos, length, len(log)-pos-12)
		}
		epoch := int32(binary.BigEndian.Uint32(h[12:16]))
		lastDelta := int64(int32(binary.BigEndian.Uint32(h[23:27])))
		out = append(out, cuBatch{base: base, last: base + lastDelta, epoch: epoch, pos: pos, size: 12 + length})
		pos += 12 + length
	}
	return out, nil
}

// cuBatch is where one record batch lies in a log and what it holds.
type cuBatch struct {
	base, last int64
	epoch      int32
	pos, size  int
}

// cuCreateAssigned creates topic with a manual replica assignment
// (partition i gets assignment[i], whose first broker is the preferred
// leader), retrying while the cluster settles, and waits for the leaders.
func cuCreateAssigned(t *testing.T, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	cuWait(t, 60*time.Second, "create topic "+topic, func() error {
		ctx, cancel := cuCtx()
		defer cancel()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, replicas := range assignment {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		for k, v := range configs {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("CreateTopics answered %d topics", len(resp.Topics))
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	cuWaitLeaders(t, cl, topic, int32(len(assignment)))
}

// cuWaitISR waits until partition's ISR is exactly isr (sorted).
func cuWaitISR(t *testing.T, cl *kgo.Client, topic string, partition int32, isr []int32) cuPart {
	t.Helper()
	var st cuPart
	cuWait(t, 30*time.Second, fmt.Sprintf("ISR %v for %s-%d", isr, topic, partition), func() error {
		var err error
		st, err = cuPartitionState(cl, topic, partition)
		if err == nil && !slices.Equal(st.isr, isr) {
			err = fmt.Errorf("leader %d, ISR %v", st.leader, st.isr)
		}
		return err
	})
	return st
}

// cuRawProduce sends batch to topic-partition in a Produce request of its
// own to the partition's leader as the cluster names it now, and returns
// the partition's error code and base offset. franz-go sends it with cl's
// acks (kgo.RequiredAcks), whatever the request says.
func cuRawProduce(cl *kgo.Client, topic string, partition int32, batch []byte) (int16, int64, error) {
	ctx, cancel := cuCtx()
	defer cancel()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	if err := tds[topic].Err; err != nil {
		return 0, 0, err
	}
	st, err := cuPartitionState(cl, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	if st.leader < 0 {
		return 0, 0, fmt.Errorf("%s-%d has no leader", topic, partition)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, tds[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// A Produce through cl.Request would go to any broker.
	resp, err := req.RequestWith(ctx, cl.Broker(int(st.leader)))
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("produce answered %d topics", len(resp.Topics))
	}
	pr := resp.Topics[0].Partitions[0]
	return pr.ErrorCode, pr.BaseOffset, nil
}

// cuPlainBatch builds a plain (not idempotent) uncompressed batch of values.
func cuPlainBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	return idempotentBatch(t, -1, -1, -1, values...)
}
