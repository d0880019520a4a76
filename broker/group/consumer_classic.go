package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the classic protocol inside a consumer group, after Kafka
// 4's GroupMetadataManager: the online upgrade of a live classic group when
// a consumer-protocol member joins it (convertToConsumerGroup), JoinGroup,
// SyncGroup and Heartbeat of classic members served by the consumer group
// (classicGroupJoinToConsumerGroup and its siblings), and the online
// downgrade back to a classic group when the last consumer-protocol member
// goes (convertToClassicGroup). group.consumer.migration.policy says which
// way live groups may convert.
//
// A classic member of a consumer group is a consumerMember with classic
// metadata: its generation is its member epoch, its JoinGroup is answered
// at once with its share of the server-side assignment (no leader), and
// its heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin to move
// towards its target. Revocation follows the cooperative protocol: the
// member reports what it still owns in its subscription's owned partitions.

// group.consumer.migration.policy values.
const (
	MigrationDisabled      = "disabled"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationBidirectional = "bidirectional"
)

func (c Config) upgradeEnabled() bool {
	p := strings.ToLower(c.ConsumerGroupMigrationPolicy)
	return p == MigrationUpgrade || p == MigrationBidirectional
}

func (c Config) downgradeEnabled() bool {
	p := strings.ToLower(c.ConsumerGroupMigrationPolicy)
	return p == MigrationDowngrade || p == MigrationBidirectional
}

// first is the member's preferred protocol, which the consumer group
// answers with; zero when a record listed none.
func (c *classicMeta) first() protocol {
	if len(c.protocols) == 0 {
		return protocol{}
	}
	return c.protocols[0]
}

// canUpgrade is validateOnlineUpgrade.
func (m *machine) canUpgrade(c *classicGroup) bool {
	switch {
	case !m.cfg.upgradeEnabled():
		m.log.Info("cannot upgrade the classic group to a consumer group: the online upgrade is disabled", "group", c.id)
		return false
	case !c.usesConsumerProtocol():
		m.log.Info("cannot upgrade the classic group to a consumer group: it does not use the consumer protocol", "group", c.id)
		return false
	case int32(len(c.members)) > m.cfg.ConsumerGroupMaxSize:
		m.log.Info("cannot upgrade the classic group to a consumer group: it has more members than group.consumer.max.size", "group", c.id)
		return false
	case c.is(stateDead):
		return false
	}
	return true
}

// fromClassicGroup is ConsumerGroup.fromClassicGroup: each classic member
// becomes a stable classic member of a consumer group whose epochs are the
// classic generation, owning and targeting its last classic assignment. It
// changes nothing; an embedded subscription or assignment that does not
// parse refuses the upgrade.
func (m *machine) fromClassicGroup(c *classicGroup) (*consumerGroup, error) {
	g := newConsumerGroup(c.id, c.partition)
	g.epoch, g.assignmentEpoch = c.generation, c.generation
	name := ""
	if c.protocolName != nil {
		name = *c.protocolName
	}
	for _, id := range c.order {
		cm := c.members[id]
		sub, err := parseSubscription(cm.metadata(name))
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", id, err)
		}
		assigned, err := m.parseAssignment(cm.assignment)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", id, err)
		}
		mem := &consumerMember{
			id:                 id,
			instanceID:         cm.instanceID,
			rackID:             sub.Rack,
			clientID:           cm.clientID,
			clientHost:         cm.clientHost,
			topicNames:         normalizeTopics(sub.Topics),
			rebalanceTimeoutMs: cm.rebalanceTimeoutMs,
			classic:            &classicMeta{sessionTimeoutMs: cm.sessionTimeoutMs, protocols: slices.Clone(cm.protocols)},
			epoch:              c.generation,
			previousEpoch:      c.generation,
			state:              memberStable,
			assigned:           assigned,
			revoking:           tpSet{},
		}
		g.target[id] = assigned.clone()
		g.updateMember(mem)
	}
	return g, nil
}

// consumerGroupRecords is ConsumerGroup.createConsumerGroupRecords: what
// creates a converted group in the log.
func consumerGroupRecords(g *consumerGroup) []Record {
	ids := g.sortedMemberIDs()
	var recs []Record
	for _, id := range ids {
		recs = append(recs, cgMemberRecord(g.id, g.members[id]))
	}
	recs = append(recs, cgEpochRecord(g.id, g.epoch))
	for _, id := range ids {
		recs = append(recs, cgTargetMemberRecord(g.id, id, g.target[id]))
	}
	recs = append(recs, cgTargetEpochRecord(g.id, g.assignmentEpoch, g.assignmentTimestampMs))
	for _, id := range ids {
		recs = append(recs, cgCurrentAssignmentRecord(g.id, g.members[id]))
	}
	return recs
}

