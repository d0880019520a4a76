package broker

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// shareMember is a share consumer spoken to with raw requests over its own
// connection: its heartbeat epoch and share session epoch.
type shareMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	epoch   int32 // member epoch
	session int32 // next share session epoch
}

func newShareMember(t *testing.T, ts *testServer, group, id string) *shareMember {
	return &shareMember{t: t, cl: ts.client(t), group: group, id: id}
}

func (m *shareMember) heartbeat(epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = m.group, m.id, epoch, topics
	var resp *kmsg.ShareGroupHeartbeatResponse
	// The first request creates __share_group_state, whose partition
	// then loads: retry what Kafka's clients retry.
	for try := 0; ; try++ {
		r, err := req.RequestWith(testContext(m.t), m.cl)
		if err != nil {
			m.t.Fatalf("heartbeat %s: %v", m.id, err)
		}
		resp = r
		code := kerr.ErrorForCode(r.ErrorCode)
		if (code == kerr.NotCoordinator || code == kerr.CoordinatorLoadInProgress || code == kerr.CoordinatorNotAvailable) && try < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
	}
	return resp
}

type shareAckBatch struct {
	first, last int64
	typ         int8
}

// fetch sends a ShareFetch of the partitions with acks piggy-backed, at
// the member's session epoch, and moves the epoch on.
func (m *shareMember) fetch(topicID [16]byte, partition int32, maxRecords int32, maxWait int32, acks ...shareAckBatch) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWait, 1, 1<<20, maxRecords, maxRecords
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = topicID
	p := kmsg.NewShareFetchRequestTopicPartition()
	p.Partition = partition
	for _, a := range acks {
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
	}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(testContext(m.t), m.cl)
	if err != nil {
		m.t.Fatalf("share fetch %s: %v", m.id, err)
	}
	if resp.ErrorCode == 0 {
		m.session = nextShareEpoch(m.session)
	}
	return resp
}

func nextShareEpoch(e int32) int32 {
	if e == -1 {
		return 0
	}
	return e + 1
}

func (m *shareMember) ack(topicID [16]byte, partition int32, acks ...shareAckBatch) *kmsg.ShareAcknowledgeResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.session
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = topicID
	p := kmsg.NewShareAcknowledgeRequestTopicPartition()
	p.Partition = partition
	for _, a := range acks {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
	}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(testContext(m.t), m.cl)
	if err != nil {
		m.t.Fatalf("share acknowledge %s: %v", m.id, err)
	}
	if resp.ErrorCode == 0 {
		m.session = nextShareEpoch(m.session)
	}
	return resp
}

// acquiredOf returns the acquired ranges of the only partition of a
// ShareFetch answer, the offsets of the records it carries, and the
// partition's fetch and acknowledge error codes.
func acquiredOf(t *testing.T, resp *kmsg.ShareFetchResponse) (acq []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, offsets []int64, code, ackCode int16) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			acq = append(acq, p.AcquiredRecords...)
			code, ackCode = p.ErrorCode, p.AcknowledgeErrorCode
			offsets = append(offsets, recordOffsets(t, p.Records)...)
		}
	}
	return acq, offsets, code, ackCode
}

// recordOffsets decodes record batches as a consumer does and returns
// the offsets of their records.
func recordOffsets(t *testing.T, data []byte) []int64 {
	t.Helper()
	var out []int64
	rest := data
	for len(rest) > 0 {
		batch, next, _, err := protocol.NextBatch(rest)
		if err != nil {
			t.Fatalf("decode batch: %v", err)
		}
		rest = next
		err = protocol.DecodeBatch(batch, 1<<20, func(h *protocol.BatchHeader, r protocol.Record) error {
			out = append(out, h.BaseOffset+int64(r.OffsetDelta))
			return nil
		})
		if err != nil {
			t.Fatalf("decode records: %v", err)
		}
	}
	return out
}

// offsetsIn expands acquired ranges, checking each has deliveries.
func offsetsIn(t *testing.T, acq []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, deliveries int16) []int64 {
	t.Helper()
	var out []int64
	for _, a := range acq {
		if a.DeliveryCount != deliveries {
			t.Errorf("acquired %d-%d with delivery count %d, want %d", a.FirstOffset, a.LastOffset, a.DeliveryCount, deliveries)
		}
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			out = append(out, o)
		}
	}
	return out
}

func span(first, last int64) []int64 {
	var out []int64
	for o := first; o <= last; o++ {
		out = append(out, o)
	}
	return out
}

