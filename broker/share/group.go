package share

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// timerKey names a shard timer: a member's session or a share partition's
// next lock expiry.
type timerKey struct {
	kind   uint8
	group  string
	member string
	part   partKey
}

const (
	timerMember uint8 = iota + 1
	timerLocks
)

type shard = coord.Shard[timerKey, *machine]

// machine is one shard's state: the __share_group_state partitions it
// serves and their groups. Only the shard goroutine touches it.
type machine struct {
	cfg   Config
	log   *slog.Logger
	s     *shard
	clock coord.Clock

	loaded  map[int32]bool
	loading map[int32]uint64 // partition → load token
	tokens  uint64
	groups  map[string]*groupState
	// pending are the membership records (members.go) of the operation
	// under way, by __share_group_state partition, written before it
	// answers.
	pending map[int32][]Record
	// inits are the share partitions the operation under way assigned
	// for the first time; their state is initialized once its membership
	// records are written (revert.go), as Kafka initializes them after
	// the heartbeat's records are committed.
	inits []pendingInit
}

// groupState is one share group.
type groupState struct {
	id        string
	partition int32 // of __share_group_state
	epoch     int32 // the group epoch
	members   map[string]*member
	target    map[string]assignment // member → partitions, at assignmentEpoch
	// assignmentEpoch is the group epoch the target was computed at, and
	// assignmentTimestampMs when (0: unknown); the next target waits for
	// share.assignment.interval.ms after it, as Kafka 4.4's.
	assignmentEpoch       int32
	assignmentTimestampMs int64
	parts                 map[partKey]*partitionState
	sessions              map[string]*session // share sessions by member id
	// waiters are the long-polling fetches to wake when a share
	// partition changes (see machine.wake).
	waiters map[partKey][]chan struct{}
	// durable is the durable state of the group's share partitions, kept
	// where this node is the group's share coordinator (state.go); parts
	// are the share partitions this node serves as their leader.
	durable map[partKey]*snapshotValue
	// writeQ are the writes waiting for the share coordinator of a group
	// another node serves, by share partition, and writing says one
	// round of them is in flight (see machine.flushWrites).
	writeQ  map[partKey][]func(int16)
	writing bool
	// version counts the membership changes queued (machine.record): a
	// failed write is reverted only when nothing changed since (revert.go).
	version uint64
	// deferred are failed operations waiting for the outcome of later
	// ones built on them (machine.revertOne).
	deferred []*membershipUndo
	// unloads counts the unloads of the group's partition while the
	// group stayed in memory (it has share partitions led here): a write
	// failing across one is not reverted.
	unloads uint64
	// exists says the group was created on its coordinator (a member
	// joined, its offsets were altered, its state was loaded), as
	// opposed to known here only from fetches of partitions this node
	// leads.
	exists bool
}

// assignment is a member's partitions by topic id.
type assignment map[[16]byte][]int32

// member is a share group member.
type member struct {
	id         string
	epoch      int32
	rack       *string
	clientID   string
	clientHost string
	subscribed []string
	assigned   assignment
	// sessionDeadline is when the member's session timer fires, kept so
	// that a reverted heartbeat can put the timer back (revert.go).
	sessionDeadline time.Time
}

// ClientInfo describes the connection a request came on.
type ClientInfo struct {
	ClientID   string
	ClientHost string
}

func newMachine(cfg Config, log *slog.Logger, clock coord.Clock, s *shard) *machine {
	return &machine{cfg: cfg, log: log, s: s, clock: clock,
		loaded: map[int32]bool{}, loading: map[int32]uint64{}, groups: map[string]*groupState{},
		pending: map[int32][]Record{}}
}

// owns answers 0 when the shard serves the group's partition, or the code
// that says why not.
func (m *machine) owns(partition int32) int16 {
	switch {
	case m.loaded[partition]:
		return 0
	case m.loading[partition] != 0:
		return errLoadInProgress
	default:
		return errNotCoordinator
	}
}

func (m *machine) partitionOf(group string) int32 {
	return coord.PartitionFor(group, m.cfg.StatePartitions)
}

func (m *machine) newGroup(id string) *groupState {
	g := emptyGroup(id, m.partitionOf(id))
	m.groups[id] = g
	return g
}