// installUpgrade puts a converted group in place of its classic group, as
// convertToConsumerGroup once the request proved valid: parked JoinGroups
// and SyncGroups hear REBALANCE_IN_PROGRESS and rejoin into the consumer
// group. The classic group is kept whole, not Dead, so that a failed
// append can put it back (undoConsumerOp); its timers find it gone and do
// nothing meanwhile.
func (m *machine) installUpgrade(op *consumerOp) {
	c, g := op.upgraded, op.g
	for _, id := range c.order {
		mem := c.members[id]
		if mem.joinReply != nil {
			mem.joinReply(joinError(errRebalanceInProgress, id))
			mem.joinReply = nil
			c.awaitingJoin--
		}
		if mem.syncReply != nil {
			mem.syncReply(syncError(errRebalanceInProgress))
			mem.syncReply = nil
		}
	}
	clear(c.pendingSync)
	op.recs = append(op.recs, groupTombstone(c.id))
	op.recs = append(op.recs, consumerGroupRecords(g)...)
	delete(op.p.groups, c.id)
	g.offsetStore = c.offsetStore
	for _, id := range g.sortedMemberIDs() {
		m.scheduleConsumerSession(g, id)
	}
	m.log.Info("upgraded the classic group to a consumer group", "group", g.id, "generation", c.generation, "members", len(c.members))
}

// restoreUpgraded puts back the classic group a failed upgrade replaced,
// with fresh member sessions and, if it was rebalancing, a fresh deadline.
func (m *machine) restoreUpgraded(p *partitionState, c *classicGroup, g *consumerGroup) {
	c.offsetStore = g.offsetStore
	p.groups[c.id] = c
	for id, mem := range c.members {
		m.scheduleHeartbeat(c, id, mem.sessionTimeoutMs)
	}
	switch {
	case c.is(statePreparingRebalance):
		m.fx.Schedule(joinKey(c), ms(int64(c.rebalanceTimeoutMs())), func() {
			if m.current(c) {
				m.completeJoin(c)
			}
		})
	case c.is(stateCompletingRebalance):
		// Its parked syncs were answered: rebalance again.
		m.prepareRebalance(c, "downgraded from a consumer group while completing a rebalance")
	}
}

// canDowngrade is validateOnlineDowngradeWithFencedMember: the group
// returns to the classic protocol when the member leaving is the last one
// that does not speak it.
func (m *machine) canDowngrade(g *consumerGroup, leaving string) bool {
	for id, mem := range g.members {
		if id != leaving && !mem.usesClassicProtocol() {
			return false
		}
	}
	switch {
	case len(g.members) <= 1:
		return false
	case !m.cfg.downgradeEnabled():
		m.log.Info("cannot downgrade the consumer group to a classic group: the online downgrade is disabled", "group", g.id)
		return false
	case int32(len(g.members)-1) > m.cfg.GroupMaxSize:
		m.log.Info("cannot downgrade the consumer group to a classic group: it has more members than group.max.size", "group", g.id)
		return false
	}
	return true
}

// downgrade is convertToClassicGroup: the consumer group's records go, and
// a Stable classic group of its other members, at the group epoch as
// generation, with their target assignments, takes its place and
// rebalances at once.
func (m *machine) downgrade(op *consumerOp, leaving string) {
	g, p := op.g, op.p
	op.begin()
	c := newClassicGroup(g.id, g.partition, m.nowMs())
	c.generation = g.epoch
	for _, id := range g.sortedMemberIDs() {
		mem := g.members[id]
		if id == leaving {
			continue
		}
		c.add(&member{
			id:                 id,
			instanceID:         mem.instanceID,
			clientID:           mem.clientID,
			clientHost:         mem.clientHost,
			rebalanceTimeoutMs: mem.rebalanceTimeoutMs,
			sessionTimeoutMs:   mem.classic.sessionTimeoutMs,
			protocolType:       consumerProtocolType,
			protocols:          slices.Clone(mem.classic.protocols),
		}, nil, 0)
	}
	c.protocolType = consumerProtocolType
	name := c.selectProtocol()
	c.protocolName = &name
	c.computeSubscribedTopics()
	assignments := make(map[string][]byte, len(c.members))
	for id, mem := range c.members {
		mem.assignment = m.serializeAssignment(g.target[id], mem.metadata(name))
		assignments[id] = mem.assignment
	}
	// Born Stable, as Kafka's fromConsumerGroup builds it: not a
	// transition of a group that was Empty.
	c.state, c.prevState, c.stateTimestamp = stateStable, stateEmpty, m.nowMs()
	op.recs = append(op.recs, consumerTombstones(g)...)
	op.recs = append(op.recs, groupMetadataRecord(c, assignments))

	m.cancelConsumerTimers(g)
	delete(p.consumers, g.id)
	g.dead = true
	c.offsetStore = g.offsetStore
	p.groups[c.id] = c
	op.downgraded = c
	for id, mem := range c.members {
		m.scheduleHeartbeat(c, id, mem.sessionTimeoutMs)
	}
	m.log.Info("downgraded the consumer group to a classic group", "group", g.id, "generation", c.generation, "members", len(c.members))
	m.prepareRebalance(c, "downgraded from a consumer group")
}

