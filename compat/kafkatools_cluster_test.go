package compat

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/compat/harness"
)

// ktFreePort returns a loopback address whose port was free a moment ago.
func ktFreePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startGregorCluster starts three gregor processes, each broker and
// controller of one KRaft quorum, through harness.Start. They start
// together: a node may wait for the quorum before it listens.
func startGregorCluster(t *testing.T) []*harness.Gregor {
	t.Helper()
	var client, ctrl [3]string
	var voters []string
	for i := range 3 {
		client[i], ctrl[i] = ktFreePort(t), ktFreePort(t)
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, ctrl[i]))
	}
	gs := make([]*harness.Gregor, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs[i], errs[i] = harness.Start(gregorBin, workDir, harness.Options{
				Listen:       client[i],
				StartTimeout: 60 * time.Second,
				Props: map[string]string{
					"node.id":                          strconv.Itoa(i + 1),
					"process.roles":                    "broker,controller",
					"controller.quorum.voters":         strings.Join(voters, ","),
					"listeners":                        "PLAINTEXT://" + client[i] + ",CONTROLLER://" + ctrl[i],
					"cluster.id":                       "R3JlZ29yVG9vbHNUZXN0MQ",
					"group.initial.rebalance.delay.ms": "0",
				},
			})
		}()
	}
	wg.Wait()
	for i, g := range gs {
		if g != nil {
			t.Cleanup(func() {
				if err := g.Close(); err != nil {
					t.Errorf("gregor node %d: %v", i+1, err)
				}
			})
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start gregor node %d: %v", i+1, err)
		}
	}
	return gs
}

// testToolsCluster runs the tools that move partitions and leaders, and
// describe the quorum, against a three-node gregor cluster.
// A non-empty bootstrap names a running three-node cluster to use
// instead.
func testToolsCluster(t *testing.T, k *kafkaTools, bootstrap string) {
	var e *ktEnv
	if bootstrap != "" {
		e = newKTEnv(t, k, bootstrap, "")
	} else {
		gs := startGregorCluster(t)
		var addrs []string
		for _, g := range gs {
			addrs = append(addrs, g.Addr)
		}
		e = newKTEnv(t, k, strings.Join(addrs, ","), gregorDataDir(gs[0].LogPath))
		e.ours = true
	}
	// The quorum elects a leader and the brokers register: wait until
	// all three are in the metadata.
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := e.adm.BrokerMetadata(ktCtx(t))
		if err == nil && len(md.Brokers) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster: brokers not all registered after 30s: %v %v", err, md.Brokers)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Run("metadata-quorum", func(t *testing.T) { testToolMetadataQuorum(t, e) })
	reassigned := t.Run("reassign-partitions", func(t *testing.T) { testToolReassign(t, e) })
	t.Run("leader-election", func(t *testing.T) {
		if !reassigned {
			t.Skip("needs the reassignment of reassign-partitions")
		}
		testToolLeaderElection(t, e)
	})
}