func emptyGroup(id string, partition int32) *groupState {
	return &groupState{id: id, partition: partition, members: map[string]*member{},
		target: map[string]assignment{}, parts: map[partKey]*partitionState{},
		sessions: map[string]*session{}, durable: map[partKey]*snapshotValue{}}
}

// known reports whether the group exists as a share group here (on its
// coordinator): it has members, had some, or has share-partition state.
// A group known only from fetches to the partitions this node leads is
// not.
func (g *groupState) known() bool {
	return g.exists || len(g.members) > 0 || len(g.durable) > 0
}

func (g *groupState) state() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// heartbeat is ShareGroupHeartbeat (GroupMetadataManager.shareGroupHeartbeat
// in Kafka).
func (m *machine) heartbeat(client ClientInfo, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.MemberID = &req.MemberID
	fail := func(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	switch {
	case req.GroupID == "":
		return fail(errInvalidRequest, "GroupId can't be empty.")
	case req.MemberID == "":
		return fail(errInvalidRequest, "MemberId can't be empty.")
	case req.MemberEpoch < -1:
		return fail(errInvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(errInvalidRequest, "SubscribedTopicNames must be set in first request.")
	}
	g := m.groups[req.GroupID]
	if code := m.owns(m.partitionOf(req.GroupID)); code != 0 {
		return fail(code, "")
	}
	if g == nil || !g.known() {
		if req.MemberEpoch != 0 {
			return fail(errGroupIDNotFound, "Share group "+req.GroupID+" not found.")
		}
		if g == nil {
			g = m.newGroup(req.GroupID)
		}
		g.exists = true
	}
	mem := g.members[req.MemberID]
	if req.MemberEpoch == -1 {
		if mem == nil {
			return fail(errUnknownMemberID, "Member "+req.MemberID+" is not a member of group "+req.GroupID+".")
		}
		m.log.Info("member left the share group", "group", g.id, "member", mem.id)
		m.removeMember(g, mem)
		resp.MemberEpoch = -1
		return resp
	}
	changed := false
	if mem == nil {
		if req.MemberEpoch != 0 {
			return fail(errUnknownMemberID, "Member "+req.MemberID+" is not a member of group "+req.GroupID+".")
		}
		if int32(len(g.members)) >= m.cfg.MaxSize {
			return fail(errGroupMaxSizeReached, "The share group has reached its maximum capacity.")
		}
		mem = &member{id: req.MemberID, epoch: 0}
		g.members[req.MemberID] = mem
		changed = true
		m.log.Info("member joined the share group", "group", g.id, "member", mem.id,
			"client_id", client.ClientID, "client_host", client.ClientHost)
	} else if req.MemberEpoch != 0 && req.MemberEpoch != mem.epoch {
		return fail(errFencedMemberEpoch, "The share group member has an invalid epoch.")
	}
	metaChanged := changed || mem.clientID != client.ClientID || mem.clientHost != client.ClientHost ||
		req.RackID != nil && (mem.rack == nil || *mem.rack != *req.RackID)
	mem.clientID, mem.clientHost = client.ClientID, client.ClientHost
	if req.RackID != nil {
		mem.rack = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		subs := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(subs)
		subs = slices.Compact(subs)
		if !slices.Equal(subs, mem.subscribed) {
			mem.subscribed = subs
			changed, metaChanged = true, true
		}
	}
	if metaChanged {
		m.record(g, memberMetadataRecord(g.id, mem))
	}
	m.updateTarget(g, changed)
	full := req.MemberEpoch == 0 || req.SubscribedTopicNames != nil
	// The member takes the target's epoch and its part of it; within the
	// assignment interval a joiner gets the last target's epoch and
	// nothing, until the next target.
	if mem.epoch != g.assignmentEpoch {
		previous := mem.epoch
		mem.epoch = g.assignmentEpoch
		mem.assigned = g.target[mem.id]
		m.record(g, currentAssignmentRecord(g.id, mem, previous))
		full = true
	}
	m.scheduleSession(g, mem)
	resp.MemberEpoch = mem.epoch
	resp.HeartbeatIntervalMillis = m.groupInt(g, "share.heartbeat.interval.ms", m.cfg.HeartbeatIntervalMs)
	if full {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, id := range sortedIDs(mem.assigned) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID = id
			tp.Partitions = slices.Clone(mem.assigned[id])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

func sortedIDs(a assignment) [][16]byte {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) })
	return ids
}

// updateTarget moves the group epoch when membership or subscriptions
// changed, and computes the target assignment when the epoch is past it,
// or finds that the assignment changed (a topic grew or appeared, which
// moves the epoch too), at most once per share.assignment.interval.ms
// (Kafka 4.4's canComputeNextTargetAssignment): changes within the
// interval wait for the first heartbeat after it. Share partitions newly
// assigned are initialized where this node can read their offsets (it
// leads them); the others are initialized by their leader's first fetch.
func (m *machine) updateTarget(g *groupState, changed bool) {
	if changed {
		g.epoch++
		m.record(g, groupMetadataRecord(g.id, g.epoch))
	}
	now := m.clock.Now().UnixMilli()
	last, interval := g.assignmentTimestampMs, int64(m.assignmentIntervalMs(g))
	if last != 0 && interval != 0 && now < last+interval {
		return
	}
	var topics map[string]TopicInfo
	if m.cfg.Topics != nil {
		topics = m.cfg.Topics.Topics()
	}
	target := assignSimple(g.members, topics)
	if g.epoch == g.assignmentEpoch {
		if equalTargets(target, g.target) {
			return
		}
		g.epoch++
		m.record(g, groupMetadataRecord(g.id, g.epoch))
	}
	old := g.target
	g.target, g.assignmentEpoch, g.assignmentTimestampMs = target, g.epoch, now
	m.recordTarget(g, old)
	names := map[[16]byte]string{}
	for name, t := range topics {
		names[t.ID] = name
	}
	for _, a := range target {
		for id, parts := range a {
			for _, p := range parts {
				k := partKey{id, p}
				if g.durable[k] != nil || names[id] == "" {
					continue
				}
				m.inits = append(m.inits, pendingInit{g: g, key: k, topic: names[id]})
			}
		}
	}
}

// startOffset is where a share partition the group never consumed starts
// (share.auto.offset.reset), as Kafka's group coordinator initializes it
// when it first assigns it; false when this node cannot read the
// partition's offsets (it does not lead it).
func (m *machine) startOffset(g *groupState, topic string, partition int32) (int64, bool) {
	if m.cfg.Offsets == nil || topic == "" {
		return 0, false
	}
	logStart, hw, ok := m.cfg.Offsets(topic, partition)
	if !ok {
		return 0, false
	}
	if m.autoOffsetReset(g) == "earliest" {
		return logStart, true
	}
	return hw, true
}

// groupConfig is a group's override of a config, if it has one.
func (m *machine) groupConfig(g *groupState, name string) (string, bool) {
	if m.cfg.GroupConfig == nil {
		return "", false
	}
	return m.cfg.GroupConfig(g.id, name)
}

// assignmentIntervalMs is the group's share.assignment.interval.ms, or the
// broker's group.share.assignment.interval.ms.
func (m *machine) assignmentIntervalMs(g *groupState) int32 {
	if v, ok := m.groupConfig(g, "share.assignment.interval.ms"); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 {
			return int32(n)
		}
	}
	return m.cfg.AssignmentIntervalMs
}