// undoDowngrade takes back a downgrade whose records failed: the classic
// group goes, the consumer group comes back as it was.
func (m *machine) undoDowngrade(op *consumerOp) {
	g, c := op.g, op.downgraded
	p := m.partitions[g.partition]
	if p == nil || p.loading || p.groups[c.id] != c || p.consumers[g.id] != nil {
		return
	}
	for _, id := range slices.Clone(c.order) {
		m.removeMember(c, id, errNotCoordinator, "the downgrade to a classic group was undone")
	}
	m.cancelGroupTimers(c)
	c.transitionTo(stateDead, m.nowMs())
	delete(p.groups, c.id)
	g.restore(op.snap)
	g.dead = false
	p.consumers[g.id] = g
	m.consumerGroupLoaded(g)
}

// supportsClassicProtocols is ConsumerGroup.supportsClassicProtocols: a
// classic member needs the consumer protocol type and a protocol every
// classic member supports.
func (g *consumerGroup) supportsClassicProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != consumerProtocolType || len(ps) == 0 {
		return false
	}
	classic := 0
	counts := make(map[string]int)
	for _, mem := range g.members {
		if mem.classic == nil {
			continue
		}
		classic++
		seen := make(map[string]bool)
		for _, p := range mem.classic.protocols {
			if !seen[p.name] {
				seen[p.name] = true
				counts[p.name]++
			}
		}
	}
	for _, p := range ps {
		if counts[p.Name] == classic {
			return true
		}
	}
	return false
}