func shareTestConfig(c *config.Broker) {
	c.GroupShareRecordLockDurationMs = 1000
	c.GroupShareDeliveryCountLimit = shareTestDeliveryLimit
	c.GroupShareHeartbeatIntervalMs = 500
	// A target on every membership change, as the tests below count
	// epochs; TestShareGroupAssignmentIntervalWire covers the interval.
	c.GroupShareAssignmentIntervalMs = 0
	c.ShareCoordinatorStateTopicNumPartitions = 3
}

// produceOneByOne produces n records to partition 0 of topic, each in a
// batch of its own, so that acquisitions follow record counts exactly.
func produceOneByOne(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte{byte(i)}}
		if err := cl.ProduceSync(testContext(t), r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// TestShareGroupMembership: three members join a share group on a
// one-partition topic; the simple assignor gives each of them the
// partition; ShareGroupDescribe, ListGroups and DeleteGroups show and
// delete the group as Kafka does; a leaving member moves the epoch.
func TestShareGroupMembership(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	adm := ts.admin(t)
	createTopic(t, adm, "sq", 1, nil)
	createTopic(t, adm, "sq2", 4, nil)
	tid := topicID(t, ts, "sq")

	ms := []*shareMember{newShareMember(t, ts, "sg", "m1"), newShareMember(t, ts, "sg", "m2"), newShareMember(t, ts, "sg", "m3")}
	for i, m := range ms {
		resp := m.heartbeat(0, []string{"sq"})
		if resp.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m.id, kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.MemberEpoch != int32(i+1) || resp.HeartbeatIntervalMillis != 500 {
			t.Errorf("join %s: epoch %d interval %d, want %d 500", m.id, resp.MemberEpoch, resp.HeartbeatIntervalMillis, i+1)
		}
		if resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 || resp.Assignment.TopicPartitions[0].TopicID != tid ||
			!slices.Equal(resp.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
			t.Errorf("join %s: assignment %+v, want sq[0]", m.id, resp.Assignment)
		}
	}
	// A stale epoch is fenced; the current one is not.
	if resp := ms[0].heartbeat(ms[0].epoch+5, nil); resp.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Errorf("stale epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := ms[0].heartbeat(ms[0].epoch, nil); resp.ErrorCode != 0 || resp.MemberEpoch != 3 {
		t.Errorf("heartbeat m1: %v epoch %d, want epoch 3", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch)
	}

	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.GroupIDs = []string{"sg", "nosuch"}
	dr, err := d.RequestWith(testContext(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	g := dr.Groups[0]
	if g.ErrorCode != 0 || g.GroupState != "Stable" || g.GroupEpoch != 3 || g.Assignor != "simple" || len(g.Members) != 3 {
		t.Fatalf("describe sg: %+v", g)
	}
	for _, mem := range g.Members {
		if len(mem.Assignment.TopicPartitions) != 1 || mem.Assignment.TopicPartitions[0].Topic != "sq" || !slices.Equal(mem.SubscribedTopicNames, []string{"sq"}) {
			t.Errorf("describe member %s: %+v", mem.MemberID, mem)
		}
	}
	if dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code || dr.Groups[1].GroupState != "" {
		t.Errorf("describe unknown: %+v", dr.Groups[1])
	}

	l := kmsg.NewPtrListGroupsRequest()
	lr, err := l.RequestWith(testContext(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, lg := range lr.Groups {
		if lg.Group == "sg" {
			found = lg.GroupType == "share" && lg.ProtocolType == "share" && lg.GroupState == "Stable"
		}
	}
	if !found {
		t.Errorf("ListGroups: %+v", lr.Groups)
	}
	l.TypesFilter = []string{"consumer"}
	if lr, _ = l.RequestWith(testContext(t), ts.client(t)); slices.ContainsFunc(lr.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == "sg" }) {
		t.Errorf("ListGroups types=consumer lists the share group")
	}

	// A group with members is not deleted.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"sg"}
	if r, err := del.RequestWith(testContext(t), ts.client(t)); err != nil || r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete non-empty: %v %+v", err, r)
	}
	// Four members over a four-partition topic: one partition each.
	for _, m := range ms {
		if resp := m.heartbeat(-1, nil); resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
			t.Fatalf("leave %s: %v", m.id, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	var spread []int32
	var ws []*shareMember
	for i := range 4 {
		m := newShareMember(t, ts, "sg2", "w"+string(rune('a'+i)))
		m.heartbeat(0, []string{"sq2"})
		ws = append(ws, m)
	}
	// Members take up the new target on their next heartbeat.
	for _, m := range ws {
		if resp := m.heartbeat(m.epoch, nil); resp.MemberEpoch != 4 {
			t.Fatalf("sg2 %s: epoch %d assignment %v", m.id, resp.MemberEpoch, resp.Assignment)
		}
	}
	d.GroupIDs = []string{"sg2"}
	dr, _ = d.RequestWith(testContext(t), ts.client(t))
	for _, mem := range dr.Groups[0].Members {
		if len(mem.Assignment.TopicPartitions) != 1 || len(mem.Assignment.TopicPartitions[0].Partitions) != 1 {
			t.Fatalf("sg2 member %s: %+v", mem.MemberID, mem.Assignment)
		}
		spread = append(spread, mem.Assignment.TopicPartitions[0].Partitions[0])
	}
	slices.Sort(spread)
	if !slices.Equal(spread, []int32{0, 1, 2, 3}) {
		t.Errorf("sg2 spread %v", spread)
	}

	if r, err := del.RequestWith(testContext(t), ts.client(t)); err != nil || r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty: %v %+v", err, r)
	}
	d.GroupIDs = []string{"sg"}
	if dr, _ = d.RequestWith(testContext(t), ts.client(t)); dr.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe deleted: %+v", dr.Groups[0])
	}
}

// TestShareGroupSessionTimeout: a member that stops heartbeating leaves
// after group.share.session.timeout.ms.
func TestShareGroupSessionTimeout(t *testing.T) {
	ts := startServer(t, "", shareTestConfig, func(c *config.Broker) {
		c.GroupShareSessionTimeoutMs = 1000
	})
	createTopic(t, ts.admin(t), "st", 1, nil)
	a, b := newShareMember(t, ts, "sto", "a"), newShareMember(t, ts, "sto", "b")
	a.heartbeat(0, []string{"st"})
	b.heartbeat(0, []string{"st"})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		resp := a.heartbeat(a.epoch, nil)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat a: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.MemberEpoch == 3 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if a.epoch != 3 {
		t.Fatalf("a's epoch %d after b's session ended, want 3", a.epoch)
	}
	if resp := b.heartbeat(b.epoch, nil); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("b after timeout: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestShareGroupThreeConsumers: three share consumers on one partition
// over real connections. Every record is delivered to exactly one of them,
// accepted records are done, released ones come back with their delivery
// count raised, rejected ones are archived, records held past the lock
// duration are delivered again, and at the delivery limit a release
// archives.
func TestShareGroupThreeConsumers(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	createTopic(t, ts.admin(t), "q3", 1, nil)
	tid := topicID(t, ts, "q3")
	ms := []*shareMember{newShareMember(t, ts, "g3", "c1"), newShareMember(t, ts, "g3", "c2"), newShareMember(t, ts, "g3", "c3")}
	for _, m := range ms {
		if resp := m.heartbeat(0, []string{"q3"}); resp.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m.id, kerr.ErrorForCode(resp.ErrorCode))
		}
		// Open the share session: nothing to read yet (latest).
		if acq, _, code, _ := acquiredOf(t, m.fetch(tid, 0, 10, 0)); len(acq) != 0 || code != 0 {
			t.Fatalf("open %s: %v %d", m.id, acq, code)
		}
	}
	produceOneByOne(t, ts.client(t), "q3", 30)

	got := map[*shareMember][]int64{}
	var all []int64
	for _, m := range ms {
		acq, recs, code, _ := acquiredOf(t, m.fetch(tid, 0, 10, 2000))
		offs := offsetsIn(t, acq, 1)
		if code != 0 || len(offs) != 10 || !slices.Equal(recs, offs) {
			t.Fatalf("%s acquired %v (records %v, code %d), want 10 records", m.id, offs, recs, code)
		}
		got[m] = offs
		all = append(all, offs...)
	}
	slices.Sort(all)
	if !slices.Equal(all, span(0, 29)) {
		t.Fatalf("delivered %v, want each of 0-29 once", all)
	}

	// c1 accepts through ShareAcknowledge; c3 rejects; c2 releases,
	// piggy-backed on its next fetch, which gets them back as second
	// deliveries.
	c1, c2, c3 := ms[0], ms[1], ms[2]
	r1 := c1.ack(tid, 0, shareAckBatch{got[c1][0], got[c1][9], 1})
	if r1.ErrorCode != 0 || r1.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("c1 accept: %+v", r1)
	}
	if r := c3.ack(tid, 0, shareAckBatch{got[c3][0], got[c3][9], 3}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("c3 reject: %+v", r)
	}
	// Nobody acknowledges what another holds.
	if r := c3.ack(tid, 0, shareAckBatch{got[c2][0], got[c2][0], 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("c3 acks c2's record: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	acq, _, _, ackCode := acquiredOf(t, c2.fetch(tid, 0, 10, 2000, shareAckBatch{got[c2][0], got[c2][9], 2}))
	if ackCode != 0 || !slices.Equal(offsetsIn(t, acq, 2), got[c2]) {
		t.Fatalf("c2 after release: %v (ack %v)", acq, kerr.ErrorForCode(ackCode))
	}
	// c2 holds them past the lock: c1 gets them, third delivery.
	time.Sleep(1200 * time.Millisecond)
	acq, _, _, _ = acquiredOf(t, c1.fetch(tid, 0, 10, 2000))
	if !slices.Equal(offsetsIn(t, acq, 3), got[c2]) {
		t.Fatalf("c1 after c2's lock ended: %v", acq)
	}
	// c2's late acknowledgement is refused: it no longer holds them.
	if r := c2.ack(tid, 0, shareAckBatch{got[c2][0], got[c2][9], 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("c2 late accept: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// Released at the delivery limit (3): archived, never delivered again.
	acq, _, _, ackCode = acquiredOf(t, c1.fetch(tid, 0, 10, 300, shareAckBatch{got[c2][0], got[c2][9], 2}))
	if ackCode != 0 || len(acq) != 0 {
		t.Fatalf("c1 release at limit: %v (ack %v)", acq, kerr.ErrorForCode(ackCode))
	}
	info, ok := ts.shares.coord.Partition(testContext(t), "g3", tid, 0)
	if !ok || info.Start != 30 || len(info.InFlight) != 0 {
		t.Fatalf("share partition: %+v", info)
	}

	// Session epochs: a wrong one and an unknown session are refused.
	c3.session = 77
	if r := c3.fetch(tid, 0, 10, 0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong session epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	stranger := newShareMember(t, ts, "g3", "nobody")
	stranger.session = 1
	if r := stranger.fetch(tid, 0, 10, 0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareGroupRestart: acknowledgements survive a restart of gregor;
// what was in flight is delivered again, nothing acknowledged is.
func TestShareGroupRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, shareTestConfig)
	createTopic(t, ts.admin(t), "qr", 1, nil)
	tid := topicID(t, ts, "qr")
	m := newShareMember(t, ts, "gr", "a")
	m.heartbeat(0, []string{"qr"})
	m.fetch(tid, 0, 10, 0)
	produceOneByOne(t, ts.client(t), "qr", 10)
	acq, _, _, _ := acquiredOf(t, m.fetch(tid, 0, 10, 2000))
	if !slices.Equal(offsetsIn(t, acq, 1), span(0, 9)) {
		t.Fatalf("first delivery: %v", acq)
	}
	if r := m.ack(tid, 0, shareAckBatch{0, 3, 1}, shareAckBatch{4, 4, 3}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ack: %+v", r)
	}
	m.cl.Close()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}

	ts = startServer(t, dir, shareTestConfig)
	m = newShareMember(t, ts, "gr", "a")
	if resp := m.heartbeat(0, []string{"qr"}); resp.ErrorCode != 0 {
		t.Fatalf("rejoin: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	var offs []int64
	for try := 0; try < 50 && len(offs) == 0; try++ {
		r := m.fetch(tid, 0, 10, 500)
		if r.ErrorCode != 0 {
			// The partition may still be loading.
			m.session = 0
			time.Sleep(100 * time.Millisecond)
			continue
		}
		acq, _, _, _ = acquiredOf(t, r)
		offs = offsetsIn(t, acq, 2)
	}
	if !slices.Equal(offs, span(5, 9)) {
		t.Fatalf("after restart: %v, want 5-9 delivered a second time", offs)
	}
}

// groupConfigRequest sets one group config.
func groupConfigRequest(group, name, value string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	return req
}

// setGroupConfig sets one group config through IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) {
	t.Helper()
	resp, err := groupConfigRequest(group, name, value).RequestWith(testContext(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set %s=%s on group %s: %v %+v", name, value, group, err, resp)
	}
}

// TestShareGroupFranzGo: three franz-go share consumers (kgo.ShareGroup)
// on one partition, with the group's share.auto.offset.reset set to
// earliest as a GROUP config: together they read every record produced
// before they started exactly once and accept it; the share partition
// ends with everything acknowledged.
func TestShareGroupFranzGo(t *testing.T) {
	ts := startServer(t, "", shareTestConfig, func(c *config.Broker) { c.GroupShareRecordLockDurationMs = 30_000 })
	adm := ts.client(t)
	createTopic(t, ts.admin(t), "kq", 1, nil)
	setGroupConfig(t, adm, "kg", "share.auto.offset.reset", "earliest")

	d := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "kg"
	dr.ConfigNames = []string{"share.auto.offset.reset"}
	d.Resources = append(d.Resources, dr)
	if resp, err := d.RequestWith(testContext(t), adm); err != nil || len(resp.Resources[0].Configs) != 1 ||
		*resp.Resources[0].Configs[0].Value != "earliest" || resp.Resources[0].Configs[0].Source != 8 {
		t.Fatalf("describe group config: %v %+v", err, resp)
	}
	// An unknown group config is refused, as Kafka.
	bad := kmsg.NewPtrIncrementalAlterConfigsRequest()
	br := kmsg.NewIncrementalAlterConfigsRequestResource()
	br.ResourceType, br.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "kg"
	bc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "1"
	bc.Name, bc.Value = "share.nonsense", &v
	br.Configs = append(br.Configs, bc)
	bad.Resources = append(bad.Resources, br)
	if resp, err := bad.RequestWith(testContext(t), adm); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("unknown group config: %v %+v", err, resp)
	}

	const n = 300
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "kq", Value: []byte(strconv.Itoa(i))})
	}
	if err := adm.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 3 {
		cl := ts.client(t, kgo.ShareGroup("kg"), kgo.ConsumeTopics("kq"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(_ string, _ int32, err error) {
					if ctx.Err() == nil {
						t.Errorf("share fetch: %v", err)
					}
				})
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					seen[r.Offset]++
					if r.DeliveryCount() != 1 {
						t.Errorf("offset %d delivered with count %d", r.Offset, r.DeliveryCount())
					}
				})
				cl.MarkAcks(kgo.AckAccept)
				done := len(seen) == n
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("the share group read %d of %d records", len(seen), n)
	}
	for off, c := range seen {
		if c != 1 {
			t.Errorf("offset %d read %d times", off, c)
		}
	}
	tid := topicID(t, ts, "kq")
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := ts.shares.coord.Partition(testContext(t), "kg", tid, 0)
		if info.Start == n && len(info.InFlight) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share partition after the consumers closed: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShareGroupOffsets: AlterShareGroupOffsets moves a share partition's
// start offset, which DescribeShareGroupOffsets reads back with the lag
// and a fetch starts from; a group with members may not be altered;
// DeleteShareGroupOffsets forgets the topic.
func TestShareGroupOffsets(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	cl := ts.client(t)
	createTopic(t, ts.admin(t), "qo", 1, nil)
	tid := topicID(t, ts, "qo")
	produceOneByOne(t, cl, "qo", 20)

	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "go"
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = "qo"
	ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	ap.Partition, ap.StartOffset = 0, 12
	at.Partitions = append(at.Partitions, ap)
	alter.Topics = append(alter.Topics, at)
	ar, err := alter.RequestWith(testContext(t), cl)
	if err != nil || ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 || ar.Topics[0].TopicID != tid {
		t.Fatalf("alter: %v %+v", err, ar)
	}
	describe := func() kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
		t.Helper()
		d := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		d.Groups = append(d.Groups, kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: "go"})
		dr, err := d.RequestWith(testContext(t), cl)
		if err != nil || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Topics) != 1 || dr.Groups[0].Topics[0].Topic != "qo" {
			t.Fatalf("describe: %v %+v", err, dr)
		}
		return dr.Groups[0].Topics[0].Partitions[0]
	}
	if p := describe(); p.StartOffset != 12 || p.Lag != 8 {
		t.Fatalf("describe after alter: start %d lag %d, want 12 and 8", p.StartOffset, p.Lag)
	}
	m := newShareMember(t, ts, "go", "a")
	m.heartbeat(0, []string{"qo"})
	acq, _, _, _ := acquiredOf(t, m.fetch(tid, 0, 100, 1000))
	if offs := offsetsIn(t, acq, 1); !slices.Equal(offs, span(12, 19)) {
		t.Fatalf("fetch after alter: %v", offs)
	}
	m.ack(tid, 0, shareAckBatch{12, 15, 1})
	if p := describe(); p.StartOffset != 16 || p.Lag != 4 {
		t.Fatalf("describe after accept: start %d lag %d, want 16 and 4", p.StartOffset, p.Lag)
	}
	if ar, _ = alter.RequestWith(testContext(t), cl); ar.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with members: %v", kerr.ErrorForCode(ar.ErrorCode))
	}
	m.heartbeat(-1, nil)
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "go"
	del.Topics = append(del.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "qo"}, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "nosuch"})
	dr, err := del.RequestWith(testContext(t), cl)
	if err != nil || dr.ErrorCode != 0 || dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	if _, ok := ts.shares.coord.Partition(testContext(t), "go", tid, 0); ok {
		t.Fatal("share partition still there after DeleteShareGroupOffsets")
	}
}

