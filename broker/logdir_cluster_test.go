package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// testNode is one in-process node of a three-node test cluster: broker
// and controller, with two log dirs and a file system whose writes under
// failing fail with EIO.
type testNode struct {
	*Server
	id      int32
	dirs    [2]string
	failing atomic.Value // a path prefix, "" for none
}

// startTestCluster starts three combined nodes on loopback ports, each
// with two log dirs, and waits until all are registered and unfenced.
func startTestCluster(t *testing.T) []*testNode {
	t.Helper()
	var voters []string
	ctrlPorts := make([]int, 3)
	for i := range ctrlPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctrlPorts[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrlPorts[i]))
	}
	nodes := make([]*testNode, 3)
	for i := range nodes {
		n := &testNode{id: int32(i + 1), dirs: [2]string{t.TempDir(), t.TempDir()}}
		n.failing.Store("")
		props := config.DevProperties()
		for k, v := range map[string]string{
			"node.id":                          strconv.Itoa(i + 1),
			"process.roles":                    "broker,controller",
			"controller.quorum.voters":         strings.Join(voters, ","),
			"listeners":                        fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ctrlPorts[i]),
			"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name":       "PLAINTEXT",
			"log.dirs":                         n.dirs[0] + "," + n.dirs[1],
			"cluster.id":                       "LogDirClusterTest0000A",
			"broker.heartbeat.interval.ms":     "500",
			"broker.session.timeout.ms":        "9000",
			"replica.fetch.wait.max.ms":        "100",
			"replica.fetch.backoff.ms":         "100",
			"min.insync.replicas":              "2",
			"default.replication.factor":       "3",
			"offsets.topic.replication.factor": "3",
		} {
			props[k] = v
		}
		cfg, _, err := config.Parse(props)
		if err != nil {
			t.Fatal(err)
		}
		fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
			if d := n.failing.Load().(string); d != "" && (op == vfs.OpWrite || op == vfs.OpSync) && strings.HasPrefix(path, d) {
				return errors.New("input/output error")
			}
			return nil
		})
		s, err := New(cfg, Options{Logger: testLogger().With("node", i+1), FS: fsys})
		if err != nil {
			for _, prev := range nodes[:i] {
				prev.Close()
			}
			t.Fatalf("node %d: %v", i+1, err)
		}
		n.Server = s
		nodes[i] = n
	}
	t.Cleanup(func() {
		// Together: the last to stop would wait for a quorum.
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() { n.Close() })
		}
		wg.Wait()
	})
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	return nodes
}

func clusterClient(t *testing.T, nodes []*testNode, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.Addr().String())
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// partitionState is a partition as a Metadata answer shows it.
type partitionState struct {
	leader int32
	isr    []int32
}

func metadataOf(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]map[int32]partitionState, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]partitionState{}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 || rt.Topic == nil {
			return nil, fmt.Errorf("metadata of %v: %w", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
		m := map[int32]partitionState{}
		for _, p := range rt.Partitions {
			isr := slices.Clone(p.ISR)
			slices.Sort(isr)
			m[p.Partition] = partitionState{leader: p.Leader, isr: isr}
		}
		out[*rt.Topic] = m
	}
	return out, nil
}

