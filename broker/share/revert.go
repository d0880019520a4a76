package share

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// sessionRetryBackoff is how long a member whose expiry could not be
// written waits before its session timer fires again (Kafka's coordinator
// timers retry a failed write after 500 ms too).
const sessionRetryBackoff = 500 * time.Millisecond

// pendingInit is a share partition an operation assigned for the first
// time, initialized once the operation's membership records are written.
type pendingInit struct {
	g     *groupState
	key   partKey
	topic string
}

// membershipUndo is a group's membership as it was before an operation
// (a heartbeat, a session expiry, a deletion), put back when the
// operation's records cannot be written, as Kafka's coordinator reverts
// its timeline snapshot when a write fails: the group epoch, the members
// with their epochs, metadata and assignments, the target assignment, the
// share sessions, and the session timer of the member the operation was
// about.
type membershipUndo struct {
	groupID string
	g       *groupState // nil when the group did not exist before
	// before and after are g.version before and after the operation.
	before, after uint64
	unloads       uint64 // g.unloads at the capture
	epoch         int32
	exists        bool
	// assignmentEpoch and assignmentTimestampMs are the target's.
	assignmentEpoch       int32
	assignmentTimestampMs int64
	members               map[string]*member
	values                map[string]member
	target                map[string]assignment
	sessions              map[string]*session
	// durable and parts are put back for a deletion only (deleteGroup
	// takes them; a heartbeat does not change them).
	durable map[partKey]*snapshotValue
	parts   map[partKey]*partitionState
	// memberID is the member the operation was about; hadTimer and
	// deadline are its session timer.
	memberID string
	hadTimer bool
	deadline time.Time
}

// capture records what a membership operation on group (about memberID,
// "" for none) may change.
func (m *machine) capture(group, memberID string) *membershipUndo {
	u := &membershipUndo{groupID: group, memberID: memberID}
	g := m.groups[group]
	if g == nil {
		return u
	}
	u.g, u.before, u.unloads = g, g.version, g.unloads
	u.epoch, u.exists = g.epoch, g.exists
	u.assignmentEpoch, u.assignmentTimestampMs = g.assignmentEpoch, g.assignmentTimestampMs
	u.members, u.values = maps.Clone(g.members), make(map[string]member, len(g.members))
	for id, mem := range g.members {
		v := *mem
		v.subscribed = slices.Clone(mem.subscribed)
		u.values[id] = v
	}
	u.target, u.sessions = maps.Clone(g.target), maps.Clone(g.sessions)
	if mem := g.members[memberID]; mem != nil {
		u.hadTimer = m.s.Scheduled(timerKey{kind: timerMember, group: group, member: memberID})
		u.deadline = mem.sessionDeadline
	}
	return u
}

// commit writes the membership records the operation queued and calls
// done with the result; when the write fails the group goes back to
// what u captured, and the share partitions the operation assigned for
// the first time are initialized only once the write succeeded.
func (m *machine) commit(u *membershipUndo, done func(code int16)) {
	inits := m.inits
	m.inits = nil
	g := m.groups[u.groupID]
	if u.g != nil && g == nil {
		g = u.g // deleted by the operation
	}
	if g != nil {
		u.after = g.version
	}
	m.flushMembership(func(code int16) {
		if code != 0 {
			m.revert(u, g)
		} else {
			if g != nil && len(g.deferred) > 0 {
				m.log.Warn("share group membership of a failed write kept: a later write built on it succeeded", "group", g.id)
				g.deferred = nil
			}
			m.initialize(inits)
		}
		done(code)
	})
}

// revert puts g (the group after the operation, nil when there was none)
// back as u captured it, and then the earlier failed operations that
// waited for this one (revertOne).
func (m *machine) revert(u *membershipUndo, g *groupState) {
	if g == nil || !m.revertOne(u, g) {
		return
	}
	for n := len(g.deferred); n > 0 && g.deferred[n-1].after == g.version; n = len(g.deferred) {
		d := g.deferred[n-1]
		g.deferred = g.deferred[:n-1]
		m.revertOne(d, g)
	}
}