// TestShareSessionEndsWithConnection: records a member holds are released
// as soon as its connection closes, before their locks end.
func TestShareSessionEndsWithConnection(t *testing.T) {
	ts := startServer(t, "", shareTestConfig, func(c *config.Broker) { c.GroupShareRecordLockDurationMs = 60_000 })
	createTopic(t, ts.admin(t), "qc", 1, nil)
	tid := topicID(t, ts, "qc")
	a, b := newShareMember(t, ts, "gc", "a"), newShareMember(t, ts, "gc", "b")
	a.heartbeat(0, []string{"qc"})
	b.heartbeat(0, []string{"qc"})
	a.fetch(tid, 0, 10, 0)
	b.fetch(tid, 0, 10, 0)
	produceOneByOne(t, ts.client(t), "qc", 5)
	acq, _, _, _ := acquiredOf(t, a.fetch(tid, 0, 10, 2000))
	if !slices.Equal(offsetsIn(t, acq, 1), span(0, 4)) {
		t.Fatalf("a: %v", acq)
	}
	a.cl.Close()
	var offs []int64
	for try := 0; try < 50 && len(offs) == 0; try++ {
		acq, _, _, _ = acquiredOf(t, b.fetch(tid, 0, 10, 100))
		offs = offsetsIn(t, acq, 2)
	}
	if !slices.Equal(offs, span(0, 4)) {
		t.Fatalf("b after a's connection closed: %v", offs)
	}
}

