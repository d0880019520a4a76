package raftnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/vfs"
)

var (
	idA = [16]byte{0xa}
	idB = [16]byte{0xb}
)

func strp(s string) *string { return &s }

// topicRecords returns the records that create a topic with partitions
// led by broker 1 and replicated to replicas brokers (1, 2, ...).
func topicRecords(name string, partitions int32, replicas int32, configs map[string]string) []image.Record {
	id := image.NewUUID()
	recs := []image.Record{&image.TopicRecord{Name: name, ID: id}}
	for k, v := range configs {
		recs = append(recs, &image.ConfigRecord{ResourceType: image.ResourceTopic, ResourceName: name, Name: k, Value: strp(v)})
	}
	var rs []int32
	for r := range replicas {
		rs = append(rs, r+1)
	}
	for p := range partitions {
		recs = append(recs, &image.PartitionRecord{TopicID: id, Partition: p, Replicas: rs, ISR: rs, Leader: 1})
	}
	return recs
}

// createTopic commits a topic of single-replica partitions on n.
func createTopic(t testing.TB, n *Node, name string, partitions int32) {
	t.Helper()
	if _, err := n.Propose(ctxT(t), topicRecords(name, partitions, 1, nil)...); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func TestNodeSingleVoterLeadsOnStart(t *testing.T) {
	// The in-memory filesystem takes fsync latency out of the timing: what
	// is measured is that no election timeout is waited for.
	start := time.Now()
	n := startNode(t, "/data", func(c *Config) { c.FS = vfs.NewMem() })
	if id, ok := n.LeaderID(); !n.IsLeader() || !ok || id != 1 {
		t.Fatalf("IsLeader %v, LeaderID %d %v", n.IsLeader(), id, ok)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("leader after %v", d)
	}
	if n.Image().ClusterID != "test-cluster" {
		t.Fatalf("cluster ID %q", n.Image().ClusterID)
	}
	img, err := n.Propose(ctxT(t), &image.FeatureLevelRecord{Name: "metadata.version", Level: 3})
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	if l, ok := img.Feature("metadata.version"); !ok || l != 3 || n.Image().Offset() < img.Offset() {
		t.Fatalf("proposed image: level %d %v, offset %d, node at %d", l, ok, img.Offset(), n.Image().Offset())
	}
}

func TestNodeRestartReplays(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	if _, err := n.Propose(ctxT(t), &image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID(), Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	createTopic(t, n, "a", 3)
	if _, err := n.Propose(ctxT(t), topicRecords("b.x", 2, 1, map[string]string{"retention.ms": "5"})...); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(ctxT(t), &image.ConfigRecord{ResourceType: image.ResourceBroker, Name: "num.partitions", Value: strp("4")}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(ctxT(t), &image.ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: 1000}); err != nil {
		t.Fatal(err)
	}
	a, _ := n.Image().Topic("a")
	if _, err := n.Propose(ctxT(t), &image.RemoveTopicRecord{TopicID: a.ID}); err != nil {
		t.Fatal(err)
	}
	before := n.Image()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, dir, func(c *Config) { c.ClusterID = "" })
	after := n2.Image()
	if !reflect.DeepEqual(after.Records(), before.Records()) || after.ClusterID != before.ClusterID {
		t.Fatalf("image after restart differs:\n got %v\nwant %v", after.Records(), before.Records())
	}
	if after.Offset() <= before.Offset() || !n2.IsLeader() {
		t.Fatalf("offset %d (was %d), leader %v", after.Offset(), before.Offset(), n2.IsLeader())
	}
	n2.Close()
	if _, err := Start(Config{NodeID: 1, Dir: dir, Logger: discardLogger(), ClusterID: "another"}); err == nil {
		t.Fatal("Start with another cluster ID succeeded")
	}
	if _, err := Start(Config{NodeID: 2, Dir: dir, Logger: discardLogger()}); err == nil {
		t.Fatal("Start with another node ID succeeded")
	}
}

// segmentEntryWith returns the byte range of the entry record in the WAL
// segment that creates topic name.
func segmentEntryWith(t *testing.T, data []byte, name string) (int, int) {
	t.Helper()
	for off := 0; off < len(data); {
		typ, payload, n, err := readWALRecord(data[off:])
		if err != nil {
			t.Fatalf("record at %d: %v", off, err)
		}
		if typ == walEntry {
			e := new(pb.Entry)
			if err := proto.Unmarshal(payload, e); err != nil {
				t.Fatal(err)
			}
			if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
				_, recs, err := decodeEntry(e.GetData())
				if err != nil {
					t.Fatal(err)
				}
				if tr, ok := recs[0].(*image.TopicRecord); ok && tr.Name == name {
					return off, off + n
				}
			}
		}
		off += n
	}
	t.Fatalf("no entry creates %s", name)
	return 0, 0
}

func TestNodeTornTailOnRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	createTopic(t, n, "a", 1)
	createTopic(t, n, "b", 1)
	n.Close()

	path := filepath.Join(dir, metadataDirName, segmentName(0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start, end := segmentEntryWith(t, data, "b")
	if err := os.WriteFile(path, data[:(start+end)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, dir)
	if _, ok := n2.Image().Topic("a"); !ok {
		t.Fatal("topic a lost")
	}
	if _, ok := n2.Image().Topic("b"); ok {
		t.Fatal("topic b survived its torn entry")
	}
	createTopic(t, n2, "b", 2)

	n2.Close()
	n3 := startNode(t, dir)
	if tp, ok := n3.Image().Topic("b"); !ok || len(tp.Partitions) != 2 {
		t.Fatalf("topic b after second restart: %+v %v", tp, ok)
	}
}

// A crash loses nothing that was acknowledged: Propose returns only after
// the entry is fsynced.
func TestNodeCrashKeepsAcknowledged(t *testing.T) {
	fsys := vfs.NewMem()
	withMem := func(c *Config) { c.FS = fsys; c.Dir = "/data" }
	n := startNode(t, "", withMem)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			createTopic(t, n, fmt.Sprintf("t%d", i), 1)
		}()
	}
	wg.Wait()
	want := n.Image().Records()
	fsys.Crash()
	n.Close() // its file handles are dead; the error does not matter

	n2 := startNode(t, "", withMem)
	if got := n2.Image().Records(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after crash:\n got %v\nwant %v", got, want)
	}
}

func TestNodeSnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	every := func(c *Config) { c.SnapshotEvery = 10 }
	n := startNode(t, dir, every)
	for i := range 25 {
		createTopic(t, n, fmt.Sprintf("t%02d", i), 1)
	}
	want := n.Image()
	n.Close()

	names := dirNames(t, filepath.Join(dir, metadataDirName))
	if len(names) != 2 || !strings.HasSuffix(names[0], snapSuffix) || !strings.HasSuffix(names[1], segmentSuffix) || names[1] == segmentName(0) {
		t.Fatalf("files after compaction: %v", names)
	}
	n2 := startNode(t, dir, every)
	if !reflect.DeepEqual(n2.Image().Records(), want.Records()) {
		t.Fatal("image after snapshot restart differs")
	}
	if first, _ := n2.st.FirstIndex(); first <= 20 {
		t.Fatalf("log starts at %d after compaction", first)
	}
}

func TestNodeNotLeader(t *testing.T) {
	// One of three voters with no transport never hears from the others.
	n := startNode(t, t.TempDir(), func(c *Config) {
		c.Voters = []uint64{1, 2, 3}
		c.Ticks = make(chan time.Time)
	})
	if n.IsLeader() {
		t.Fatal("leader without a quorum")
	}
	if _, err := n.Propose(ctxT(t), &image.FeatureLevelRecord{Name: "f", Level: 1}); !errors.Is(err, ErrNotController) {
		t.Fatalf("Propose: %v", err)
	}
}