// groupInt is a group's integer config, or the broker's default.
func (m *machine) groupInt(g *groupState, name string, dflt int32) int32 {
	if v, ok := m.groupConfig(g, name); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	return dflt
}

func (m *machine) autoOffsetReset(g *groupState) string {
	if v, ok := m.groupConfig(g, "share.auto.offset.reset"); ok {
		return v
	}
	return m.cfg.AutoOffsetReset
}

// readCommitted is the group's share.isolation.level.
func (m *machine) readCommitted(g *groupState) bool {
	if v, ok := m.groupConfig(g, "share.isolation.level"); ok {
		return v == "read_committed"
	}
	return m.cfg.ReadCommitted
}

func (m *machine) lockDuration(g *groupState) time.Duration {
	return time.Duration(m.groupInt(g, "share.record.lock.duration.ms", m.cfg.RecordLockDurationMs)) * time.Millisecond
}

func (m *machine) deliveryLimit(g *groupState) int16 {
	return int16(m.groupInt(g, "share.delivery.count.limit", m.cfg.DeliveryCountLimit))
}

func equalTargets(a, b map[string]assignment) bool {
	return maps.EqualFunc(a, b, func(x, y assignment) bool {
		return maps.EqualFunc(x, y, func(p, q []int32) bool { return slices.Equal(p, q) })
	})
}