// TestShareGroupReadCommitted: with share.isolation.level=read_committed a
// share group never gets the records of an aborted transaction, nor the
// transaction markers, and gets the committed ones; without it, it gets
// them all.
func TestShareGroupReadCommitted(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	createTopic(t, ts.admin(t), "qt", 1, nil)
	tid := topicID(t, ts, "qt")
	adm := ts.client(t)
	for _, g := range []string{"rc", "ru"} {
		setGroupConfig(t, adm, g, "share.auto.offset.reset", "earliest")
	}
	setGroupConfig(t, adm, "rc", "share.isolation.level", "read_committed")

	txn := ts.client(t, kgo.TransactionalID("share-txn"), kgo.DefaultProduceTopic("qt"))
	ctx := testContext(t)
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets 0-2 aborted, 3 its marker, 4-6 committed, 7 its marker.
	read := func(group string) []int64 {
		m := newShareMember(t, ts, group, "m")
		m.heartbeat(0, []string{"qt"})
		var offs []int64
		for try := 0; try < 10 && len(offs) == 0; try++ {
			acq, recs, _, _ := acquiredOf(t, m.fetch(tid, 0, 100, 300))
			for _, o := range offsetsIn(t, acq, 1) {
				if slices.Contains(recs, o) {
					offs = append(offs, o)
				}
			}
		}
		return offs
	}
	if got := read("rc"); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Errorf("read_committed share group got %v, want 4-6", got)
	}
	if got := read("ru"); !slices.Equal(got, []int64{0, 1, 2, 4, 5, 6}) {
		t.Errorf("read_uncommitted share group got %v, want 0-2 and 4-6", got)
	}
	info, _ := ts.shares.coord.Partition(ctx, "rc", tid, 0)
	if info.InFlight["ACQUIRED"]+info.InFlight["AVAILABLE"] != 3 || info.Start != 4 {
		t.Errorf("read_committed share partition: %+v", info)
	}
}