// classicJoinConsumerGroup is classicGroupJoinToConsumerGroup: a classic
// member joins or rejoins a consumer group that has members. The answer
// comes once the member's records are durable, with its member epoch as
// generation and no leader: the coordinator assigns.
func (m *machine) classicJoinConsumerGroup(p *partitionState, g *consumerGroup, ci ClientInfo, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = m.newID()
	}
	if int32(len(g.members)) >= m.cfg.ConsumerGroupMaxSize && g.members[memberID] == nil {
		reply(joinError(errGroupMaxSizeReached, req.MemberID))
		return
	}
	if !g.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		reply(joinError(errInconsistentGroupProtocol, req.MemberID))
		return
	}
	if unknown && req.InstanceID == nil && req.Version >= 4 {
		// KIP-394: the member comes back with this id.
		reply(joinError(errMemberIDRequired, memberID))
		return
	}
	sub, err := parseSubscription(req.Protocols[0].Metadata)
	if err != nil {
		// Kafka fails the request with an IllegalStateException.
		m.log.Info("malformed consumer protocol subscription in JoinGroup", "group", g.id, "member", memberID, "err", err)
		reply(joinError(errUnknownServerError, req.MemberID))
		return
	}

	op := &consumerOp{p: p, g: g}
	var old, base, replaces *consumerMember
	if req.InstanceID == nil {
		old = g.members[memberID]
		base = old
	} else {
		existing := g.staticMember(req.InstanceID)
		switch {
		case unknown && existing == nil:
			old = g.members[memberID]
			base = old
		case unknown:
			replaces = existing
			base = existing.clone()
			base.id = memberID
			base.epoch, base.previousEpoch = 0, 0
		case existing == nil:
			reply(joinError(errUnknownMemberID, req.MemberID))
			return
		case existing.id != memberID:
			reply(joinError(errFencedInstanceID, req.MemberID))
			return
		default:
			old, base = existing, existing
		}
	}
	if base == nil {
		base = &consumerMember{id: memberID, rebalanceTimeoutMs: -1, assigned: tpSet{}, revoking: tpSet{}}
	}
	if replaces != nil {
		op.begin()
		op.recs = append(op.recs, memberTombstones(g.id, replaces.id)...)
		m.cancelConsumerMemberTimers(g, replaces.id)
		target := g.target[replaces.id]
		g.removeMember(replaces.id)
		g.deleteTarget(replaces.id)
		g.setTarget(base.id, target)
		base.assigned, base.revoking = base.assigned.clone(), tpSet{}
		op.recs = append(op.recs, cgMemberRecord(g.id, base), cgTargetMemberRecord(g.id, base.id, target), cgCurrentAssignmentRecord(g.id, base))
		g.updateMember(base)
		old = base
	}

	updated := base.clone()
	if req.InstanceID != nil {
		s := *req.InstanceID
		updated.instanceID = &s
	}
	if sub.Rack != nil {
		s := *sub.Rack
		updated.rackID = &s
	}
	updated.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	updated.topicNames = normalizeTopics(sub.Topics)
	updated.clientID, updated.clientHost = ci.ClientID, ci.ClientHost
	protocols := make([]protocol, 0, len(req.Protocols))
	for _, pr := range req.Protocols {
		protocols = append(protocols, protocol{name: pr.Name, metadata: slices.Clone(pr.Metadata)})
	}
	updated.classic = &classicMeta{sessionTimeoutMs: req.SessionTimeoutMillis, protocols: protocols}

	owned := make(tpSet)
	for _, t := range sub.OwnedPartitions {
		if info, ok := m.topicsByName()[t.Topic]; ok {
			owned.add(info.ID, t.Partitions...)
		}
	}
	next, code := m.updateConsumerMember(op, old, updated, owned)
	if code != 0 {
		reply(joinError(code, req.MemberID))
		return
	}
	m.fx.Cancel(consumerRebalanceKey(g, next.id)) // classic members revoke by rejoining
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID = next.id
	resp.Generation = next.epoch
	resp.ProtocolType = kmsg.StringPtr(consumerProtocolType)
	resp.Protocol = kmsg.StringPtr(next.classic.first().name)
	resp.Members = []kmsg.JoinGroupResponseMember{}
	rebalance := req.RebalanceTimeoutMillis
	id := next.id
	m.finishConsumerOp(op, func(err error) {
		if err != nil {
			reply(joinError(appendErrorCode(err), req.MemberID))
			return
		}
		if m.currentConsumer(g) && g.members[id] != nil {
			m.cancelConsumerJoin(g, id)
			m.scheduleConsumerSession(g, id)
			m.fx.Schedule(consumerSyncKey(g, id), ms(int64(rebalance)), func() {
				m.expireConsumerMember(g, id, anyEpoch, "the classic member did not sync within its rebalance timeout")
			})
		}
		reply(resp)
	})
}

// classicSyncConsumerGroup is classicGroupSyncToConsumerGroup: the member
// gets its current assignment, behind the partition's earlier appends.
func (m *machine) classicSyncConsumerGroup(p *partitionState, g *consumerGroup, req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	mem, code := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
	case req.Generation != mem.epoch:
		code = errIllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != mem.classic.first().name:
		code = errInconsistentGroupProtocol
	default:
		code = m.rebalanceInProgress(g, mem)
	}
	if code != 0 {
		reply(syncError(code))
		return
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType = req.ProtocolType
	resp.Protocol = req.Protocol
	resp.MemberAssignment = m.serializeAssignment(mem.assigned, mem.classic.first().metadata)
	id := mem.id
	m.fx.Append(p.id, nil, func(err error) {
		if err != nil {
			reply(syncError(appendErrorCode(err)))
			return
		}
		if m.currentConsumer(g) && g.members[id] != nil {
			m.fx.Cancel(consumerSyncKey(g, id))
			m.scheduleConsumerSession(g, id)
		}
		reply(resp)
	})
}

// classicHeartbeatConsumerGroup is classicGroupHeartbeatToConsumerGroup.
func (m *machine) classicHeartbeatConsumerGroup(g *consumerGroup, req *kmsg.HeartbeatRequest) int16 {
	mem, code := g.classicMember(req.MemberID, req.InstanceID)
	if code != 0 {
		return code
	}
	if req.Generation != mem.epoch {
		return errIllegalGeneration
	}
	m.scheduleConsumerSession(g, mem.id)
	// The member rejoins when the group moved on, when it must revoke
	// partitions, or when the partitions it waits for are free.
	if mem.epoch < g.epoch || mem.state == memberUnrevokedPartitions ||
		mem.state == memberUnreleasedPartitions && !g.waitingOnUnreleased(mem) {
		m.scheduleConsumerJoinIfAbsent(g, mem)
		return errRebalanceInProgress
	}
	return 0
}