func TestNodeProposeRejected(t *testing.T) {
	n := startNode(t, t.TempDir())
	before := n.Image().Offset()
	_, err := n.Propose(ctxT(t), &image.RemoveTopicRecord{TopicID: idA})
	if err == nil || !strings.Contains(err.Error(), "unknown topic ID") {
		t.Fatalf("Propose: %v", err)
	}
	if n.Image().Offset() <= before {
		t.Fatal("rejected entry did not advance the offset")
	}
	if _, err := n.Propose(ctxT(t), &image.TopicRecord{Name: "a", ID: idA}); err != nil {
		t.Fatalf("Propose after a rejected entry: %v", err)
	}
	if _, err := n.Propose(ctxT(t)); err == nil {
		t.Fatal("empty proposal accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Propose(ctx, &image.TopicRecord{Name: "b", ID: idB}); err == nil {
		t.Fatal("Propose with a canceled context succeeded")
	}
}

func TestNodeChanges(t *testing.T) {
	n := startNode(t, t.TempDir())
	ch := n.Changes()
	prev := n.Image()
	createTopic(t, n, "a", 2)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no change signal")
	}
	d := image.DiffTopics(prev, n.Image())
	if len(d.Created) != 1 || d.Created[0].Name != "a" || len(d.Created[0].Partitions) != 2 {
		t.Fatalf("diff %+v", d)
	}
	n.Close()
	if _, ok := <-ch; ok {
		// A buffered signal may remain; the channel must then be closed.
		if _, ok := <-ch; ok {
			t.Fatal("Changes channel not closed by Close")
		}
	}
	if _, ok := <-n.Changes(); ok {
		t.Fatal("Changes after Close is open")
	}
	if _, err := n.Propose(ctxT(t), &image.FeatureLevelRecord{Name: "f", Level: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose after Close: %v", err)
	}
}

func TestNodeSyncFailureStops(t *testing.T) {
	var mu sync.Mutex
	fail := false
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail && op == vfs.OpSync {
			return vfs.ErrInjected
		}
		return nil
	})
	n := startNode(t, "/data", func(c *Config) { c.FS = fsys })
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := n.Propose(ctxT(t), &image.FeatureLevelRecord{Name: "f", Level: 1}); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Propose with a failing fsync: %v", err)
	}
	select {
	case <-n.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("node still running after a failed fsync")
	}
	if !errors.Is(n.Err(), vfs.ErrInjected) || !errors.Is(n.Close(), vfs.ErrInjected) {
		t.Fatalf("Err %v", n.Err())
	}
	if n.IsLeader() {
		t.Fatal("stopped node claims leadership")
	}
}

func TestNodeCloseLeaksNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		dir := t.TempDir()
		n, err := Start(Config{NodeID: 1, Dir: dir, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		_ = n.Changes()
		createTopic(t, n, "a", 1)
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n.Close() // idempotent
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memNetwork connects nodes in one process, as a TCP transport will.
type memNetwork struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	down  map[uint64]bool
}

type memTransport struct {
	net  *memNetwork
	from uint64
}

func (t *memTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		t.net.mu.Lock()
		n := t.net.nodes[m.GetTo()]
		cut := t.net.down[m.GetTo()] || t.net.down[t.from]
		t.net.mu.Unlock()
		if n == nil || cut {
			continue
		}
		// Never block the sender's Ready loop; raft retries what is dropped.
		select {
		case n.recvc <- proto.Clone(m).(*pb.Message):
		default:
		}
	}
}