// TestShareGroupHistory: three share consumers acknowledge at random
// (accept, release, reject, or hold past the lock), and gregor restarts
// halfway. The history checks the rules: no delivery beyond the delivery
// limit, nothing delivered again once accepted or rejected, and in the
// end every record accepted or archived, none lost.
func TestShareGroupHistory(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, shareTestConfig)
	createTopic(t, ts.admin(t), "qh", 1, nil)
	tid := topicID(t, ts, "qh")
	const n = 120
	join := func() []*shareMember {
		var ms []*shareMember
		for _, id := range []string{"x", "y", "z"} {
			m := newShareMember(t, ts, "gh", id)
			if resp := m.heartbeat(0, []string{"qh"}); resp.ErrorCode != 0 {
				t.Fatalf("join %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
			}
			ms = append(ms, m)
		}
		return ms
	}
	setGroupConfig(t, ts.client(t), "gh", "share.auto.offset.reset", "earliest")
	produceOneByOne(t, ts.client(t), "qh", n)
	ms := join()

	rng := rand.New(rand.NewPCG(7, 15))
	done := map[int64]string{} // offset → "accepted" or "rejected"
	held := map[*shareMember][]int64{}
	deliveries := map[int64]int{}
	deadline := time.Now().Add(90 * time.Second)
	for round := 0; ; round++ {
		if round == 12 {
			for _, m := range ms {
				m.cl.Close()
			}
			if err := ts.Close(); err != nil {
				t.Fatal(err)
			}
			ts = startServer(t, dir, shareTestConfig)
			ms = join()
			held = map[*shareMember][]int64{}
		}
		for _, m := range ms {
			var acks []shareAckBatch
			pending := map[int64]int8{}
			for _, o := range held[m] {
				switch r := rng.IntN(20); {
				case r < 12:
					pending[o] = 1
				case r < 16:
					pending[o] = 2
				case r < 18:
					pending[o] = 3
				}
				// otherwise held past its lock
			}
			for o, typ := range pending {
				acks = append(acks, shareAckBatch{o, o, typ})
			}
			slices.SortFunc(acks, func(a, b shareAckBatch) int { return int(a.first - b.first) })
			resp := m.fetch(tid, 0, 7, 100, acks...)
			if resp.ErrorCode != 0 {
				// The new incarnation may still be loading: start over.
				m.session = 0
				held[m] = nil
				continue
			}
			acq, _, _, ackCode := acquiredOf(t, resp)
			if ackCode == 0 {
				for o, typ := range pending {
					switch typ {
					case 1:
						done[o] = "accepted"
					case 3:
						done[o] = "rejected"
					}
				}
			}
			held[m] = nil
			for _, a := range acq {
				if int32(a.DeliveryCount) > shareTestDeliveryLimit {
					t.Fatalf("offsets %d-%d delivered with count %d, over the limit", a.FirstOffset, a.LastOffset, a.DeliveryCount)
				}
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					if why, ok := done[o]; ok {
						t.Fatalf("offset %d delivered again after it was %s", o, why)
					}
					deliveries[o]++
					held[m] = append(held[m], o)
				}
			}
		}
		info, ok := ts.shares.coord.Partition(testContext(t), "gh", tid, 0)
		if ok && info.Start == n && len(info.InFlight) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds the share partition is %+v", round, info)
		}
		if round%5 == 4 {
			for _, m := range ms {
				m.heartbeat(m.epoch, nil)
			}
		}
	}
	for o := range int64(n) {
		if deliveries[o] == 0 {
			t.Errorf("offset %d never delivered", o)
		}
	}
	t.Logf("%d accepted, %d rejected by the consumers, the rest archived at the delivery limit", countOf(done, "accepted"), countOf(done, "rejected"))
}