// revertOne reverts one operation. Appends to a partition complete in
// order, so a later operation on the group whose records were queued
// behind the failed ones has not answered yet, and its state is built on
// the failed one's: the failed operation then waits in g.deferred, to be
// reverted after the later one if its write fails too (Kafka reverts
// every uncommitted change past the failed write); if the later write
// succeeds, what it was built on stays.
func (m *machine) revertOne(u *membershipUndo, g *groupState) bool {
	if !m.loaded[g.partition] || g.unloads != u.unloads {
		return false // unloaded meanwhile: the log is replayed at a load
	}
	if (u.g == nil && m.groups[u.groupID] != g) || (u.g != nil && m.groups[u.groupID] != nil && m.groups[u.groupID] != g) {
		return false // the group was deleted and created again meanwhile
	}
	if g.version != u.after {
		g.deferred = append(g.deferred, u)
		return false
	}
	if u.g == nil {
		// The operation created the group: it is gone again, unless it
		// is still known from fetches to share partitions led here.
		g.epoch, g.exists = 0, false
		g.assignmentEpoch, g.assignmentTimestampMs = 0, 0
		for id := range g.members {
			m.s.Cancel(timerKey{kind: timerMember, group: g.id, member: id})
		}
		g.members, g.target, g.version = map[string]*member{}, map[string]assignment{}, 0
		if len(g.parts) == 0 && len(g.sessions) == 0 && len(g.durable) == 0 && len(g.waiters) == 0 {
			delete(m.groups, u.groupID)
		}
		return true
	}
	if m.groups[u.groupID] == nil {
		// A deletion: the group and its share partitions come back.
		m.groups[u.groupID] = g
		g.durable, g.parts = u.durable, u.parts
		for k := range g.parts {
			m.scheduleLocks(g, k)
		}
	}
	g.epoch, g.exists = u.epoch, u.exists
	g.assignmentEpoch, g.assignmentTimestampMs = u.assignmentEpoch, u.assignmentTimestampMs
	for id, mem := range g.members {
		if u.members[id] != mem {
			m.s.Cancel(timerKey{kind: timerMember, group: g.id, member: id})
		}
	}
	g.members = u.members
	for id, mem := range g.members {
		// A heartbeat that wrote nothing may have moved another
		// member's session meanwhile: its timer stays as it is.
		deadline := mem.sessionDeadline
		*mem = u.values[id]
		if id != u.memberID {
			mem.sessionDeadline = deadline
		}
	}
	g.target, g.sessions = u.target, u.sessions
	g.version = u.before
	if mem := g.members[u.memberID]; mem != nil {
		if u.hadTimer {
			m.scheduleSessionAt(g, mem, u.deadline)
		} else {
			m.s.Cancel(timerKey{kind: timerMember, group: g.id, member: mem.id})
		}
	}
	return true
}

// initialize sets the start of share partitions assigned for the first
// time where this node can read their offsets (it leads them), and
// writes it; the others are initialized by their leader's first fetch.
func (m *machine) initialize(inits []pendingInit) {
	byGroup := map[*groupState][]partKey{}
	var order []*groupState
	for _, in := range inits {
		g := in.g
		if m.groups[g.id] != g || g.durable[in.key] != nil {
			continue
		}
		start, ok := m.startOffset(g, in.topic, in.key.partition)
		if !ok {
			continue
		}
		g.durable[in.key] = &snapshotValue{LeaderEpoch: -1, StartOffset: start, CreateTimestamp: m.clock.Now().UnixMilli()}
		if byGroup[g] == nil {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], in.key)
	}
	for _, g := range order {
		m.appendDurable(g, byGroup[g], func(int16) {})
	}
}

// comparePartKeys orders share partitions by topic id, then partition.
func comparePartKeys(a, b partKey) int {
	if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}
