package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the classic group protocol: JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup and the rebalance they drive, after Kafka's
// GroupMetadataManager (classicGroupJoin and friends).

func joinError(code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = code
	r.MemberID = memberID
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// joinGroup handles JoinGroup v0-v9.
func (m *machine) joinGroup(ci ClientInfo, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if req.Group == "" {
		reply(joinError(errInvalidGroupID, req.MemberID))
		return
	}
	if req.SessionTimeoutMillis < m.cfg.GroupMinSessionTimeoutMs || req.SessionTimeoutMillis > m.cfg.GroupMaxSessionTimeoutMs {
		reply(joinError(errInvalidSessionTimeout, req.MemberID))
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		reply(joinError(code, req.MemberID))
		return
	}
	if req.Version == 0 {
		// v0 has no rebalance timeout; Kafka uses the session timeout. The
		// caller owns req, so change a copy.
		cp := *req
		cp.RebalanceTimeoutMillis = cp.SessionTimeoutMillis
		req = &cp
	}
	unknown := req.MemberID == ""
	if p.streams[req.Group] != nil {
		// A streams group is no group of the classic protocol, empty or
		// not, as Kafka's classicGroupJoin answers for other group types.
		reply(joinError(errInconsistentGroupProtocol, req.MemberID))
		return
	}
	if cg := p.consumers[req.Group]; cg != nil {
		if cg.state() != cgEmpty {
			// The consumer group serves the member through the classic
			// protocol.
			m.classicJoinConsumerGroup(p, cg, ci, req, reply)
			return
		}
		if !unknown {
			reply(joinError(errUnknownMemberID, req.MemberID))
			return
		}
		// An empty consumer group gives way to a classic group, which
		// keeps its offsets (maybeDeleteEmptyConsumerGroup).
		recs := consumerTombstones(cg)
		m.deleteConsumerGroup(p, cg)
		g := newClassicGroup(req.Group, p.id, m.nowMs())
		g.offsetStore = cg.offsetStore
		p.groups[req.Group] = g
		m.fx.Append(p.id, recs, func(err error) {
			if err != nil {
				m.log.Warn("delete empty consumer group", "group", req.Group, "err", err)
			}
		})
	}
	g := p.groups[req.Group]
	if g == nil {
		if !unknown {
			reply(joinError(errUnknownMemberID, req.MemberID))
			return
		}
		g = newClassicGroup(req.Group, p.id, m.nowMs())
		p.groups[req.Group] = g
	}
	switch {
	case !m.acceptJoiningMember(g, req.MemberID):
		if req.MemberID != "" {
			m.removeMember(g, req.MemberID, errGroupMaxSizeReached, "the group reached group.max.size")
		}
		reply(joinError(errGroupMaxSizeReached, ""))
	case unknown:
		m.joinNewMember(ci, req, g, reply)
	default:
		m.joinExistingMember(ci, req, g, reply)
	}
}

// acceptJoiningMember enforces group.max.size. While preparing a rebalance
// the members already parked count, so the last members to rejoin of a group
// over the limit are the ones turned away.
func (m *machine) acceptJoiningMember(g *classicGroup, memberID string) bool {
	switch g.state {
	case statePreparingRebalance:
		if mem := g.members[memberID]; mem != nil && mem.awaitingJoin() {
			return true
		}
		return int32(g.awaitingJoin) < m.cfg.GroupMaxSize
	case stateCompletingRebalance, stateStable:
		if g.members[memberID] != nil {
			return true
		}
		return int32(len(g.members)) < m.cfg.GroupMaxSize
	}
	return true
}

func (m *machine) joinNewMember(ci ClientInfo, req *kmsg.JoinGroupRequest, g *classicGroup, reply func(*kmsg.JoinGroupResponse)) {
	if g.is(stateDead) {
		reply(joinError(errCoordinatorNotAvailable, ""))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		reply(joinError(errInconsistentGroupProtocol, ""))
		return
	}
	prefix := ci.ClientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	newID := prefix + "-" + m.newID()
	if req.InstanceID != nil {
		if existing, ok := g.static[*req.InstanceID]; ok {
			m.rejoinStaticMember(req, g, existing, newID, reply)
			return
		}
		m.addMemberAndRebalance(ci, req, g, newID, reply)
		return
	}
	if req.Version >= 4 {
		// KIP-394: hand out the id and let the member come back with it, so
		// a member that never returns holds no slot in the rebalance.
		g.pendingJoin[newID] = true
		m.scheduleHeartbeat(g, newID, req.SessionTimeoutMillis)
		m.log.Info("dynamic member without a member id joins the group: asking it to rejoin with a new id",
			"group", g.id, "state", g.state.String(), "member", newID, "client_id", ci.ClientID, "client_host", ci.ClientHost)
		reply(joinError(errMemberIDRequired, newID))
		return
	}
	m.addMemberAndRebalance(ci, req, g, newID, reply)
}

func (m *machine) joinExistingMember(ci ClientInfo, req *kmsg.JoinGroupRequest, g *classicGroup, reply func(*kmsg.JoinGroupResponse)) {
	id := req.MemberID
	if g.is(stateDead) {
		reply(joinError(errCoordinatorNotAvailable, id))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		reply(joinError(errInconsistentGroupProtocol, id))
		return
	}
	if g.pendingJoin[id] {
		if req.InstanceID != nil {
			// Pending ids are only handed to dynamic members; Kafka fails
			// such a request with an internal error.
			reply(joinError(errUnknownServerError, id))
			return
		}
		m.addMemberAndRebalance(ci, req, g, id, reply)
		return
	}
	if code := g.validateMember(id, req.InstanceID); code != 0 {
		reply(joinError(code, id))
		return
	}
	mem := g.members[id]
	switch g.state {
	case statePreparingRebalance:
		m.updateMemberAndRebalance(req, g, mem, reply)
	case stateCompletingRebalance:
		if !mem.matches(req.Protocols) {
			m.updateMemberAndRebalance(req, g, mem, reply)
			return
		}
		// The member lost its JoinGroup response: send the same again.
		r := m.generationResponse(g, id)
		if g.isLeader(id) {
			r.Members = g.currentMembers()
		}
		reply(r)
	case stateStable:
		// A rejoining leader forces a rebalance so that it can react to
		// changes outside member metadata, such as new partitions.
		if g.isLeader(id) || !mem.matches(req.Protocols) {
			m.updateMemberAndRebalance(req, g, mem, reply)
			return
		}
		reply(m.generationResponse(g, id))
	default:
		reply(joinError(errUnknownMemberID, id))
	}
}

// generationResponse is a successful JoinGroup response for the current
// generation, without the member list.
func (m *machine) generationResponse(g *classicGroup, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.MemberID = memberID
	r.Generation = g.generation
	r.Protocol = g.protocolName
	r.ProtocolType = optString(g.protocolType)
	r.LeaderID = g.leader
	return r
}

func (m *machine) addMemberAndRebalance(ci ClientInfo, req *kmsg.JoinGroupRequest, g *classicGroup, id string, reply func(*kmsg.JoinGroupResponse)) {
	mem := &member{
		id:                 id,
		clientID:           ci.ClientID,
		clientHost:         ci.ClientHost,
		rebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		sessionTimeoutMs:   req.SessionTimeoutMillis,
		protocolType:       req.ProtocolType,
		protocols:          protocolsFrom(req.Protocols),
		isNew:              true,
	}
	if req.InstanceID != nil {
		inst := *req.InstanceID
		mem.instanceID = &inst
	}
	if g.is(statePreparingRebalance) && g.prevState == stateEmpty {
		// Another member arrived during the initial delay: wait longer.
		g.newMemberAdded = true
	}
	g.add(mem, reply, req.Version)
	reason := "member " + id + " joined" + clientReason(req)
	m.log.Info("added member to group", "group", g.id, "state", g.state.String(), "member", id,
		"instance", deref(req.InstanceID), "client_id", ci.ClientID, "client_host", ci.ClientHost, "reason", reason)
	// A new member cannot heartbeat while its JoinGroup is parked, and a
	// client that gave up would leave it behind forever: bound the wait.
	m.scheduleHeartbeat(g, id, m.cfg.GroupNewMemberJoinTimeoutMs)
	m.maybePrepareRebalanceOrCompleteJoin(g, reason)
}

func (m *machine) updateMemberAndRebalance(req *kmsg.JoinGroupRequest, g *classicGroup, mem *member, reply func(*kmsg.JoinGroupResponse)) {
	m.updateMember(g, mem, protocolsFrom(req.Protocols), req.RebalanceTimeoutMillis, req.SessionTimeoutMillis, reply, req.Version)
	m.maybePrepareRebalanceOrCompleteJoin(g, "member "+mem.id+" rejoined in state "+g.state.String()+clientReason(req))
}

// clientReason is the reason a JoinGroup (v5+, KIP-800) gives, for the
// log lines of the rebalance it causes.
func clientReason(req *kmsg.JoinGroupRequest) string {
	if req.Reason == nil || *req.Reason == "" {
		return ""
	}
	return "; client reason: " + *req.Reason
}

// updateMember replaces a member's protocols and timeouts and parks (or, with
// a nil reply, unparks) its JoinGroup. A JoinGroup the member parked before
// is answered REBALANCE_IN_PROGRESS: its client has retried, so nobody
// waits for the old answer.
func (m *machine) updateMember(g *classicGroup, mem *member, ps []protocol, rebalanceMs, sessionMs int32, reply func(*kmsg.JoinGroupResponse), version int16) {
	g.countProtocols(mem, -1)
	mem.protocols = ps
	g.countProtocols(mem, 1)
	mem.rebalanceTimeoutMs = rebalanceMs
	mem.sessionTimeoutMs = sessionMs
	switch {
	case reply != nil && mem.joinReply == nil:
		g.awaitingJoin++
	case reply == nil && mem.joinReply != nil:
		g.awaitingJoin--
	case reply != nil && mem.joinReply != nil:
		mem.joinReply(joinError(errRebalanceInProgress, mem.id))
	}
	mem.joinReply = reply
	mem.joinVersion = version
}

func (m *machine) maybePrepareRebalanceOrCompleteJoin(g *classicGroup, reason string) {
	if g.canRebalance() {
		m.prepareRebalance(g, reason)
		return
	}
	m.maybeCompleteJoinPhase(g)
}

// maybeCompleteJoinPhase ends the join phase once everyone rejoined, except
// in the initial rebalance, which always waits out its delay.
func (m *machine) maybeCompleteJoinPhase(g *classicGroup) {
	if !g.is(statePreparingRebalance) || g.prevState == stateEmpty || !g.hasAllMembersJoined() {
		return
	}
	m.completeJoin(g)
}

// prepareRebalance starts a rebalance; reason says why, for the log line
// an operator follows a rebalance storm by (Kafka's "Preparing to
// rebalance group").
func (m *machine) prepareRebalance(g *classicGroup, reason string) {
	m.log.Info("preparing to rebalance group", "group", g.id, "state", g.state.String(),
		"generation", g.generation, "partition", g.partition, "members", len(g.members), "reason", reason)
	if g.is(stateCompletingRebalance) {
		m.resetAndPropagateAssignment(g, errRebalanceInProgress)
	}
	clear(g.pendingSync)
	m.fx.Cancel(syncKey(g))
	initial := g.is(stateEmpty)
	if initial {
		delay := m.cfg.GroupInitialRebalanceDelayMs
		remaining := max(g.rebalanceTimeoutMs()-delay, 0)
		m.fx.Schedule(joinKey(g), ms(int64(delay)), func() { m.tryCompleteInitialRebalance(g, delay, remaining) })
	}
	g.transitionTo(statePreparingRebalance, m.nowMs())
	if initial {
		return
	}
	if g.hasAllMembersJoined() {
		m.completeJoin(g)
		return
	}
	m.fx.Schedule(joinKey(g), ms(int64(g.rebalanceTimeoutMs())), func() {
		if m.current(g) {
			m.completeJoin(g)
		}
	})
}

// tryCompleteInitialRebalance ends the initial delay, or extends it by up to
// another delay while new members keep arriving and the rebalance timeout
// allows.
func (m *machine) tryCompleteInitialRebalance(g *classicGroup, delay, remaining int32) {
	if !m.current(g) {
		return
	}
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		next := min(m.cfg.GroupInitialRebalanceDelayMs, remaining)
		nextRemaining := max(remaining-delay, 0)
		m.fx.Schedule(joinKey(g), ms(int64(next)), func() { m.tryCompleteInitialRebalance(g, next, nextRemaining) })
		return
	}
	m.completeJoin(g)
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed, the generation advances, and every parked JoinGroup is answered,
// the leader's with the member list.
func (m *machine) completeJoin(g *classicGroup) {
	m.fx.Cancel(joinKey(g))
	for _, id := range append([]string(nil), g.order...) {
		if mem := g.members[id]; !mem.awaitingJoin() && !mem.isStatic() {
			m.removeMember(g, id, errUnknownMemberID, "it did not rejoin within the rebalance timeout")
		}
	}
	if g.is(stateDead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait for
		// them, or for their sessions to expire.
		m.fx.Schedule(joinKey(g), ms(int64(g.rebalanceTimeoutMs())), func() {
			if m.current(g) {
				m.completeJoin(g)
			}
		})
		return
	}
	g.initNextGeneration(m.nowMs())
	if g.is(stateEmpty) {
		m.log.Info("group is now empty", "group", g.id, "generation", g.generation, "partition", g.partition)
		rec := groupMetadataRecord(g, nil)
		m.fx.Append(g.partition, []Record{rec}, func(err error) {
			if err != nil {
				m.log.Warn("write empty group metadata", "group", g.id, "err", err)
			}
		})
		return
	}
	for _, id := range g.order {
		mem := g.members[id]
		r := m.generationResponse(g, id)
		if g.isLeader(id) {
			r.Members = g.currentMembers()
		}
		if mem.joinReply != nil {
			mem.joinReply(r)
			mem.joinReply = nil
			g.awaitingJoin--
		}
		m.scheduleHeartbeat(g, id, mem.sessionTimeoutMs)
		mem.isNew = false
		g.pendingSync[id] = true
	}
	m.log.Info("stabilized group", "group", g.id, "generation", g.generation, "partition", g.partition,
		"protocol_type", g.protocolType, "protocol", deref(g.protocolName), "leader", g.leader, "members", len(g.members))
	gen := g.generation
	m.fx.Schedule(syncKey(g), ms(int64(g.rebalanceTimeoutMs())), func() { m.expirePendingSync(g, gen) })
}

// expirePendingSync removes the members that did not send SyncGroup within
// the rebalance timeout and rebalances without them.
func (m *machine) expirePendingSync(g *classicGroup, gen int32) {
	if !m.current(g) || gen != g.generation {
		return
	}
	if !g.is(stateCompletingRebalance) && !g.is(stateStable) || len(g.pendingSync) == 0 {
		return
	}
	for _, id := range append([]string(nil), g.order...) {
		if g.pendingSync[id] {
			m.removeMember(g, id, errUnknownMemberID, "it sent no SyncGroup within the rebalance timeout")
		}
	}
	m.prepareRebalance(g, "members sent no SyncGroup within the rebalance timeout")
}

// expireHeartbeat runs when a member's session timer fires.
func (m *machine) expireHeartbeat(g *classicGroup, id string) {
	if !m.current(g) {
		return
	}
	if g.pendingJoin[id] {
		m.log.Info("removed pending member from group: it did not rejoin with its id within the session timeout", "group", g.id, "member", id)
		g.remove(id)
		if g.is(statePreparingRebalance) && g.hasAllMembersJoined() {
			m.completeJoin(g)
		}
		return
	}
	mem := g.members[id]
	if mem == nil || mem.hasSatisfiedHeartbeat() {
		return
	}
	m.removeMember(g, id, errUnknownMemberID, "its session expired")
	switch {
	case g.is(stateStable) || g.is(stateCompletingRebalance):
		m.maybePrepareRebalanceOrCompleteJoin(g, "member "+id+" removed on heartbeat expiration")
	case g.is(statePreparingRebalance) && g.hasAllMembersJoined():
		m.completeJoin(g)
	}
}

// rejoinStaticMember handles a known group.instance.id joining without a
// member id: the member gets a new id, the old one is fenced, and a stable
// group keeps its assignment without a rebalance when the selected protocol
// does not change.
func (m *machine) rejoinStaticMember(req *kmsg.JoinGroupRequest, g *classicGroup, oldID, newID string, reply func(*kmsg.JoinGroupResponse)) {
	instanceID := *req.InstanceID
	currentLeader := g.leader
	m.fx.Cancel(heartbeatKey(g, oldID))
	nm := g.replaceStaticMember(instanceID, oldID, newID)
	m.scheduleHeartbeat(g, newID, nm.sessionTimeoutMs)
	oldRebalance, oldSession, oldProtocols := nm.rebalanceTimeoutMs, nm.sessionTimeoutMs, nm.protocols
	m.updateMember(g, nm, protocolsFrom(req.Protocols), req.RebalanceTimeoutMillis, req.SessionTimeoutMillis, reply, req.Version)

	switch g.state {
	case stateStable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			m.maybePrepareRebalanceOrCompleteJoin(g, "static member "+instanceID+" rejoined with protocols that change the group's")
			return
		}
		gen := g.generation
		rec := groupMetadataRecord(g, g.assignments())
		m.fx.Append(g.partition, []Record{rec}, func(err error) {
			if !m.current(g) || g.members[newID] != nm {
				return
			}
			if err != nil {
				// Undo the replacement: the log still names the old id.
				m.log.Warn("persist static member rejoin", "group", g.id, "instance", instanceID, "err", err)
				parked := nm.joinReply // reply, or a retry that superseded it
				m.updateMember(g, nm, oldProtocols, oldRebalance, oldSession, nil, 0)
				m.fx.Cancel(heartbeatKey(g, newID))
				old := g.replaceStaticMember(instanceID, newID, oldID)
				m.scheduleHeartbeat(g, oldID, old.sessionTimeoutMs)
				if parked != nil {
					r := m.generationResponse(g, "")
					r.ErrorCode = appendErrorCode(err)
					r.LeaderID = currentLeader
					parked(r)
				}
				return
			}
			if nm.joinReply == nil || g.generation != gen {
				return
			}
			r := m.generationResponse(g, newID)
			if nm.joinVersion >= 9 {
				// The leader skips assigning and just syncs.
				if g.isLeader(newID) {
					r.Members = g.currentMembers()
					r.SkipAssignment = true
				}
			} else {
				// Older leaders would reassign; naming the old leader id
				// makes the rejoined member act as a follower.
				r.LeaderID = currentLeader
			}
			nm.joinReply(r)
			nm.joinReply = nil
			g.awaitingJoin--
		})
	case stateCompletingRebalance:
		// The leader may already be assigning with the old member id.
		m.prepareRebalance(g, "static member "+instanceID+" rejoined while the leader assigns")
	default:
		m.maybeCompleteJoinPhase(g)
	}
}