const shareTestDeliveryLimit = 3

func countOf(m map[int64]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// TestShareGroupDeletedRecords: records deleted from the log
// (DeleteRecords) before the group finished them leave the share
// partition, whose start offset moves to the log start offset.
func TestShareGroupDeletedRecords(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	cl := ts.client(t)
	createTopic(t, ts.admin(t), "qd", 1, nil)
	tid := topicID(t, ts, "qd")
	setGroupConfig(t, cl, "gd", "share.auto.offset.reset", "earliest")
	produceOneByOne(t, cl, "qd", 10)
	m := newShareMember(t, ts, "gd", "a")
	m.heartbeat(0, []string{"qd"})
	acq, _, _, _ := acquiredOf(t, m.fetch(tid, 0, 4, 1000))
	if !slices.Equal(offsetsIn(t, acq, 1), span(0, 3)) {
		t.Fatalf("first fetch: %v", acq)
	}
	m.ack(tid, 0, shareAckBatch{0, 3, 2}) // released: available again
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "qd"
	dt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 6}}
	dr.Topics = append(dr.Topics, dt)
	dr.TimeoutMillis = 5000
	if resp, err := dr.RequestWith(testContext(t), cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
	acq, _, _, _ = acquiredOf(t, m.fetch(tid, 0, 100, 1000))
	if !slices.Equal(offsetsIn(t, acq, 1), span(6, 9)) {
		t.Fatalf("after DeleteRecords: %v, want 6-9", acq)
	}
	if info, _ := ts.shares.coord.Partition(testContext(t), "gd", tid, 0); info.Start != 6 || info.InFlight["ACQUIRED"] != 4 || len(info.InFlight) != 1 {
		t.Fatalf("share partition after DeleteRecords: %+v", info)
	}
}