func (net *memNetwork) start(t *testing.T, id uint64, dir string) *Node {
	t.Helper()
	n, err := Start(Config{
		NodeID: id, Voters: []uint64{1, 2, 3}, Dir: dir, Logger: discardLogger(),
		ClusterID: "three", TickInterval: 10 * time.Millisecond,
		Transport: &memTransport{net: net, from: id},
	})
	if err != nil {
		t.Fatalf("start node %d: %v", id, err)
	}
	net.mu.Lock()
	net.nodes[id] = n
	net.down[id] = false
	net.mu.Unlock()
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderOf(nodes map[uint64]*Node) *Node {
	for _, n := range nodes {
		if n != nil && n.IsLeader() {
			return n
		}
	}
	return nil
}

// createOnLeader commits a topic on the current leader, retrying while
// leadership moves (as a broker forwarding to the controller does).
func createOnLeader(t *testing.T, nodes map[uint64]*Node, name string, partitions, replicas int32) {
	t.Helper()
	recs := topicRecords(name, partitions, replicas, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if leader := leaderOf(nodes); leader != nil {
			_, err = leader.Propose(ctxT(t), recs...)
			if err == nil || strings.Contains(err.Error(), "already exists") {
				return // committed, maybe by an attempt before leadership moved
			}
			if !errors.Is(err, ErrNotController) && !errors.Is(err, ErrProposalDropped) {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader took the operation: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The single-node code path is the quorum code path: three voters elect a
// leader, replicate, fail over and catch a restarted node up.
func TestThreeVoters(t *testing.T) {
	net := &memNetwork{nodes: map[uint64]*Node{}, down: map[uint64]bool{}}
	dirs := map[uint64]string{}
	nodes := map[uint64]*Node{}
	for id := uint64(1); id <= 3; id++ {
		dirs[id] = t.TempDir()
		nodes[id] = net.start(t, id, dirs[id])
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	createOnLeader(t, nodes, "t", 3, 3)
	for _, n := range nodes {
		waitFor(t, "replication of t", func() bool { _, ok := n.Image().Topic("t"); return ok })
	}

	var leader *Node
	waitFor(t, "a leader", func() bool { leader = leaderOf(nodes); return leader != nil })
	old := leader.NodeID()
	net.mu.Lock()
	net.down[old] = true
	net.mu.Unlock()
	leader.Close()
	delete(nodes, old)
	createOnLeader(t, nodes, "u", 1, 1)

	nodes[old] = net.start(t, old, dirs[old])
	waitFor(t, "the restarted node to catch up", func() bool { _, ok := nodes[old].Image().Topic("u"); return ok })
	waitFor(t, "equal images", func() bool {
		leader := leaderOf(nodes)
		return leader != nil && reflect.DeepEqual(nodes[old].Image().Records(), leader.Image().Records())
	})
}

// A snapshot keeps SnapshotMargin entries below it in the log, so a
// follower a little behind needs no snapshot.
func TestNodeSnapshotKeepsMargin(t *testing.T) {
	for _, margin := range []uint64{1, 5} {
		n := startNode(t, t.TempDir(), func(cfg *Config) { cfg.SnapshotEvery, cfg.SnapshotMargin = 10, margin })
		for i := range 12 {
			createTopic(t, n, "m"+string(rune('a'+i)), 1)
		}
		var snapIndex uint64
		if err := n.onLoop(ctxT(t), func() { snapIndex = n.snapIndex }); err != nil {
			t.Fatal(err)
		}
		first := n.FirstIndex()
		if snapIndex == 0 || first != snapIndex-margin+1 {
			t.Fatalf("margin %d: snapshot at %d, log starts at %d", margin, snapIndex, first)
		}
	}
}

// TestNodeSubmitFunc: the callback of a submitted entry runs once, on the
// Ready loop, after the image holding the entry is published, with that
// image (or the apply error of an entry that does not apply), in
// submission order; a submission after Close is refused and its
// callback never runs.
func TestNodeSubmitFunc(t *testing.T) {
	n := startNode(t, t.TempDir())
	type call struct {
		name      string
		offset    uint64
		published bool
		err       error
	}
	calls := make(chan call, 8)
	submit := func(name string, recs ...image.Record) {
		t.Helper()
		err := n.SubmitFunc(ctxT(t), func(img *image.Image, err error) {
			c := call{name: name, err: err}
			if img != nil {
				c.offset = img.Offset()
				c.published = n.Image().Offset() >= img.Offset()
			}
			calls <- c
		}, recs...)
		if err != nil {
			t.Fatalf("SubmitFunc %s: %v", name, err)
		}
	}
	submit("a", topicRecords("a", 1, 1, nil)...)
	submit("bad", &image.RemoveTopicRecord{TopicID: idB})
	submit("c", topicRecords("c", 2, 1, nil)...)
	var got []call
	for range 3 {
		select {
		case c := <-calls:
			got = append(got, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("callbacks after 10s: %+v", got)
		}
	}
	if got[0].name != "a" || got[0].err != nil || !got[0].published || got[1].name != "bad" || got[1].err == nil || got[2].name != "c" || got[2].err != nil || got[2].offset <= got[0].offset {
		t.Fatalf("callbacks %+v", got)
	}
	if ti, ok := n.Image().Topic("c"); !ok || len(ti.Partitions) != 2 {
		t.Fatalf("topic c in the image: %v", ti)
	}
	if count, _ := n.CommitLatency(); count != 2 {
		t.Errorf("%d commits counted, want 2 (the entry that did not apply is not one)", count)
	}
	n.Close()
	if err := n.SubmitFunc(ctxT(t), func(*image.Image, error) { t.Error("callback of a refused submission ran") }, topicRecords("d", 1, 1, nil)...); !errors.Is(err, ErrClosed) {
		t.Fatalf("SubmitFunc after Close: %v", err)
	}
	select {
	case c := <-calls:
		t.Fatalf("extra callback %+v", c)
	default:
	}
}

// TestNodeActiveChanges: becoming the active controller signals
// ActiveChanges once; new images (a topic created) do not.
func TestNodeActiveChanges(t *testing.T) {
	n := startNode(t, t.TempDir())
	select {
	case <-n.ActiveChanges():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal on becoming the active controller")
	}
	if !n.IsLeader() || n.ActiveTerm() == 0 {
		t.Fatalf("signalled, but leader %v at term %d", n.IsLeader(), n.ActiveTerm())
	}
	createTopic(t, n, "a", 1)
	createTopic(t, n, "b", 1)
	select {
	case <-n.ActiveChanges():
		t.Fatal("a new image signalled ActiveChanges")
	case <-time.After(50 * time.Millisecond):
	}
}