// rebalanceInProgress is throwIfRebalanceInProgress: a member behind the
// group epoch must rejoin, unless it is revoking, which it finishes first.
func (m *machine) rebalanceInProgress(g *consumerGroup, mem *consumerMember) int16 {
	if g.epoch > mem.epoch && mem.state != memberUnrevokedPartitions {
		m.scheduleConsumerJoinIfAbsent(g, mem)
		return errRebalanceInProgress
	}
	return 0
}

// classicMember finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup names, as validateConsumerGroupMember and
// throwIfMemberDoesNotUseClassicProtocol.
func (g *consumerGroup) classicMember(memberID string, instanceID *string) (*consumerMember, int16) {
	var mem *consumerMember
	if instanceID == nil {
		mem = g.members[memberID]
		if mem == nil {
			return nil, errUnknownMemberID
		}
	} else {
		mem = g.staticMember(instanceID)
		switch {
		case mem == nil:
			return nil, errUnknownMemberID
		case mem.id != memberID:
			return nil, errFencedInstanceID
		}
	}
	if !mem.usesClassicProtocol() {
		return nil, errUnknownMemberID
	}
	return mem, 0
}

// waitingOnUnreleased reports whether a partition of the member's target
// is still held by another member.
func (g *consumerGroup) waitingOnUnreleased(mem *consumerMember) bool {
	if mem.state != memberUnreleasedPartitions {
		return false
	}
	for id, ps := range g.target[mem.id] {
		for _, p := range ps {
			if !mem.assigned.has(id, p) && g.partitionOwned(id, p) {
				return true
			}
		}
	}
	return false
}

func consumerJoinKey(g *consumerGroup, id string) timerKey {
	return timerKey{kind: timerConsumerJoin, group: g.id, member: id}
}

func consumerSyncKey(g *consumerGroup, id string) timerKey {
	return timerKey{kind: timerConsumerSync, group: g.id, member: id}
}

// scheduleConsumerJoinIfAbsent gives a classic member told to rejoin its
// rebalance timeout to do so; it is fenced otherwise. A deadline already
// running is left alone.
func (m *machine) scheduleConsumerJoinIfAbsent(g *consumerGroup, mem *consumerMember) {
	if g.joinDeadlines[mem.id] {
		return
	}
	g.joinDeadlines[mem.id] = true
	id := mem.id
	timeout := mem.rebalanceTimeoutMs
	if timeout < 0 {
		timeout = mem.classic.sessionTimeoutMs
	}
	m.fx.Schedule(consumerJoinKey(g, id), ms(int64(timeout)), func() {
		delete(g.joinDeadlines, id)
		m.expireConsumerMember(g, id, anyEpoch, "the classic member did not rejoin within its rebalance timeout")
	})
}

func (m *machine) cancelConsumerJoin(g *consumerGroup, id string) {
	delete(g.joinDeadlines, id)
	m.fx.Cancel(consumerJoinKey(g, id))
}

// parseSubscription reads a ConsumerProtocolSubscription.
func parseSubscription(b []byte) (*kmsg.ConsumerMemberMetadata, error) {
	var s kmsg.ConsumerMemberMetadata
	if err := s.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("malformed consumer protocol subscription: %w", err)
	}
	return &s, nil
}

// parseAssignment reads a ConsumerProtocolAssignment into partitions by
// topic id; topics that no longer exist are dropped.
func (m *machine) parseAssignment(b []byte) (tpSet, error) {
	out := tpSet{}
	if len(b) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("malformed consumer protocol assignment: %w", err)
	}
	for _, t := range a.Topics {
		if info, ok := m.topicsByName()[t.Topic]; ok {
			out.add(info.ID, t.Partitions...)
		}
	}
	return out, nil
}

// serializeAssignment writes partitions as a ConsumerProtocolAssignment of
// the version of the member's subscription (at most 3), as Kafka's
// prepareAssignment.
func (m *machine) serializeAssignment(s tpSet, subscription []byte) []byte {
	var version int16
	if len(subscription) >= 2 {
		version = int16(subscription[0])<<8 | int16(subscription[1])
	}
	version = min(max(version, 0), 3)
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = version
	for _, id := range s.topics() {
		name, ok := m.topicsByID()[[16]byte(id)]
		if !ok {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic = name
		t.Partitions = slices.Clone(s[id])
		a.Topics = append(a.Topics, t)
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return a.AppendTo(nil)
}
