package group

import (
	"bytes"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is a classic group's state, as Kafka's ClassicGroupState.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return stateNames[s] }

// canFollow reports whether a group may move from prev to s.
func (s groupState) canFollow(prev groupState) bool {
	switch s {
	case stateEmpty:
		return prev == statePreparingRebalance
	case statePreparingRebalance:
		return prev == stateStable || prev == stateCompletingRebalance || prev == stateEmpty
	case stateCompletingRebalance:
		return prev == statePreparingRebalance
	case stateStable:
		return prev == stateCompletingRebalance
	default:
		return true
	}
}

// consumerProtocolType is the protocol type of Kafka consumers, whose member
// metadata is a ConsumerMemberMetadata.
const consumerProtocolType = "consumer"

// protocol is one protocol a member supports, with its metadata.
type protocol struct {
	name     string
	metadata []byte
}

func protocolsFrom(ps []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		out[i] = protocol{name: p.Name, metadata: p.Metadata}
	}
	return out
}

// member is one member of a classic group.
type member struct {
	id                 string
	instanceID         *string // group.instance.id; nil for dynamic members
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	assignment         []byte

	// joinReply and syncReply answer the member's parked JoinGroup and
	// SyncGroup; nil when none is parked.
	joinReply   func(*kmsg.JoinGroupResponse)
	joinVersion int16
	syncReply   func(*kmsg.SyncGroupResponse)
	isNew       bool // joined but not yet through a completed join phase
}

func (m *member) isStatic() bool     { return m.instanceID != nil }
func (m *member) awaitingJoin() bool { return m.joinReply != nil }
func (m *member) awaitingSync() bool { return m.syncReply != nil }

// hasSatisfiedHeartbeat is Kafka's test on session expiry: new members may
// expire while parked in JoinGroup; others parked in a join or sync may not.
func (m *member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return false
	}
	return m.awaitingJoin() || m.awaitingSync()
}

// metadata returns the member's metadata for a protocol, nil if it does not
// support it.
func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches reports whether the protocols equal the member's, in order.
func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].name || !bytes.Equal(p.Metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// vote returns the member's most preferred protocol among the candidates.
func (m *member) vote(candidates map[string]bool) (string, bool) {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name, true
		}
	}
	return "", false
}

// classicGroup is one classic group with its committed offsets.
type classicGroup struct {
	id             string
	partition      int32
	state          groupState
	prevState      groupState
	stateTimestamp int64 // ms of the last transition; -1 when unknown

	protocolType string  // "" when the group has none (a simple group)
	protocolName *string // the selected protocol; nil when none
	generation   int32
	leader       string // "" when none

	members      map[string]*member
	order        []string          // member ids in the order they joined
	static       map[string]string // group.instance.id -> member id
	pendingJoin  map[string]bool   // ids handed out with MEMBER_ID_REQUIRED
	pendingSync  map[string]bool
	awaitingJoin int
	supported    map[string]int // protocol name -> members supporting it

	subscribed      map[string]bool
	subscribedKnown bool
	newMemberAdded  bool

	offsetStore
}

type inflightCommit struct{ n int }

func newClassicGroup(id string, partition int32, nowMs int64) *classicGroup {
	return &classicGroup{
		id:             id,
		partition:      partition,
		state:          stateEmpty,
		prevState:      stateDead,
		stateTimestamp: nowMs,
		members:        make(map[string]*member),
		static:         make(map[string]string),
		pendingJoin:    make(map[string]bool),
		pendingSync:    make(map[string]bool),
		supported:      make(map[string]int),
		offsetStore:    newOffsetStore(),
	}
}

func (g *classicGroup) is(s groupState) bool { return g.state == s }

func (g *classicGroup) transitionTo(s groupState, nowMs int64) {
	if !s.canFollow(g.state) {
		// A bug, not client input: log it and move on rather than leave the
		// group stuck.
		slog.Error("invalid group state transition", "group", g.id, "from", g.state, "to", s)
	}
	g.prevState = g.state
	g.state = s
	g.stateTimestamp = nowMs
}

func (g *classicGroup) usesConsumerProtocol() bool { return g.protocolType == consumerProtocolType }

// isSimple reports a group created only to hold offsets.
func (g *classicGroup) isSimple() bool {
	return g.protocolType == "" && g.is(stateEmpty) && len(g.pendingJoin) == 0
}

func (g *classicGroup) isLeader(id string) bool { return g.leader != "" && g.leader == id }

func (g *classicGroup) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoin && len(g.pendingJoin) == 0
}

// canRebalance reports whether PreparingRebalance may follow the state.
func (g *classicGroup) canRebalance() bool { return statePreparingRebalance.canFollow(g.state) }

func (g *classicGroup) rebalanceTimeoutMs() int32 {
	var max int32
	for _, m := range g.members {
		if m.rebalanceTimeoutMs > max {
			max = m.rebalanceTimeoutMs
		}
	}
	return max
}

// add adds a member, parking its JoinGroup if reply is not nil.
func (g *classicGroup) add(m *member, reply func(*kmsg.JoinGroupResponse), version int16) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	g.countProtocols(m, 1)
	m.joinReply = reply
	m.joinVersion = version
	if reply != nil {
		g.awaitingJoin++
	}
	delete(g.pendingJoin, m.id)
}