// syncGroup handles SyncGroup v0-v5.
func (m *machine) syncGroup(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	if req.Group == "" {
		reply(syncError(errInvalidGroupID))
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		reply(syncError(code))
		return
	}
	if cg := p.consumers[req.Group]; cg != nil {
		m.classicSyncConsumerGroup(p, cg, req, reply)
		return
	}
	g := p.groups[req.Group]
	switch {
	case g == nil || g.is(stateEmpty):
		reply(syncError(errUnknownMemberID))
		return
	case g.is(stateDead):
		reply(syncError(errCoordinatorNotAvailable))
		return
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		reply(syncError(code))
		return
	}
	if req.Generation != g.generation {
		reply(syncError(errIllegalGeneration))
		return
	}
	if inconsistent(req.ProtocolType, optString(g.protocolType)) || inconsistent(req.Protocol, g.protocolName) {
		reply(syncError(errInconsistentGroupProtocol))
		return
	}
	mem := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		reply(syncError(errRebalanceInProgress))
	case stateCompletingRebalance:
		if mem.syncReply != nil {
			mem.syncReply(syncError(errRebalanceInProgress))
		}
		mem.syncReply = reply
		m.removePendingSync(g, req.MemberID)
		if g.isLeader(req.MemberID) {
			m.storeAssignment(g, req)
		}
	case stateStable:
		m.removePendingSync(g, req.MemberID)
		r := kmsg.NewPtrSyncGroupResponse()
		r.ProtocolType = optString(g.protocolType)
		r.Protocol = g.protocolName
		r.MemberAssignment = mem.assignment
		reply(r)
	}
}