// TestShareGroupIDConflicts: one group id holds one kind of group. A share
// member cannot join a consumer group's id, and classic or consumer
// members cannot join a share group's.
func TestShareGroupIDConflicts(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	cl := ts.client(t)
	createTopic(t, ts.admin(t), "qi", 1, nil)
	m := newShareMember(t, ts, "shared-id", "a")
	if resp := m.heartbeat(0, []string{"qi"}); resp.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.ProtocolType, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = "shared-id", "consumer", 10000, 10000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if resp, err := j.RequestWith(testContext(t), cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic join of a share group id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	c := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	c.Group, c.MemberID, c.MemberEpoch, c.SubscribedTopicNames, c.RebalanceTimeoutMillis = "shared-id", "c1", 0, []string{"qi"}, 10000
	c.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, err := c.RequestWith(testContext(t), cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer join of a share group id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	c.Group = "consumer-id"
	if resp, err := c.RequestWith(testContext(t), cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("consumer join: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	other := newShareMember(t, ts, "consumer-id", "b")
	if resp := other.heartbeat(0, []string{"qi"}); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share join of a consumer group id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestShareGroupRenewAndRecordLimit: a RENEW acknowledgement (v2,
// KIP-1222) keeps records past their first lock, and the record-limit
// acquire mode (KIP-1206) acquires exactly MaxRecords out of a larger
// batch, where the default mode hands the whole batch.
func TestShareGroupRenewAndRecordLimit(t *testing.T) {
	ts := startServer(t, "", shareTestConfig)
	cl := ts.client(t)
	createTopic(t, ts.admin(t), "qn", 1, nil)
	tid := topicID(t, ts, "qn")
	setGroupConfig(t, cl, "gn", "share.auto.offset.reset", "earliest")
	// One batch of 10 records.
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "qn", Partition: 0, Value: []byte{byte(i)}})
	}
	batcher := ts.client(t, kgo.ProducerLinger(50*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := batcher.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a, b := newShareMember(t, ts, "gn", "a"), newShareMember(t, ts, "gn", "b")
	a.heartbeat(0, []string{"qn"})
	b.heartbeat(0, []string{"qn"})

	limited := func(m *shareMember, maxRecords int32) []int64 {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version = 2
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.session
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 500, 1, 1<<20, maxRecords, maxRecords
		req.ShareAcquireMode = 1
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		resp, err := req.RequestWith(testContext(t), m.cl)
		if err != nil {
			t.Fatal(err)
		}
		m.session = nextShareEpoch(m.session)
		acq, _, _, _ := acquiredOf(t, resp)
		return offsetsIn(t, acq, 1)
	}
	if got := limited(a, 3); !slices.Equal(got, span(0, 2)) {
		t.Fatalf("record-limit mode: %v, want 0-2", got)
	}
	// The default mode finishes the batch.
	acq, _, _, _ := acquiredOf(t, b.fetch(tid, 0, 3, 500))
	if got := offsetsIn(t, acq, 1); !slices.Equal(got, span(3, 9)) {
		t.Fatalf("batch-optimized mode: %v, want 3-9", got)
	}
	if r := b.ack(tid, 0, shareAckBatch{3, 8, 1}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("b accepts: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	renew := func() {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = 2
		req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = &a.group, &a.id, a.session, true
		req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
			AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{4}}}}}}}
		resp, err := req.RequestWith(testContext(t), a.cl)
		if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 1000 {
			t.Fatalf("renew: %v %+v", err, resp)
		}
		a.session = nextShareEpoch(a.session)
	}
	// Renewed every 600 ms, a's records outlive their 1 s lock.
	for range 3 {
		time.Sleep(600 * time.Millisecond)
		renew()
	}
	// b's unacknowledged 9 came back after its lock; a's 0-2 did not.
	if acq, _, _, _ := acquiredOf(t, b.fetch(tid, 0, 10, 0)); !slices.Equal(offsetsIn(t, acq, 2), []int64{9}) {
		t.Fatalf("b after a's renewals: %v, want only 9 again", acq)
	}
	if r := a.ack(tid, 0, shareAckBatch{0, 2, 1}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accept after renewals: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// Without IsRenewAck, a RENEW is refused.
	if r := b.ack(tid, 0, shareAckBatch{9, 9, 4}); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("renew without IsRenewAck: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestShareStateTopicFollowsOffsetsTopic: __share_group_state takes
// __consumer_offsets' replica assignment, so that a group's coordinator
// (found through __consumer_offsets) also leads its share state.
func TestShareStateTopicFollowsOffsetsTopic(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "qf", 1, nil)
	m := newShareMember(t, ts, "gf", "a")
	if resp := m.heartbeat(0, []string{"qf"}); resp.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	img := ts.meta.Image()
	offsets, ok1 := img.Topic(offsetsTopic)
	state, ok2 := img.Topic(share.StateTopic)
	if !ok1 || !ok2 || len(state.Partitions) != len(offsets.Partitions) || len(state.Partitions) != 50 {
		t.Fatalf("topics: %v %v", ok1, ok2)
	}
	for i := range state.Partitions {
		if !slices.Equal(state.Partitions[i].Replicas, offsets.Partitions[i].Replicas) {
			t.Errorf("partition %d: replicas %v, __consumer_offsets has %v", i, state.Partitions[i].Replicas, offsets.Partitions[i].Replicas)
		}
	}
	if got, want := ts.shares.coord.PartitionFor("gf"), ts.groups.coord.PartitionFor("gf"); got != want {
		t.Errorf("group gf: share state partition %d, __consumer_offsets partition %d", got, want)
	}
	if !isInternalTopic(share.StateTopic) {
		t.Error("__share_group_state is not internal")
	}
}