// assignSimple is the simple assignor: each topic's partitions are
// spread over the members subscribed to it, in member id order. With no
// more members than partitions each partition goes to one member, round
// robin; with more members than partitions every member gets one
// partition and partitions are shared, round robin, so that every member
// has work and every partition is consumed.
func assignSimple(members map[string]*member, topics map[string]TopicInfo) map[string]assignment {
	out := make(map[string]assignment, len(members))
	ids := slices.Sorted(maps.Keys(members))
	for _, id := range ids {
		out[id] = assignment{}
	}
	subscribers := map[string][]string{}
	for _, id := range ids {
		for _, t := range members[id].subscribed {
			subscribers[t] = append(subscribers[t], id)
		}
	}
	for topic, subs := range subscribers {
		t, ok := topics[topic]
		if !ok || t.Partitions <= 0 {
			continue
		}
		n, p := len(subs), int(t.Partitions)
		if n <= p {
			for i := range p {
				a := out[subs[i%n]]
				a[t.ID] = append(a[t.ID], int32(i))
			}
			continue
		}
		for j, id := range subs {
			out[id][t.ID] = []int32{int32(j % p)}
		}
	}
	for _, a := range out {
		for id, parts := range a {
			slices.Sort(parts)
			a[id] = parts
		}
	}
	return out
}

// scheduleSession restarts a member's session timeout.
func (m *machine) scheduleSession(g *groupState, mem *member) {
	timeout := time.Duration(m.groupInt(g, "share.session.timeout.ms", m.cfg.SessionTimeoutMs)) * time.Millisecond
	m.scheduleSessionAt(g, mem, m.clock.Now().Add(timeout))
}

// scheduleSessionAt sets a member's session to end at deadline; one
// already past (a reverted expiry) is tried again after
// sessionRetryBackoff rather than at once, so that a log refusing writes
// is not retried in a loop.
func (m *machine) scheduleSessionAt(g *groupState, mem *member, deadline time.Time) {
	k := timerKey{kind: timerMember, group: g.id, member: mem.id}
	mem.sessionDeadline = deadline
	d := deadline.Sub(m.clock.Now())
	if d <= 0 {
		d = sessionRetryBackoff
	}
	m.s.Schedule(k, d, func() {
		if cur := m.groups[g.id]; cur == g && g.members[mem.id] == mem {
			m.log.Info("share group member session timed out", "group", g.id, "member", mem.id)
			u := m.capture(g.id, mem.id)
			// The timer has fired; put back, it fires again after
			// sessionRetryBackoff to retry the expiry.
			u.hadTimer = true
			m.removeMember(g, mem)
			m.commit(u, func(int16) {})
		}
	})
}

// removeMember takes a member out of its group (it left or its session
// ended): its share session closes, the records it holds are released,
// and the others get a new assignment.
func (m *machine) removeMember(g *groupState, mem *member) {
	delete(g.members, mem.id)
	m.record(g, memberTombstones(g.id, mem.id)...)
	m.s.Cancel(timerKey{kind: timerMember, group: g.id, member: mem.id})
	delete(g.sessions, mem.id)
	m.releaseMember(g, mem.id)
	m.updateTarget(g, true)
}

// releaseMember releases what a member holds in every share partition of
// its group and keeps the result.
func (m *machine) releaseMember(g *groupState, memberID string) {
	var changed []partKey
	for k, ps := range g.parts {
		if ps.releaseMember(memberID, m.deliveryLimit(g)) {
			changed = append(changed, k)
			m.scheduleLocks(g, k)
			m.wake(g, k)
		}
	}
	if len(changed) > 0 {
		m.persist(g, changed, func(int16) {})
	}
}