// testToolMetadataQuorum: kafka-metadata-quorum describe --status and
// --replication show the three voters, one of them the leader.
func testToolMetadataQuorum(t *testing.T, e *ktEnv) {
	out := e.k.must(t, "", classMetadataQuorum, e.args("describe", "--status")...)
	status := map[string]string{}
	for _, l := range outLines(out) {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("--status line %q is not Key: value", l)
		}
		status[k] = strings.TrimSpace(v)
	}
	md, err := e.adm.BrokerMetadata(ktCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if status["ClusterId"] != md.Cluster {
		t.Errorf("--status ClusterId %q, metadata says %q", status["ClusterId"], md.Cluster)
	}
	leader := status["LeaderId"]
	if !slices.Contains([]string{"1", "2", "3"}, leader) {
		t.Errorf("--status LeaderId %q, want one of the nodes", leader)
	}
	var voters []struct {
		ID        int32    `json:"id"`
		Endpoints []string `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(status["CurrentVoters"]), &voters); err != nil || len(voters) != 3 {
		t.Errorf("--status CurrentVoters %q: want three voters (%v)", status["CurrentVoters"], err)
	}
	for _, k := range []string{"LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs"} {
		if _, err := strconv.ParseInt(status[k], 10, 64); err != nil {
			t.Errorf("--status %s = %q, want a number", k, status[k])
		}
	}
	if status["CurrentObservers"] != "[]" {
		t.Errorf("--status CurrentObservers %q, want [] (every node is a voter)", status["CurrentObservers"])
	}

	out = e.k.must(t, "", classMetadataQuorum, e.args("describe", "--replication")...)
	rows := parseTable(out, "NodeId")
	var ids []string
	leaders := 0
	for _, r := range rows {
		ids = append(ids, r["NodeId"])
		switch r["Status"] {
		case "Leader":
			leaders++
			if r["NodeId"] != leader || r["Lag"] != "0" {
				t.Errorf("--replication leader row %v, want node %s with lag 0", r, leader)
			}
		case "Follower":
		default:
			t.Errorf("--replication row %v: status is neither Leader nor Follower", r)
		}
		if _, err := strconv.ParseInt(r["LogEndOffset"], 10, 64); err != nil {
			t.Errorf("--replication row %v: LogEndOffset is not a number", r)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"1", "2", "3"}) || leaders != 1 {
		t.Errorf("--replication rows %v: want nodes 1, 2, 3 with one leader:\n%s", rows, out)
	}
}

// reassignJSON is kafka-reassign-partitions' assignment file format.
type reassignJSON struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		Replicas  []int32  `json:"replicas"`
		LogDirs   []string `json:"log_dirs"`
	} `json:"partitions"`
}

const reassignTopic = "tools-reassign"

// testToolReassign: kafka-reassign-partitions generates a plan, executes
// a move of partition 0 from its one replica to two (a new preferred
// leader first) and verifies it; the new replica holds the data.
func testToolReassign(t *testing.T, e *ktEnv) {
	ctx := ktCtx(t)
	e.createTopic(t, reassignTopic, 2, nil)
	for i := range 6 {
		e.produceTo(t, &kgo.Record{Topic: reassignTopic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	md, err := e.adm.ListTopics(ctx, reassignTopic)
	if err != nil {
		t.Fatal(err)
	}
	parts := md[reassignTopic].Partitions

	topicsFile := e.k.writeFile(t, "reassign-topics.json", `{"version":1,"topics":[{"topic":"`+reassignTopic+`"}]}`)
	out := e.k.must(t, "", classReassign, e.args("--topics-to-move-json-file", topicsFile, "--broker-list", "1,2,3", "--generate")...)
	ls := outLines(out)
	if len(ls) != 4 || ls[0] != "Current partition replica assignment" || ls[2] != "Proposed partition reassignment configuration" {
		t.Fatalf("--generate printed\n%s", out)
	}
	var current, proposed reassignJSON
	if err := json.Unmarshal([]byte(ls[1]), &current); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ls[3]), &proposed); err != nil {
		t.Fatal(err)
	}
	if len(current.Partitions) != 2 || len(proposed.Partitions) != 2 {
		t.Fatalf("--generate: current %+v, proposed %+v; want two partitions each", current, proposed)
	}
	for _, p := range current.Partitions {
		if p.Topic != reassignTopic || !slices.Equal(p.Replicas, parts[p.Partition].Replicas) {
			t.Errorf("--generate current assignment %+v, metadata says replicas %v", p, parts[p.Partition].Replicas)
		}
	}
	for _, p := range proposed.Partitions {
		if len(p.Replicas) != 1 || p.Replicas[0] < 1 || p.Replicas[0] > 3 {
			t.Errorf("--generate proposed %+v: want one replica among brokers 1-3", p)
		}
	}

	// Partition 0 goes from [a] to [b, a]: b becomes its preferred leader.
	a := parts[0].Replicas[0]
	b := a%3 + 1
	plan := fmt.Sprintf(`{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[%d,%d],"log_dirs":["any","any"]}]}`,
		reassignTopic, b, a)
	planFile := e.k.writeFile(t, "reassign-plan.json", plan)
	out = e.k.must(t, "", classReassign, e.args("--reassignment-json-file", planFile, "--execute")...)
	if !strings.Contains(out, "Successfully started partition reassignment for "+reassignTopic+"-0") {
		t.Errorf("--execute printed\n%s", out)
	}
	// Wait for the move with franz-go rather than with repeated --verify
	// runs, each a JVM.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := e.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{reassignTopic: {0: {}}})
		md, err2 := e.adm.ListTopics(ctx, reassignTopic)
		if err == nil && err2 == nil && len(rs) == 0 {
			p := md[reassignTopic].Partitions[0]
			if slices.Equal(p.Replicas, []int32{b, a}) && len(p.ISR) == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignment of partition 0 to [%d %d] not complete after 30s: %v %v %+v", b, a, err, err2, md[reassignTopic].Partitions[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The new replica holds the partition's data, byte for byte in size.
	dirs, err := e.adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{reassignTopic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int32]int64{}
	for broker, ds := range dirs {
		ds.EachPartition(func(p kadm.DescribedLogDirPartition) { sizes[broker] = p.Size })
	}
	if sizes[a] == 0 || sizes[b] != sizes[a] {
		t.Errorf("partition 0's size on brokers %d and %d: %v; want equal and non-zero", a, b, sizes)
	}

	r := e.k.run(t, "", classReassign, e.args("--reassignment-json-file", planFile, "--verify")...)
	if !strings.Contains(r.stdout, "Reassignment of partition "+reassignTopic+"-0 is completed.") {
		t.Errorf("--verify printed\n%s\n%s", r.stdout, r.stderr)
	}
	// --verify then clears the replication throttles, a dynamic broker
	// config (leader/follower.replication.throttled.rate) on every broker.
	if r.err != nil {
		t.Errorf("kafka-reassign-partitions --verify fails clearing the broker throttles: %v: %s", r.err, causeLine(r.stderr+"\n"+r.stdout))
	}
}

// testToolLeaderElection: kafka-leader-election moves partition 0's
// leadership to its preferred replica (first of the reassigned replicas).
func testToolLeaderElection(t *testing.T, e *ktEnv) {
	ctx := ktCtx(t)
	md, err := e.adm.ListTopics(ctx, reassignTopic)
	if err != nil {
		t.Fatal(err)
	}
	p := md[reassignTopic].Partitions[0]
	preferred := p.Replicas[0]
	out := e.k.must(t, "", classLeaderElection, e.args("--election-type", "preferred", "--topic", reassignTopic, "--partition", "0")...)
	want := "Successfully completed leader election (PREFERRED) for partitions " + reassignTopic + "-0"
	if p.Leader == preferred {
		// The controller already moved it (Kafka only does on its
		// auto-rebalance timer, but any broker may be quicker).
		want = "Valid replica already elected for partitions " + reassignTopic + "-0"
	}
	if strings.TrimSpace(out) != want {
		t.Errorf("kafka-leader-election printed %q, want %q (leader was %d, preferred %d)", out, want, p.Leader, preferred)
	}
	// The controller has committed the change when the tool returns; the
	// brokers' metadata follows within moments.
	for deadline := time.Now().Add(10 * time.Second); ; {
		md, err = e.adm.ListTopics(ctx, reassignTopic)
		if err != nil {
			t.Fatal(err)
		}
		l := md[reassignTopic].Partitions[0].Leader
		if l == preferred {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after the election partition 0's leader is %d, want %d", l, preferred)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// causeLine is the last "Caused by:" line of a Java stack trace, or its
// first line when there is none.
func causeLine(stderr string) string {
	cause := firstLine(stderr)
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "Caused by: ") || strings.HasPrefix(l, "Error: ") {
			cause = l
		}
	}
	return cause
}