// waitMetadata polls Metadata until cond holds, and fails the test after
// timeout.
func waitMetadata(t *testing.T, cl *kgo.Client, timeout time.Duration, what string, cond func(map[string]map[int32]partitionState) bool, topics ...string) {
	t.Helper()
	start := time.Now()
	var last map[string]map[int32]partitionState
	var lastErr error
	for time.Since(start) < timeout {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		md, err := metadataOf(ctx, cl, topics...)
		cancel()
		if err == nil && cond(md) {
			return
		}
		last, lastErr = md, err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v; last metadata %v (%v)", what, timeout, last, lastErr)
}

// TestLogDirFailureMovesLeadership: in a three-node cluster, one log dir
// of a broker fails (EIO on every write). Produce to a partition it leads
// there answers KAFKA_STORAGE_ERROR; the broker's next heartbeat tells
// the controller, which elects another leader from the ISR and takes the
// broker out of the ISRs of its partitions on that dir (led or followed),
// within seconds and without fencing it. acks=all produce then works
// against the new leaders and every acknowledged record reads back, while
// the broker keeps leading and serving its partitions on its healthy dir.
func TestLogDirFailureMovesLeadership(t *testing.T) {
	nodes := startTestCluster(t)
	// The failing broker is not the active controller, so its heartbeat
	// crosses the controller RPC between nodes.
	var f *testNode
	for _, n := range nodes {
		if !n.meta.IsLeader() {
			f = n
			break
		}
	}
	var others []int32
	for _, n := range nodes {
		if n != f {
			others = append(others, n.id)
		}
	}
	a, b := others[0], others[1]

	cl := clusterClient(t, nodes, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testContext(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10000
	for name, replicas := range map[string][]int32{"disk": {f.id, a, b}, "follow": {a, f.id, b}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for p := range int32(4) {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = p, replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		create.Topics = append(create.Topics, rt)
	}
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range cresp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	all := []int32{1, 2, 3}
	waitMetadata(t, cl, 30*time.Second, "topics created and led by their first replicas", func(md map[string]map[int32]partitionState) bool {
		for topic, leader := range map[string]int32{"disk": f.id, "follow": a} {
			if len(md[topic]) != 4 {
				return false
			}
			for _, p := range md[topic] {
				if p.leader != leader || !slices.Equal(p.isr, all) {
					return false
				}
			}
		}
		return true
	}, "disk", "follow")

	// Where the failing broker keeps each partition: one led and one
	// followed on the dir that will fail, one led on the healthy dir.
	var hosted bool
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !hosted; time.Sleep(50 * time.Millisecond) {
		hosted = true
		for p := range int32(4) {
			hosted = hosted && f.parts.get("disk", p) != nil && f.parts.get("follow", p) != nil
		}
	}
	if !hosted {
		t.Fatal("the failing broker does not host every partition")
	}
	pick := func(topic, dir string) int32 {
		for p := range int32(4) {
			if filepath.Dir(f.parts.get(topic, p).Log.Dir()) == dir {
				return p
			}
		}
		t.Fatalf("no partition of %s in %s", topic, dir)
		return -1
	}
	failDir, okDir := f.dirs[1], f.dirs[0] // the metadata log lives in the first
	pFail, pOK, fFail := pick("disk", failDir), pick("disk", okDir), pick("follow", failDir)

	type acked struct {
		offset int64
		value  string
	}
	sent := map[string][]acked{}
	key := func(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }
	produce := func(topic string, p int32, tag string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d", tag, i)})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %s to %s: %v", tag, key(topic, p), err)
		}
		for _, r := range res {
			sent[key(topic, p)] = append(sent[key(topic, p)], acked{r.Record.Offset, string(r.Record.Value)})
		}
	}
	produce("disk", pFail, "before", 20)
	produce("disk", pOK, "before", 20)
	produce("follow", fFail, "before", 20)

	// The disk fails. A produce straight to the broker answers
	// KAFKA_STORAGE_ERROR.
	f.failing.Store(failDir + string(filepath.Separator))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "disk"
	if dt, ok := f.meta.Image().Topic("disk"); ok {
		rt.TopicID = dt.ID // v13 names topics by ID
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = pFail, testBatch(t, "lost")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := req.RequestWith(ctx, cl.Broker(int(f.id)))
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the failed dir: code %d, want KAFKA_STORAGE_ERROR", code)
	}
	failedAt := time.Now()

	// The controller moves the partitions of the failed dir within
	// seconds; the broker stays registered and unfenced.
	without := []int32{a, b}
	slices.Sort(without)
	waitMetadata(t, cl, 15*time.Second, "leadership and ISRs moved off the failed dir", func(md map[string]map[int32]partitionState) bool {
		d, fo := md["disk"][pFail], md["follow"][fFail]
		return d.leader != f.id && d.leader >= 0 && slices.Equal(d.isr, without) &&
			fo.leader == a && slices.Equal(fo.isr, without)
	}, "disk", "follow")
	t.Logf("leadership moved %v after the storage error", time.Since(failedAt))
	for _, n := range nodes {
		if bi, ok := n.meta.Image().Broker(f.id); !ok || bi.Fenced {
			t.Fatalf("node %d sees the failed broker fenced or gone", n.id)
		}
	}
	md, err := metadataOf(ctx, cl, "disk")
	if err != nil {
		t.Fatal(err)
	}
	if p := md["disk"][pOK]; p.leader != f.id || !slices.Equal(p.isr, all) {
		t.Fatalf("partition on the healthy dir: %+v, want led by %d with ISR %v", p, f.id, all)
	}

	// acks=all (min.insync.replicas=2) works on the new leaders and on the
	// healthy dir.
	produce("disk", pFail, "after", 20)
	produce("follow", fFail, "after", 20)
	produce("disk", pOK, "after", 20)

	// Every acknowledged record reads back, in order, from the leaders.
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"disk", pFail}, {"follow", fFail}, {"disk", pOK}} {
		want := sent[key(tp.topic, tp.p)]
		consumer := clusterClient(t, nodes, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.topic: {tp.p: kgo.NewOffset().AtStart()}}))
		var got []acked
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for len(got) < len(want) && cctx.Err() == nil {
			fs := consumer.PollFetches(cctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Logf("consume %s: %v", key(tp.topic, tp.p), err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { got = append(got, acked{r.Offset, string(r.Value)}) })
		}
		cancel()
		if !slices.Equal(got, want) {
			t.Fatalf("%s read back %d records %v, want the %d acknowledged %v", key(tp.topic, tp.p), len(got), got, len(want), want)
		}
	}

	// The failed broker has not come back into those ISRs.
	md, err = metadataOf(ctx, cl, "disk", "follow")
	if err != nil {
		t.Fatal(err)
	}
	if d, fo := md["disk"][pFail], md["follow"][fFail]; slices.Contains(d.isr, f.id) || slices.Contains(fo.isr, f.id) || d.leader == f.id {
		t.Fatalf("failed broker back in: disk %+v follow %+v", d, fo)
	}
	if p := md["disk"][pOK]; p.leader != f.id || !slices.Equal(p.isr, all) {
		t.Fatalf("partition on the healthy dir at the end: %+v", p)
	}
}