func inconsistent(req, group *string) bool {
	return req != nil && group != nil && *req != *group
}

// storeAssignment persists the leader's assignment and, once it is durable,
// hands every member its part and makes the group stable. Members the leader
// left out get an empty assignment; entries for unknown members are ignored.
func (m *machine) storeAssignment(g *classicGroup, req *kmsg.SyncGroupRequest) {
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assignment[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if assignment[id] == nil {
			assignment[id] = []byte{}
		}
	}
	gen := g.generation
	rec := groupMetadataRecord(g, assignment)
	m.fx.Append(g.partition, []Record{rec}, func(err error) {
		// A member may have joined meanwhile and restarted the rebalance,
		// which already answered the parked syncs.
		if !g.is(stateCompletingRebalance) || g.generation != gen {
			return
		}
		if err != nil {
			m.resetAndPropagateAssignment(g, appendErrorCode(err))
			m.maybePrepareRebalanceOrCompleteJoin(g, fmt.Sprintf("storing the assignment of generation %d failed: %v", gen, err))
			return
		}
		for id, mem := range g.members {
			mem.assignment = assignment[id]
		}
		m.propagateAssignment(g, 0)
		g.transitionTo(stateStable, m.nowMs())
		m.log.Info("stored the leader's assignment; group is stable", "group", g.id, "generation", gen,
			"leader", g.leader, "members", len(g.members), "static_members", len(g.static))
	})
}

