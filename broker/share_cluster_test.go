package broker

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/raftmeta/controller"
)

// clusterShareMember is a share member spoken to with raw requests pinned
// to chosen nodes: heartbeats to the group's coordinator, fetches and
// acknowledgements to the partition's leader, as Kafka's consumers send
// them.
type clusterShareMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	session map[int32]int32 // next share session epoch by node
}

func (m *clusterShareMember) send(node int32, req kmsg.Request) kmsg.Response {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := m.cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		m.t.Fatalf("%T to node %d: %v", req, node, err)
	}
	return resp
}

// fetch acquires up to maxRecords (exactly, KIP-1206's record limit) of
// the partition from node, waiting up to maxWait.
func (m *clusterShareMember) fetch(node int32, tid [16]byte, maxRecords, maxWait int32) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session[node]
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWait, 1, 1<<20, maxRecords, maxRecords
	req.ShareAcquireMode = 1
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = tid
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.send(node, req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		m.session[node] = nextShareEpoch(m.session[node])
	}
	return resp
}

// ack acknowledges [first, last] with typ on node's share session; it
// answers the partition's code.
func (m *clusterShareMember) ack(node int32, tid [16]byte, first, last int64, typ int8) int16 {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session[node]
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = tid
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{typ}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.send(node, req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != 0 {
		m.t.Fatalf("share acknowledge on node %d: %v", node, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.session[node] = nextShareEpoch(m.session[node])
	return resp.Topics[0].Partitions[0].ErrorCode
}

// acquired lists the offsets a ShareFetch answer acquired, with their
// delivery counts.
func acquired(resp *kmsg.ShareFetchResponse) map[int64]int16 {
	out := map[int64]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out[o] = a.DeliveryCount
				}
			}
		}
	}
	return out
}

func partitionCode(resp *kmsg.ShareFetchResponse) (int16, int32) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.ErrorCode, p.CurrentLeader.LeaderID
		}
	}
	return 0, -1
}

// stateSummary reads a share partition's start offset and leader epoch
// from the share coordinator with ReadShareGroupStateSummary.
func stateSummary(t *testing.T, m *clusterShareMember, coordinator int32, tid [16]byte) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = m.group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = tid
	rt.Partitions = append(rt.Partitions, kmsg.NewReadShareGroupStateSummaryRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return m.send(coordinator, req).(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0]
}