// scheduleLocks sets the share partition's timer to its next lock expiry.
func (m *machine) scheduleLocks(g *groupState, k partKey) {
	tk := timerKey{kind: timerLocks, group: g.id, part: k}
	ps := g.parts[k]
	if ps == nil {
		m.s.Cancel(tk)
		return
	}
	next, ok := ps.nextDeadline()
	if !ok {
		m.s.Cancel(tk)
		return
	}
	m.s.Schedule(tk, next.Sub(m.clock.Now()), func() {
		if m.groups[g.id] != g || g.parts[k] != ps {
			return
		}
		if ps.expire(m.clock.Now(), m.deliveryLimit(g)) {
			m.persist(g, []partKey{k}, func(int16) {})
			m.wake(g, k)
		}
		m.scheduleLocks(g, k)
	})
}

// describe is one group of ShareGroupDescribe.
func (m *machine) describe(id string) kmsg.ShareGroupDescribeResponseGroup {
	out := kmsg.NewShareGroupDescribeResponseGroup()
	out.GroupID = id
	if code := m.owns(m.partitionOf(id)); code != 0 {
		out.ErrorCode = code
		return out
	}
	g := m.groups[id]
	if g == nil || !g.known() {
		out.ErrorCode = errGroupIDNotFound
		msg := "Group " + id + " not found."
		out.ErrorMessage = &msg
		return out
	}
	out.GroupState = g.state()
	out.GroupEpoch = g.epoch
	out.AssignmentEpoch = g.assignmentEpoch
	out.Assignor = "simple"
	names := map[[16]byte]string{}
	if m.cfg.Topics != nil {
		for name, t := range m.cfg.Topics.Topics() {
			names[t.ID] = name
		}
	}
	for _, mid := range slices.Sorted(maps.Keys(g.members)) {
		mem := g.members[mid]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch = mem.id, mem.rack, mem.epoch
		dm.ClientID, dm.ClientHost = mem.clientID, mem.clientHost
		dm.SubscribedTopicNames = slices.Clone(mem.subscribed)
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		for _, tid := range sortedIDs(mem.assigned) {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic = tid, names[tid]
			tp.Partitions = slices.Clone(mem.assigned[tid])
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// GroupListing is a share group as ListGroups shows it.
type GroupListing struct {
	Group string
	State string
}

func (m *machine) list() []GroupListing {
	var out []GroupListing
	for id, g := range m.groups {
		if m.loaded[g.partition] && g.known() {
			out = append(out, GroupListing{Group: id, State: g.state()})
		}
	}
	return out
}

// deleteGroup is one group of DeleteGroups: an empty share group is
// deleted with its share-partition state (tombstones).
func (m *machine) deleteGroup(id string, reply func(int16)) {
	u := m.capture(id, "")
	if g := m.groups[id]; g != nil {
		u.durable, u.parts = maps.Clone(g.durable), maps.Clone(g.parts)
	}
	if code := m.deleteGroupRecords(id); code != 0 {
		reply(code)
		return
	}
	m.commit(u, reply)
}

// deleteGroupRecords deletes the group in memory and queues its
// tombstones; a non-zero code says why it cannot be deleted.
func (m *machine) deleteGroupRecords(id string) int16 {
	if code := m.owns(m.partitionOf(id)); code != 0 {
		return code
	}
	g := m.groups[id]
	if g == nil || !g.known() {
		return errGroupIDNotFound
	}
	if len(g.members) > 0 {
		return errNonEmptyGroup
	}
	for k := range g.parts {
		m.dropLocal(g, k)
	}
	delete(m.groups, id)
	// The share-partition state goes in the same append as the
	// membership tombstones, so the deletion is written whole or not at
	// all. Kafka's group coordinator deletes the state with
	// DeleteShareGroupState; here it is this node's own.
	for _, k := range slices.SortedFunc(maps.Keys(g.durable), comparePartKeys) {
		m.record(g, Record{Key: snapshotKey(id, k)})
	}
	g.durable = map[partKey]*snapshotValue{}
	m.record(g, groupTombstones(id)...)
	return 0
}