func (m *machine) resetAndPropagateAssignment(g *classicGroup, code int16) {
	for _, mem := range g.members {
		mem.assignment = []byte{}
	}
	m.propagateAssignment(g, code)
}

// propagateAssignment answers every parked SyncGroup and restarts those
// members' sessions, which could not be checked while they waited.
func (m *machine) propagateAssignment(g *classicGroup, code int16) {
	for _, id := range g.order {
		mem := g.members[id]
		if mem.syncReply == nil {
			continue
		}
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = code
		if code == 0 {
			r.ProtocolType = optString(g.protocolType)
			r.Protocol = g.protocolName
		}
		r.MemberAssignment = mem.assignment
		mem.syncReply(r)
		mem.syncReply = nil
		m.scheduleHeartbeat(g, id, mem.sessionTimeoutMs)
	}
}

func (m *machine) removePendingSync(g *classicGroup, id string) {
	delete(g.pendingSync, id)
	switch g.state {
	case stateCompletingRebalance, stateStable:
		if len(g.pendingSync) > 0 {
			return
		}
	}
	m.fx.Cancel(syncKey(g))
}

// heartbeat handles Heartbeat v0-v4.
func (m *machine) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return errInvalidGroupID
	}
	p, code := m.partitionOf(req.Group)
	switch {
	case code == errCoordinatorLoadInProgress:
		// As Kafka: a loading coordinator answers heartbeats blindly.
		return 0
	case code != 0:
		return code
	}
	if cg := p.consumers[req.Group]; cg != nil {
		return m.classicHeartbeatConsumerGroup(cg, req)
	}
	g := p.groups[req.Group]
	if g == nil {
		return errUnknownMemberID
	}
	if g.is(stateDead) {
		return errCoordinatorNotAvailable
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return errIllegalGeneration
	}
	switch g.state {
	case stateEmpty:
		return errUnknownMemberID
	case statePreparingRebalance:
		m.scheduleHeartbeat(g, req.MemberID, g.members[req.MemberID].sessionTimeoutMs)
		return errRebalanceInProgress
	default:
		m.scheduleHeartbeat(g, req.MemberID, g.members[req.MemberID].sessionTimeoutMs)
		return 0
	}
}