// TestShareGroupCluster: a share group on a three-node cluster, with the
// partition's leader L, a follower X and the group's coordinator C three
// different nodes. The member joins on C, fetches and acknowledges on L,
// which reads and writes the share partition's state on C with the
// share-state requests; a fetch sent to C for the partition answers
// NOT_LEADER_OR_FOLLOWER and names L. L stops: X becomes the leader,
// reads the state back from C, and delivers again only what was not
// acknowledged (the released records and those L had in flight, with
// their delivery counts raised), never an accepted one. The old leader's
// epoch is fenced at C.
func TestShareGroupCluster(t *testing.T) {
	nodes := startTestCluster(t)
	byID := map[int32]*testNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	cl := clusterClient(t, nodes, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testContext(t)
	const group = "cg"
	// F, the group coordinator clients find (the leader of the group's
	// __consumer_offsets partition), is also the partition's leader L;
	// the share coordinator C (the leader of the group's
	// __share_group_state partition, placed by hand) is another node.
	if _, err := nodes[0].ensureOffsetsTopic(ctx); err != nil {
		t.Fatal(err)
	}
	op := nodes[0].groups.coord.PartitionFor(group)
	var f int32 = -1
	for deadline := time.Now().Add(30 * time.Second); f < 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ot, ok := nodes[0].meta.Image().Topic(offsetsTopic); ok && ot.Partitions[op].Leader >= 0 {
			f = ot.Partitions[op].Leader
		}
	}
	if f < 0 {
		t.Fatal("no leader for the group's __consumer_offsets partition")
	}
	var others []int32
	for _, n := range nodes {
		if n.id != f {
			others = append(others, n.id)
		}
	}
	l, c, x := f, others[0], others[1]
	sp := nodes[0].shares.coord.PartitionFor(group)
	assignments := map[int32][]int32{}
	for p := range nodes[0].cfg.ShareCoordinatorStateTopicNumPartitions {
		assignments[p] = []int32{c}
	}
	res := nodes[0].ctrl.CreateTopics(ctx, []controller.CreateTopic{{Name: share.StateTopic, NumPartitions: -1, ReplicationFactor: -1,
		Assignments: assignments, Configs: map[string]string{"cleanup.policy": "compact"}}}, false)
	if res[0].Err != nil {
		t.Fatalf("create %s: %v", share.StateTopic, res[0].Err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, ok := nodes[0].meta.Image().Topic(share.StateTopic)
		if ok && st.Partitions[sp].Leader == c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group's __share_group_state partition is not led by C")
		}
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cq", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{l, x, c}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, rt)
	if cresp, err := create.RequestWith(ctx, cl); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create cq: %v %+v", err, cresp)
	}
	waitMetadata(t, cl, 30*time.Second, "cq led by L with a full ISR", func(md map[string]map[int32]partitionState) bool {
		p, ok := md["cq"][0]
		return ok && p.leader == l && len(p.isr) == 3
	}, "cq")
	setGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest")
	// The second member's join below gets its target at once.
	setGroupConfig(t, cl, group, "share.assignment.interval.ms", "0")
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "cq", Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp, _ := nodes[0].meta.Image().Topic("cq")
	tid := tp.ID

	m := &clusterShareMember{t: t, cl: cl, group: group, id: "member-a", session: map[int32]int32{}}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, m.id, []string{"cq"}
	var hresp *kmsg.ShareGroupHeartbeatResponse
	for try := 0; try < 100; try++ {
		hresp = m.send(c, hb).(*kmsg.ShareGroupHeartbeatResponse)
		if hresp.ErrorCode == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hresp.ErrorCode != 0 || hresp.Assignment == nil || len(hresp.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join on the coordinator: %v %+v", kerr.ErrorForCode(hresp.ErrorCode), hresp.Assignment)
	}
	// X coordinates nothing of the group: NOT_COORDINATOR, as Kafka.
	if r := m.send(x, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat on X: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	// F, where clients send heartbeats, forwards them to C.
	hf := kmsg.NewPtrShareGroupHeartbeatRequest()
	hf.GroupID, hf.MemberID, hf.SubscribedTopicNames = group, "member-f", []string{"cq"}
	if r := m.send(f, hf).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch < 2 {
		t.Fatalf("heartbeat on F: %v epoch %d, want it forwarded to C", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	dr := kmsg.NewPtrShareGroupDescribeRequest()
	dr.GroupIDs = []string{group}
	for _, node := range []int32{c, f} { // on F, forwarded too
		if d := m.send(node, dr).(*kmsg.ShareGroupDescribeResponse); len(d.Groups) != 1 || len(d.Groups[0].Members) != 2 {
			t.Fatalf("describe on node %d after F forwarded a join: %+v", node, d.Groups)
		}
	}
	hf.MemberEpoch = -1
	if r := m.send(f, hf).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("leave through F: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// The coordinator does not lead cq: its fetch names the leader.
	probe := &clusterShareMember{t: t, cl: cl, group: group, id: "member-a", session: map[int32]int32{}}
	if resp := probe.fetch(c, tid, 10, 0); resp.ErrorCode != 0 {
		t.Fatalf("fetch on the coordinator: %v", kerr.ErrorForCode(resp.ErrorCode))
	} else if code, leader := partitionCode(resp); code != kerr.NotLeaderForPartition.Code || leader != l {
		t.Fatalf("fetch on the coordinator: partition code %v, leader %d; want NOT_LEADER_OR_FOLLOWER and %d", kerr.ErrorForCode(code), leader, l)
	}

	// On L: acquire 0-59, accept 0-39, release 40-49, hold 50-59.
	got := map[int64]int16{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < 60 && time.Now().Before(deadline); {
		resp := m.fetch(l, tid, int32(60-len(got)), 500)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch on the leader: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		for o, d := range acquired(resp) {
			got[o] = d
		}
	}
	if len(got) != 60 {
		t.Fatalf("acquired %d records on the leader, want 60", len(got))
	}
	for o, d := range got {
		if o >= 60 || d != 1 {
			t.Fatalf("acquired offset %d with delivery count %d", o, d)
		}
	}
	if code := m.ack(l, tid, 0, 39, 1); code != 0 {
		t.Fatalf("accept on the leader: %v", kerr.ErrorForCode(code))
	}
	if code := m.ack(l, tid, 40, 49, 2); code != 0 {
		t.Fatalf("release on the leader: %v", kerr.ErrorForCode(code))
	}
	// The state is the coordinator's: start offset 40, written by L.
	sum := stateSummary(t, m, c, tid)
	lEpoch := byID[l].leaderPartition("cq", 0).LeaderEpoch.Load()
	if sum.ErrorCode != 0 || sum.StartOffset != 40 || sum.LeaderEpoch != lEpoch {
		t.Fatalf("state summary on the coordinator: %v start %d leader epoch %d, want start 40 epoch %d",
			kerr.ErrorForCode(sum.ErrorCode), sum.StartOffset, sum.LeaderEpoch, lEpoch)
	}
	if info, ok := byID[c].shares.coord.Partition(ctx, group, tid, 0); !ok || info.Start != 40 || info.InFlight["AVAILABLE"] != 20 {
		t.Fatalf("durable state on the coordinator: %+v", info)
	}
	// DescribeShareGroupOffsets at F, forwarded to C.
	dso := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dso.Version = 0
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = group
	dg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "cq", Partitions: []int32{0}}}
	dso.Groups = append(dso.Groups, dg)
	if r := m.send(f, dso).(*kmsg.DescribeShareGroupOffsetsResponse); len(r.Groups) != 1 || r.Groups[0].ErrorCode != 0 ||
		len(r.Groups[0].Topics) != 1 || r.Groups[0].Topics[0].Partitions[0].StartOffset != 40 {
		t.Fatalf("describe share group offsets at F: %+v", r.Groups)
	}

	// L stops with 50-59 acquired: X takes over and reads the state back.
	byID[l].Close()
	waitMetadata(t, cl, 30*time.Second, "cq led by X", func(md map[string]map[int32]partitionState) bool {
		p, ok := md["cq"][0]
		return ok && p.leader == x
	}, "cq")
	for i := 100; i < 150; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cq", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	m2 := &clusterShareMember{t: t, cl: cl, group: group, id: "member-b", session: map[int32]int32{}}
	got = map[int64]int16{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < 110 && time.Now().Before(deadline); {
		resp := m2.fetch(x, tid, 200, 500)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch on the new leader: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if code, _ := partitionCode(resp); code != 0 {
			time.Sleep(100 * time.Millisecond) // reading the state back
			continue
		}
		for o, d := range acquired(resp) {
			if _, dup := got[o]; dup {
				t.Fatalf("offset %d acquired twice on the new leader", o)
			}
			got[o] = d
		}
	}
	offs := make([]int64, 0, len(got))
	for o := range got {
		offs = append(offs, o)
	}
	slices.Sort(offs)
	if len(got) != 110 || offs[0] != 40 || offs[len(offs)-1] != 149 {
		t.Fatalf("the new leader delivered %d records (%v…), want 40-149", len(got), offs[:min(5, len(offs))])
	}
	for o, d := range got {
		want := int16(1)
		if o < 60 {
			want = 2 // released, or in flight on L when it stopped
		}
		if d != want {
			t.Errorf("offset %d: delivery count %d on the new leader, want %d", o, d, want)
		}
	}
	if code := m2.ack(x, tid, 40, 149, 1); code != 0 {
		t.Fatalf("accept on the new leader: %v", kerr.ErrorForCode(code))
	}
	sum = stateSummary(t, m, c, tid)
	xEpoch := byID[x].leaderPartition("cq", 0).LeaderEpoch.Load()
	if sum.StartOffset != 150 || sum.LeaderEpoch != xEpoch || xEpoch <= lEpoch {
		t.Fatalf("state summary after the new leader: start %d leader epoch %d, want 150 and %d (L had %d)", sum.StartOffset, sum.LeaderEpoch, xEpoch, lEpoch)
	}

	// A write from the old leader's epoch is fenced.
	w := kmsg.NewPtrWriteShareGroupStateRequest()
	w.GroupID = group
	wt := kmsg.NewWriteShareGroupStateRequestTopic()
	wt.TopicID = tid
	wp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	wp.LeaderEpoch, wp.StartOffset = lEpoch, 40
	wt.Partitions = append(wt.Partitions, wp)
	w.Topics = append(w.Topics, wt)
	if code := m.send(c, w).(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write at the old leader epoch: %v, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(code))
	}
}

// TestShareGroupClusterCoordinatorMoves: the share coordinator C of a
// group (the leader of its __share_group_state partition, three replicas
// here) stops while the partition's leader L serves the group's share
// partition with records in flight. Another node takes the
// __share_group_state partition over and replays it; L keeps its share
// partition and writes its next acknowledgements there (one sent while
// the state partition moves waits for the new coordinator): nothing
// accepted is delivered again, the released records are, and the state
// the new coordinator answers is L's. The member continues at its epoch
// on the new coordinator, which replayed the membership records too.
func TestShareGroupClusterCoordinatorMoves(t *testing.T) {
	nodes := startTestCluster(t)
	byID := map[int32]*testNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	cl := clusterClient(t, nodes, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testContext(t)
	const group = "cm"
	if _, err := nodes[0].ensureInternalTopic(ctx, share.StateTopic, nodes[0].cfg.ShareCoordinatorStateTopicNumPartitions, 3,
		map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	sp := nodes[0].shares.coord.PartitionFor(group)
	stateLeader := func(n *testNode) int32 {
		if st, ok := n.meta.Image().Topic(share.StateTopic); ok && len(st.Partitions[sp].ISR) == 3 {
			return st.Partitions[sp].Leader
		}
		return -1
	}
	var c int32 = -1
	for deadline := time.Now().Add(30 * time.Second); c < 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c = stateLeader(nodes[0])
	}
	if c < 0 {
		t.Fatal("no leader with a full ISR for the group's __share_group_state partition")
	}
	var others []int32
	for _, n := range nodes {
		if n.id != c {
			others = append(others, n.id)
		}
	}
	l, x := others[0], others[1]
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cm", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{l, x, c}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, rt)
	if cresp, err := create.RequestWith(ctx, cl); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create cm: %v %+v", err, cresp)
	}
	waitMetadata(t, cl, 30*time.Second, "cm led by L", func(md map[string]map[int32]partitionState) bool {
		p, ok := md["cm"][0]
		return ok && p.leader == l && len(p.isr) == 3
	}, "cm")
	setGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest")
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Topic: "cm", Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp, _ := nodes[0].meta.Image().Topic("cm")
	tid := tp.ID
	m := &clusterShareMember{t: t, cl: cl, group: group, id: "member-a", session: map[int32]int32{}}
	join := func(node int32) *kmsg.ShareGroupHeartbeatResponse {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, m.id, []string{"cm"}
		var r *kmsg.ShareGroupHeartbeatResponse
		for try := 0; try < 100; try++ {
			if r = m.send(node, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return r
	}
	if r := join(c); r.ErrorCode != 0 {
		t.Fatalf("join on C: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	got := map[int64]int16{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < 40 && time.Now().Before(deadline); {
		for o, d := range acquired(m.fetch(l, tid, int32(40-len(got)), 500)) {
			got[o] = d
		}
	}
	if len(got) != 40 {
		t.Fatalf("acquired %d records on L, want 40", len(got))
	}
	if code := m.ack(l, tid, 0, 19, 1); code != 0 {
		t.Fatalf("accept: %v", kerr.ErrorForCode(code))
	}
	if code := m.ack(l, tid, 20, 29, 2); code != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(code))
	}
	if sum := stateSummary(t, m, c, tid); sum.StartOffset != 20 {
		t.Fatalf("summary on C: start %d, want 20", sum.StartOffset)
	}

	byID[c].Close()
	// L still holds 30-39 for the member; its acceptance waits for the
	// new coordinator (the write is retried while the state partition
	// moves and loads) and is written there.
	if code := m.ack(l, tid, 30, 39, 1); code != 0 {
		t.Fatalf("accept on L while the coordinator moves: %v", kerr.ErrorForCode(code))
	}
	var c2 int32 = -1
	for deadline := time.Now().Add(30 * time.Second); c2 < 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, ok := byID[l].meta.Image().Topic(share.StateTopic); ok {
			if ld := st.Partitions[sp].Leader; ld >= 0 && ld != c {
				if sum := stateSummary(t, m, ld, tid); sum.ErrorCode == 0 && sum.StartOffset == 20 {
					c2 = ld
				}
			}
		}
	}
	if c2 < 0 {
		t.Fatal("no new share coordinator answering the state written on C")
	}
	got = map[int64]int16{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < 30 && time.Now().Before(deadline); {
		for o, d := range acquired(m.fetch(l, tid, 100, 500)) {
			if _, dup := got[o]; dup {
				t.Fatalf("offset %d acquired twice", o)
			}
			got[o] = d
		}
	}
	for o, d := range got {
		switch {
		case o < 20 || (o >= 30 && o < 40) || o >= 60:
			t.Fatalf("offset %d delivered again after its acceptance", o)
		case o < 30 && d != 2, o >= 40 && d != 1:
			t.Fatalf("offset %d: delivery count %d", o, d)
		}
	}
	if len(got) != 30 {
		t.Fatalf("redelivered %d records, want 20-29 and 40-59", len(got))
	}
	if code := m.ack(l, tid, 20, 29, 1); code != 0 {
		t.Fatalf("accept 20-29: %v", kerr.ErrorForCode(code))
	}
	if code := m.ack(l, tid, 40, 59, 1); code != 0 {
		t.Fatalf("accept 40-59: %v", kerr.ErrorForCode(code))
	}
	if sum := stateSummary(t, m, c2, tid); sum.StartOffset != 60 {
		t.Fatalf("summary on the new coordinator: start %d, want 60", sum.StartOffset)
	}
	// The membership records moved with the partition of
	// __share_group_state: the member continues at its epoch on the new
	// coordinator, without joining again.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = group, m.id, 1
	if r := m.send(c2, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("heartbeat at the new coordinator: %v, epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := join(c2); r.ErrorCode != 0 {
		t.Fatalf("join at the new coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