// remove drops a member; a parked join or sync of the member must already
// have been answered by the caller.
func (g *classicGroup) remove(id string) {
	if m, ok := g.members[id]; ok {
		g.countProtocols(m, -1)
		if m.awaitingJoin() {
			g.awaitingJoin--
		}
		if m.instanceID != nil {
			delete(g.static, *m.instanceID)
		}
		delete(g.members, id)
		for i, o := range g.order {
			if o == id {
				g.order = append(g.order[:i], g.order[i+1:]...)
				break
			}
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pendingJoin, id)
	delete(g.pendingSync, id)
}

// countProtocols adds delta to the count of each protocol the member
// supports, counting a name once even if the member listed it twice.
func (g *classicGroup) countProtocols(m *member, delta int) {
	seen := make(map[string]bool, len(m.protocols))
	for _, p := range m.protocols {
		if seen[p.name] {
			continue
		}
		seen[p.name] = true
		g.supported[p.name] += delta
		if g.supported[p.name] <= 0 {
			delete(g.supported, p.name)
		}
	}
}

// supportsProtocols reports whether a member of the given protocol type and
// protocols may join: an empty group takes any non-empty protocol set; a
// non-empty group needs the same type and one protocol all members support.
func (g *classicGroup) supportsProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if g.is(stateEmpty) {
		return protocolType != "" && len(ps) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range ps {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol all members support that most members
// prefer. Ties go to the protocol that received its first vote earliest,
// walking members in join order, so the choice is deterministic.
func (g *classicGroup) selectProtocol() string {
	candidates := make(map[string]bool)
	for name, n := range g.supported {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := make(map[string]int)
	var first []string
	for _, id := range g.order {
		v, ok := g.members[id].vote(candidates)
		if !ok {
			continue
		}
		if votes[v] == 0 {
			first = append(first, v)
		}
		votes[v]++
	}
	best, bestVotes := "", 0
	for _, name := range first {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// maybeElectNewJoinedLeader keeps a leader that rejoined or elects a member
// that did; it reports whether the group has a joined leader.
func (g *classicGroup) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l, ok := g.members[g.leader]; ok && l.awaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin() {
			g.leader = id
			return true
		}
	}
	return false
}

// initNextGeneration bumps the generation and selects the protocol.
func (g *classicGroup) initNextGeneration(nowMs int64) {
	g.generation++
	if len(g.members) > 0 {
		name := g.selectProtocol()
		g.protocolName = &name
		g.computeSubscribedTopics()
		g.transitionTo(stateCompletingRebalance, nowMs)
	} else {
		g.protocolName = nil
		g.computeSubscribedTopics()
		g.transitionTo(stateEmpty, nowMs)
	}
	clear(g.pendingSync)
}

// computeSubscribedTopics parses the consumer subscriptions of all members,
// as Kafka does to know which topics a consumer group reads. The topics
// stay unknown for other protocol types or unparsable metadata.
func (g *classicGroup) computeSubscribedTopics() {
	g.subscribed, g.subscribedKnown = nil, false
	if g.protocolType != consumerProtocolType {
		return
	}
	if len(g.members) == 0 {
		g.subscribed, g.subscribedKnown = map[string]bool{}, true
		return
	}
	if g.protocolName == nil {
		return
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		ts, ok := consumerTopics(m.metadata(*g.protocolName))
		if !ok {
			return
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	g.subscribed, g.subscribedKnown = topics, true
}

// consumerTopics reads the topics of a ConsumerMemberMetadata with the v0
// schema, which prefixes every version, so future versions parse too.
func consumerTopics(b []byte) ([]string, bool) {
	if len(b) < 2 {
		return nil, false
	}
	v0 := append([]byte{0, 0}, b[2:]...)
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(v0); err != nil {
		return nil, false
	}
	return md.Topics, true
}

// isSubscribedToTopic reports whether the group consumes a topic; unknown
// subscriptions count as subscribed for consumer groups, as in Kafka.
func (g *classicGroup) isSubscribedToTopic(topic string) bool {
	if g.subscribedKnown {
		return g.subscribed[topic]
	}
	return g.usesConsumerProtocol()
}

// validateMember checks a member id and its group.instance.id.
func (g *classicGroup) validateMember(id string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return errUnknownMemberID
		}
		if existing != id {
			return errFencedInstanceID
		}
	}
	if _, ok := g.members[id]; !ok {
		return errUnknownMemberID
	}
	return 0
}

// currentMembers lists the members for the leader's JoinGroup response.
func (g *classicGroup) currentMembers() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	name := ""
	if g.protocolName != nil {
		name = *g.protocolName
	}
	for _, id := range g.order {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(name)
		out = append(out, jm)
	}
	return out
}

func (g *classicGroup) assignments() map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		out[id] = m.assignment
	}
	return out
}

// replaceStaticMember moves a static member to a new member id, fencing any
// request the old id has parked.
func (g *classicGroup) replaceStaticMember(instanceID, oldID, newID string) *member {
	old := g.members[oldID]
	if old.joinReply != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.ErrorCode = errFencedInstanceID
		r.MemberID = oldID
		old.joinReply(r)
		old.joinReply = nil
		g.awaitingJoin--
	}
	if old.syncReply != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = errFencedInstanceID
		r.MemberAssignment = []byte{}
		old.syncReply(r)
		old.syncReply = nil
	}
	nm := &member{
		id:                 newID,
		instanceID:         old.instanceID,
		clientID:           old.clientID,
		clientHost:         old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs,
		sessionTimeoutMs:   old.sessionTimeoutMs,
		protocolType:       old.protocolType,
		protocols:          old.protocols,
		assignment:         old.assignment,
	}
	delete(g.members, oldID)
	g.members[newID] = nm
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = newID
		}
	}
	if g.isLeader(oldID) {
		g.leader = newID
	}
	g.static[instanceID] = newID
	return nm
}
