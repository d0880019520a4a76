package group

import (
	"bytes"
	"maps"
	"slices"
)

// memberState is a consumer group member's reconciliation state, as Kafka's
// MemberState; its values are the ones ConsumerGroupCurrentMemberAssignment
// records carry.
type memberState int8

const (
	memberStable               memberState = 0 // owns its target for its epoch
	memberUnrevokedPartitions  memberState = 1 // must revoke partitions first
	memberUnreleasedPartitions memberState = 2 // waits for others to release partitions
	memberUnknownState         memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// consumerMember is one member of a consumer (KIP-848) group.
type consumerMember struct {
	id                 string
	instanceID         *string
	rackID             *string
	clientID           string
	clientHost         string
	topicNames         []string // sorted, distinct
	regex              string   // "" when none
	rebalanceTimeoutMs int32
	serverAssignor     string // "" when none
	// classic is set for a member that speaks the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat) inside the consumer group; it is
	// replaced whole, never changed in place.
	classic *classicMeta

	epoch         int32
	previousEpoch int32
	state         memberState
	assigned      tpSet // partitions the member owns (or may own)
	revoking      tpSet // partitions it must give up first
}

// classicMeta is ConsumerGroupMemberMetadataValue.ClassicMemberMetadata:
// what a classic member joined with.
type classicMeta struct {
	sessionTimeoutMs int32
	protocols        []protocol // in the member's order of preference
}

func (c *classicMeta) equal(o *classicMeta) bool {
	if c == nil || o == nil {
		return c == nil && o == nil
	}
	return c.sessionTimeoutMs == o.sessionTimeoutMs && slices.EqualFunc(c.protocols, o.protocols, func(a, b protocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

func (m *consumerMember) usesClassicProtocol() bool { return m.classic != nil }

func (m *consumerMember) clone() *consumerMember {
	c := *m
	c.topicNames = slices.Clone(m.topicNames)
	c.assigned = m.assigned.clone()
	c.revoking = m.revoking.clone()
	return &c
}

// sameSubscription reports whether the fields a ConsumerGroupMemberMetadata
// record carries are equal.
func (m *consumerMember) sameSubscription(o *consumerMember) bool {
	return eqOpt(m.instanceID, o.instanceID) && eqOpt(m.rackID, o.rackID) &&
		m.clientID == o.clientID && m.clientHost == o.clientHost &&
		slices.Equal(m.topicNames, o.topicNames) && m.regex == o.regex &&
		m.rebalanceTimeoutMs == o.rebalanceTimeoutMs && m.serverAssignor == o.serverAssignor &&
		m.classic.equal(o.classic)
}

// sameAssignment reports whether the fields a ConsumerGroupCurrentMember
// Assignment record carries are equal.
func (m *consumerMember) sameAssignment(o *consumerMember) bool {
	return m.epoch == o.epoch && m.previousEpoch == o.previousEpoch && m.state == o.state &&
		m.assigned.equal(o.assigned) && m.revoking.equal(o.revoking)
}

// isReconciledTo reports whether the member owns its target assignment of
// the given epoch.
func (m *consumerMember) isReconciledTo(epoch int32) bool {
	return m.state == memberStable && m.epoch == epoch
}

func eqOpt(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// consumerGroupState is a consumer group's state, derived from its epochs
// and members as Kafka's ConsumerGroup.maybeUpdateGroupState.
type consumerGroupState int8

const (
	cgEmpty consumerGroupState = iota
	cgAssigning
	cgReconciling
	cgStable
	cgDead
)

func (s consumerGroupState) String() string {
	return [...]string{"Empty", "Assigning", "Reconciling", "Stable", "Dead"}[s]
}

// offsetStore is a group's committed offsets, shared by both group kinds.
type offsetStore struct {
	offsets map[tp]offsetValue
	// inflight holds, per partition, the commits appended but not yet
	// acknowledged. Deleting an offset drops the entry, so a commit that
	// completes afterwards sees a different pointer and is not applied:
	// the log has the commit before the tombstone.
	inflight map[tp]*inflightCommit
}

func newOffsetStore() offsetStore {
	return offsetStore{offsets: make(map[tp]offsetValue), inflight: make(map[tp]*inflightCommit)}
}

// consumerGroup is one KIP-848 consumer group with its committed offsets.
type consumerGroup struct {
	id        string
	partition int32
	dead      bool

	epoch           int32 // the group epoch
	assignmentEpoch int32 // the epoch of the target assignment
	// assignmentTimestampMs is when the target assignment was computed
	// (ConsumerGroupTargetAssignmentMetadata's AssignmentTimestamp, 0 when
	// unknown); the next waits for consumer.assignment.interval.ms after
	// it, as Kafka 4.4.
	assignmentTimestampMs int64
	members               map[string]*consumerMember
	static                map[string]string // group.instance.id -> member id
	target                map[string]tpSet  // member id -> target assignment
	// subscription is the metadata of the subscribed topics the target
	// assignment was computed with; a change of it bumps the epoch.
	subscription map[string]topicMeta
	regexes      map[string]resolvedRegex
	// owners maps each partition some member owns or revokes to the epoch
	// of that member, as Kafka's currentPartitionEpoch.
	owners map[topicID]map[int32]int32

	// joinDeadlines marks the classic members told to rejoin whose
	// deadline runs (scheduleConsumerJoinIfAbsent).
	joinDeadlines map[string]bool

	// refresh is set when topic metadata changed: the next heartbeat
	// recomputes the subscription metadata and resolves the regexes.
	refresh bool
	// seq counts mutations; a failed append undoes its mutation only if
	// nothing changed the group since.
	seq uint64
	// undo logs, for the last snapshot, the members and targets changed
	// since (snapshot); nil when no snapshot is open.
	undo *groupUndo

	offsetStore
}

func newConsumerGroup(id string, partition int32) *consumerGroup {
	return &consumerGroup{
		id:           id,
		partition:    partition,
		members:      make(map[string]*consumerMember),
		static:       make(map[string]string),
		target:       make(map[string]tpSet),
		subscription: make(map[string]topicMeta),
		regexes:      make(map[string]resolvedRegex),
		owners:       make(map[topicID]map[int32]int32),
		offsetStore:  newOffsetStore(),

		joinDeadlines: make(map[string]bool),
	}
}

// state derives the group state: Empty without members, Assigning while the
// target lags the group epoch, Reconciling while a member has not reached
// the target, else Stable.
func (g *consumerGroup) state() consumerGroupState {
	switch {
	case g.dead:
		return cgDead
	case len(g.members) == 0:
		return cgEmpty
	case g.epoch > g.assignmentEpoch:
		return cgAssigning
	}
	for _, m := range g.members {
		if !m.isReconciledTo(g.assignmentEpoch) {
			return cgReconciling
		}
	}
	return cgStable
}

// groupUndo is what a snapshot needs to put back the members and target
// sets changed after it: the value each changed key had before its first
// change, nil (or absent) for a key that was not there.
type groupUndo struct {
	members map[string]*consumerMember
	target  map[string]targetUndo
}

type targetUndo struct {
	set tpSet
	ok  bool
}

// snapshot copies everything a heartbeat may change, for undoing it when
// its records fail to append. Offsets are not part of it: they change only
// once their own appends succeed.
//
// A stored member and a stored target set are never changed in place:
// every change clones the member (or builds a new set) and stores the
// new one (updateMember, setTarget, the load's member()). So the members
// and targets need no copy at all: the snapshot opens an undo log that
// keeps the previous value of each member and target changed after it,
// which costs O(changes). Copying the maps that index them, and the
// partition owners, made the snapshot O(members + partitions) per
// heartbeat that changes anything: 28% of the broker's CPU with 1,000
// members joining a group over 10,000 partitions (issue 17). The owners
// are derived from the members, so restore rebuilds them.
func (g *consumerGroup) snapshot() *consumerGroup {
	c := *g
	c.static = maps.Clone(g.static)
	c.subscription = maps.Clone(g.subscription)
	c.regexes = maps.Clone(g.regexes)
	g.undo = &groupUndo{members: make(map[string]*consumerMember), target: make(map[string]targetUndo)}
	c.undo = g.undo
	return &c
}

// restore puts back a snapshot's state, keeping the live offsets. The
// mutation counter moves on, so that ops issued after the snapshot, whose
// appends fail after this one, undo nothing more.
func (g *consumerGroup) restore(s *consumerGroup) {
	offsets, seq := g.offsetStore, g.seq
	members, target := g.members, g.target
	if u := s.undo; u != nil {
		for id, prev := range u.members {
			if prev == nil {
				delete(members, id)
			} else {
				members[id] = prev
			}
		}
		for id, prev := range u.target {
			if prev.ok {
				target[id] = prev.set
			} else {
				delete(target, id)
			}
		}
	}
	*g = *s
	g.members, g.target = members, target
	g.offsetStore, g.seq = offsets, seq+1
	g.undo = nil
	g.owners = make(map[topicID]map[int32]int32)
	for _, id := range g.sortedMemberIDs() {
		g.addOwners(g.members[id])
	}
}

// logMember keeps a member's value before its first change since the
// snapshot.
func (g *consumerGroup) logMember(id string) {
	if g.undo == nil {
		return
	}
	if _, logged := g.undo.members[id]; !logged {
		g.undo.members[id] = g.members[id]
	}
}

// setTarget stores a member's target set; deleteTarget removes it. Both
// log the previous one for the snapshot.
func (g *consumerGroup) setTarget(id string, t tpSet) {
	g.logTarget(id)
	g.target[id] = t
}

func (g *consumerGroup) deleteTarget(id string) {
	g.logTarget(id)
	delete(g.target, id)
}

func (g *consumerGroup) logTarget(id string) {
	if g.undo == nil {
		return
	}
	if _, logged := g.undo.target[id]; !logged {
		prev, ok := g.target[id]
		g.undo.target[id] = targetUndo{prev, ok}
	}
}

// updateMember stores a member, keeping the static index and partition
// owners in step, as ConsumerGroup.updateMember.
func (g *consumerGroup) updateMember(m *consumerMember) {
	g.logMember(m.id)
	if old := g.members[m.id]; old != nil {
		g.removeOwners(old)
	}
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	g.addOwners(m)
}

func (g *consumerGroup) removeMember(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	g.logMember(id)
	g.removeOwners(m)
	delete(g.members, id)
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
}

func (g *consumerGroup) addOwners(m *consumerMember) {
	for _, s := range []tpSet{m.assigned, m.revoking} {
		for id, ps := range s {
			o := g.owners[id]
			if o == nil {
				o = make(map[int32]int32, len(ps))
				g.owners[id] = o
			}
			for _, p := range ps {
				o[p] = m.epoch
			}
		}
	}
}

func (g *consumerGroup) removeOwners(m *consumerMember) {
	for _, s := range []tpSet{m.assigned, m.revoking} {
		for id, ps := range s {
			o := g.owners[id]
			for _, p := range ps {
				if e, ok := o[p]; ok && e == m.epoch {
					delete(o, p)
				}
			}
			if len(o) == 0 {
				delete(g.owners, id)
			}
		}
	}
}

// partitionOwned reports whether some member still owns or revokes a
// partition, which must then wait before anyone else gets it.
func (g *consumerGroup) partitionOwned(id topicID, p int32) bool {
	_, ok := g.owners[id][p]
	return ok
}

// staticMember returns the member holding an instance id, or nil.
func (g *consumerGroup) staticMember(instanceID *string) *consumerMember {
	if instanceID == nil {
		return nil
	}
	if id, ok := g.static[*instanceID]; ok {
		return g.members[id]
	}
	return nil
}

// subscribedTopics counts, per topic, the members subscribed to it by name
// or through a resolved regex, with old replaced by updated (either may be
// nil).
func (g *consumerGroup) subscribedTopics(old, updated *consumerMember) map[string]int {
	out := make(map[string]int)
	count := func(m *consumerMember, d int) {
		for _, t := range m.topicNames {
			out[t] += d
		}
		if m.regex != "" {
			for _, t := range g.regexes[m.regex].topics {
				out[t] += d
			}
		}
	}
	for _, m := range g.members {
		if old != nil && m.id == old.id {
			continue
		}
		count(m, 1)
	}
	if updated != nil {
		count(updated, 1)
	}
	for t, n := range out {
		if n <= 0 {
			delete(out, t)
		}
	}
	return out
}

// isSubscribedToTopic reports whether a member consumes the topic, by name
// or regex; such offsets are neither deleted nor expired.
func (g *consumerGroup) isSubscribedToTopic(topic string) bool {
	return g.subscribedByOther(topic, "")
}

// subscribedByOther reports whether a member other than except consumes the
// topic, by name or regex.
func (g *consumerGroup) subscribedByOther(topic, except string) bool {
	for _, m := range g.members {
		if m.id == except {
			continue
		}
		if _, ok := slices.BinarySearch(m.topicNames, topic); ok {
			return true
		}
		if m.regex != "" {
			if _, ok := slices.BinarySearch(g.regexes[m.regex].topics, topic); ok {
				return true
			}
		}
	}
	return false
}

// regexMembers counts the members subscribed to a regex.
func (g *consumerGroup) regexMembers(regex string) int {
	n := 0
	for _, m := range g.members {
		if m.regex == regex {
			n++
		}
	}
	return n
}

// preferredAssignor is the server assignor most members ask for, ties to
// the smallest name; "" when none asks.
func (g *consumerGroup) preferredAssignor(old, updated *consumerMember) string {
	counts := make(map[string]int)
	for _, m := range g.members {
		if old != nil && m.id == old.id {
			continue
		}
		if m.serverAssignor != "" {
			counts[m.serverAssignor]++
		}
	}
	if updated != nil && updated.serverAssignor != "" {
		counts[updated.serverAssignor]++
	}
	best, n := "", 0
	for _, name := range sortedKeys(counts) {
		if counts[name] > n {
			best, n = name, counts[name]
		}
	}
	return best
}

// sortedMemberIDs lists member ids in order, for deterministic output.
func (g *consumerGroup) sortedMemberIDs() []string {
	return sortedKeys(g.members)
}