// leaveGroup handles LeaveGroup v0-v5. It answers after the appends the
// departure caused (the empty group's metadata) are done.
func (m *machine) leaveGroup(req *kmsg.LeaveGroupRequest, reply func(*kmsg.LeaveGroupResponse)) {
	resp := kmsg.NewPtrLeaveGroupResponse()
	if req.Group == "" {
		resp.ErrorCode = errInvalidGroupID
		reply(resp)
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	identities := req.Members
	if req.Version < 3 {
		identities = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if cg := p.consumers[req.Group]; cg != nil {
		m.leaveConsumerGroup(p, cg, identities, resp, reply)
		return
	}
	g := p.groups[req.Group]
	if g == nil {
		for _, id := range identities {
			resp.Members = append(resp.Members, leaveResult(id, errUnknownMemberID))
		}
		reply(resp)
		return
	}
	if g.is(stateDead) {
		resp.ErrorCode = errCoordinatorNotAvailable
		reply(resp)
		return
	}
	left := false
	for _, id := range identities {
		code := m.leaveOne(g, id)
		resp.Members = append(resp.Members, leaveResult(id, code))
		left = left || code == 0
	}
	if left {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			m.maybePrepareRebalanceOrCompleteJoin(g, "members left by LeaveGroup")
		case statePreparingRebalance:
			m.maybeCompleteJoinPhase(g)
		}
	}
	m.fx.Append(g.partition, nil, func(error) { reply(resp) })
}

// leaveReason is the reason a LeaveGroup member entry gives (v5+, KIP-800).
func leaveReason(id kmsg.LeaveGroupRequestMember) string {
	if id.Reason == nil || *id.Reason == "" {
		return ""
	}
	return "; client reason: " + *id.Reason
}

func leaveResult(id kmsg.LeaveGroupRequestMember, code int16) kmsg.LeaveGroupResponseMember {
	r := kmsg.NewLeaveGroupResponseMember()
	r.MemberID = id.MemberID
	r.InstanceID = id.InstanceID
	r.ErrorCode = code
	return r
}

// leaveOne removes one member named by a LeaveGroup. An admin may name a
// static member by its group.instance.id alone.
func (m *machine) leaveOne(g *classicGroup, id kmsg.LeaveGroupRequestMember) int16 {
	if id.MemberID == "" {
		if id.InstanceID == nil {
			return errUnknownMemberID
		}
		memberID, ok := g.static[*id.InstanceID]
		if !ok {
			return errUnknownMemberID
		}
		m.removeMember(g, memberID, errUnknownMemberID, "an admin removed static member "+*id.InstanceID+" by LeaveGroup")
		return 0
	}
	if g.pendingJoin[id.MemberID] {
		m.fx.Cancel(heartbeatKey(g, id.MemberID))
		g.remove(id.MemberID)
		return 0
	}
	if code := g.validateMember(id.MemberID, id.InstanceID); code != 0 {
		return code
	}
	m.removeMember(g, id.MemberID, errUnknownMemberID, "it left by LeaveGroup"+leaveReason(id))
	return 0
}

// leaveConsumerGroup is a LeaveGroup naming members of a consumer group,
// as classicGroupLeaveToConsumerGroup. Gregor's consumer groups have no
// classic protocol members, so only an admin removal (a group.instance.id
// with no member id) removes one; other identities answer
// UNKNOWN_MEMBER_ID as the classic protocol knows no such member.
func (m *machine) leaveConsumerGroup(p *partitionState, g *consumerGroup, identities []kmsg.LeaveGroupRequestMember, resp *kmsg.LeaveGroupResponse, reply func(*kmsg.LeaveGroupResponse)) {
	// classicGroupLeaveToConsumerGroup: classic members leave; a member
	// named by instance id alone is removed by an administrator. Leaving
	// this way never downgrades the group.
	op := &consumerOp{p: p, g: g}
	for _, id := range identities {
		code := errUnknownMemberID
		var mem *consumerMember
		if id.InstanceID == nil {
			if mem = g.members[id.MemberID]; mem != nil && !mem.usesClassicProtocol() {
				mem = nil
			}
		} else {
			mem = g.staticMember(id.InstanceID)
			switch {
			case mem == nil:
			case id.MemberID != "" && id.MemberID != mem.id:
				code, mem = errFencedInstanceID, nil
			case id.MemberID != "" && !mem.usesClassicProtocol():
				mem = nil
			}
		}
		if mem != nil {
			m.log.Info("member left the consumer group by LeaveGroup", "group", g.id, "member", mem.id)
			m.removeConsumerMember(op, mem)
			code = 0
		}
		resp.Members = append(resp.Members, leaveResult(id, code))
	}
	m.finishConsumerOp(op, func(err error) {
		if err != nil {
			failed := kmsg.NewPtrLeaveGroupResponse()
			failed.ErrorCode = appendErrorCode(err)
			reply(failed)
			return
		}
		reply(resp)
	})
}
