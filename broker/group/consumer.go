package group

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the KIP-848 consumer group protocol: ConsumerGroupHeartbeat
// and the member lifecycle it drives, after Kafka 4's GroupMetadataManager
// (consumerGroupHeartbeat, consumerGroupLeave, consumerGroupFenceMember).
// A heartbeat (1) creates or updates the member, bumping the group epoch
// when its subscription or the subscribed topics' metadata changed, (2)
// computes a new target assignment when the group epoch is ahead of it,
// and (3) moves the member's assignment towards its target. The changes are
// made at once, so the next request sees them, and the answer waits for
// their records; a failed append undoes them.

// hbError is a ConsumerGroupHeartbeat error answer.
type hbError struct {
	code int16
	msg  string
}

func (m *machine) consumerGroupHeartbeat(ci ClientInfo, req *kmsg.ConsumerGroupHeartbeatRequest, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	fail := func(e *hbError) {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode = e.code
		if e.msg != "" {
			msg := e.msg
			r.ErrorMessage = &msg
		}
		reply(r)
	}
	if e := m.validateHeartbeat(req); e != nil {
		fail(e)
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		fail(&hbError{code: code})
		return
	}
	var (
		op  *consumerOp
		e   *hbError
		out *kmsg.ConsumerGroupHeartbeatResponse
	)
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		op, out, e = m.consumerLeave(p, req)
	} else {
		op, out, e = m.consumerHeartbeat(p, ci, req)
	}
	if e != nil {
		fail(e)
		return
	}
	m.finishConsumerOp(op, func(err error) {
		if err != nil {
			fail(&hbError{code: appendErrorCode(err)})
			return
		}
		reply(out)
	})
}

// validateHeartbeat is throwIfConsumerGroupHeartbeatRequestIsInvalid, with
// its checks in Kafka's order so that a request with several faults gets
// Kafka's answer. An invalid regex is found later, as in Kafka, once the
// group and the member are known (checkRegex).
func (m *machine) validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) *hbError {
	invalid := func(msg string) *hbError { return &hbError{code: errInvalidRequest, msg: msg} }
	// Kafka's throwIfEmptyString: null passes, blank (after trim) fails.
	blank := func(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }
	switch {
	case (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch) && blank(&req.MemberID):
		// From v1 the client generates its member id; before, only a
		// member that has one (epoch > 0) or leaves must send it.
		return invalid("MemberId can't be empty.")
	case blank(&req.Group):
		return invalid("GroupId can't be empty.")
	case blank(req.InstanceID):
		return invalid("InstanceId can't be empty.")
	case blank(req.RackID):
		return invalid("RackId can't be empty.")
	case len(req.Group) > math.MaxInt16 || len(req.MemberID) > math.MaxInt16 || req.InstanceID != nil && len(*req.InstanceID) > math.MaxInt16 ||
		req.SubscribedTopicRegex != nil && len(*req.SubscribedTopicRegex) > math.MaxInt16:
		// They go into record keys, whose strings have int16 lengths.
		return invalid("GroupId, MemberId, InstanceId and SubscribedTopicRegex must be at most 32767 bytes.")
	}
	switch {
	case req.MemberEpoch == joinEpoch:
		if req.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		// An empty list of names or an empty regex is accepted: the
		// member is in the group, subscribed to nothing.
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == staticLeaveEpoch:
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case req.MemberEpoch < staticLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	if req.RebalanceTimeoutMillis < -1 {
		// Kafka takes any value here; a negative timeout would arm a
		// timer that fires at once, so Gregor refuses it.
		return invalid("RebalanceTimeoutMs is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(m.cfg.ConsumerGroupAssignors, *req.ServerAssignor) {
		return &hbError{code: errUnsupportedAssignor, msg: fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(m.cfg.ConsumerGroupAssignors, ", "))}
	}
	return nil
}

// checkRegex is throwIfRegularExpressionIsInvalid, which Kafka applies when
// a member's regex changes, after the group and member checks.
func checkRegex(expr string) *hbError {
	if _, err := compileTopicRegex(expr); err != nil {
		return &hbError{code: errInvalidRegularExpression, msg: fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v.", expr, err)}
	}
	return nil
}

// compileTopicRegex compiles a subscription regex. Kafka 4 uses RE2/J,
// whose syntax is Go's, and matches whole topic names.
func compileTopicRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// consumerOp is the outcome of a request that changes a consumer group: the
// records to append and how to undo the change if they fail.
type consumerOp struct {
	p    *partitionState
	g    *consumerGroup
	recs []Record
	// snap is the group before the change; nil when the op created it.
	snap *consumerGroup
	// replaced is the empty classic group a new consumer group took the
	// place of; upgraded the live one it was converted from.
	replaced *classicGroup
	upgraded *classicGroup
	// downgraded is the classic group the consumer group became.
	downgraded *classicGroup
	seq        uint64
	// describable filters the topics a regex resolves to (nil: all), from
	// the heartbeat's ClientInfo.TopicDescribable.
	describable func(topic string) bool
}

// begin snapshots the group before its first change in an op.
func (op *consumerOp) begin() {
	if op.seq != 0 {
		return
	}
	if op.p.consumers[op.g.id] == op.g {
		op.snap = op.g.snapshot()
	}
	op.g.seq++
	op.seq = op.g.seq
}

// finishConsumerOp appends an op's records and calls done once they are
// durable. On failure the group goes back to its state before the op,
// unless a later op changed it since, whose own records then fail as
// well: appends of a partition complete in order.
func (m *machine) finishConsumerOp(op *consumerOp, done func(error)) {
	if op == nil || len(op.recs) == 0 {
		done(nil)
		return
	}
	m.fx.Append(op.p.id, op.recs, func(err error) {
		if err != nil {
			m.log.Warn("write consumer group records", "group", op.g.id, "records", len(op.recs), "err", err)
			m.undoConsumerOp(op)
		} else if op.snap != nil && op.g.undo == op.snap.undo {
			// Durable, and no later op opened a snapshot: nothing
			// will undo this one, so its log need not grow on.
			op.g.undo = nil
		}
		done(err)
	})
}

func (m *machine) undoConsumerOp(op *consumerOp) {
	g := op.g
	if op.downgraded != nil {
		if g.seq == op.seq {
			m.undoDowngrade(op)
		}
		return
	}
	if !m.currentConsumer(g) || g.seq != op.seq {
		return
	}
	m.cancelConsumerTimers(g)
	if op.snap != nil {
		g.restore(op.snap)
		m.consumerGroupLoaded(g)
		return
	}
	// The op created the group: drop it, and bring back the classic group
	// it replaced, with the offsets.
	delete(op.p.consumers, g.id)
	g.dead = true
	if c := op.upgraded; c != nil {
		m.restoreUpgraded(op.p, c, g)
		return
	}
	if c := op.replaced; c != nil {
		c.offsetStore = g.offsetStore
		c.state = stateEmpty
		// Its timers went with it: ids handed out with
		// MEMBER_ID_REQUIRED would never expire.
		clear(c.pendingJoin)
		op.p.groups[g.id] = c
	}
}

// currentConsumer reports whether g is still the live group of its id.
func (m *machine) currentConsumer(g *consumerGroup) bool {
	p := m.partitions[g.partition]
	return p != nil && !p.loading && p.consumers[g.id] == g && !g.dead
}

// consumerHeartbeat is a regular heartbeat (member epoch 0 or more).
func (m *machine) consumerHeartbeat(p *partitionState, ci ClientInfo, req *kmsg.ConsumerGroupHeartbeatRequest) (*consumerOp, *kmsg.ConsumerGroupHeartbeatResponse, *hbError) {
	joining := req.MemberEpoch == joinEpoch
	op := &consumerOp{p: p, g: p.consumers[req.Group], describable: ci.TopicDescribable}
	if op.g == nil {
		// Kafka's getOrMaybeCreateConsumerGroup: an empty classic group
		// gives way whatever group.consumer.migration.policy says; a live
		// one is converted by an online upgrade if the policy allows.
		c := p.groups[req.Group]
		switch {
		case p.streams[req.Group] != nil:
			return nil, nil, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Group %s is not a consumer group.", req.Group)}
		case c == nil && !joining:
			return nil, nil, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Consumer group %s not found.", req.Group)}
		case c == nil:
			op.g = newConsumerGroup(req.Group, p.id)
		case joining && c.is(stateEmpty):
			op.replaced = c
			op.g = newConsumerGroup(req.Group, p.id)
		case joining && m.canUpgrade(c):
			g, err := m.fromClassicGroup(c)
			if err != nil {
				m.log.Warn("cannot upgrade the classic group to a consumer group", "group", c.id, "err", err)
				return nil, nil, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", req.Group)}
			}
			op.upgraded = c
			op.g = g
		default:
			return nil, nil, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Group %s is not a consumer group.", req.Group)}
		}
	}
	g := op.g
	memberID := req.MemberID
	if memberID == "" {
		memberID = m.newID() // v0: the coordinator names the member
	}
	if int32(len(g.members)) >= m.cfg.ConsumerGroupMaxSize && g.members[memberID] == nil {
		return nil, nil, &hbError{code: errGroupMaxSizeReached, msg: fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", m.cfg.ConsumerGroupMaxSize)}
	}
	owned := ownedFrom(req.Topics, req.Topics != nil)

	// Find the member, or make it.
	var (
		old      *consumerMember // the member as the group has it; nil when new
		base     *consumerMember // what the request updates
		replaces *consumerMember // the static member this one replaces
	)
	if req.InstanceID == nil {
		old = g.members[memberID]
		if old == nil && !joining {
			return nil, nil, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.id)}
		}
		if old != nil {
			if e := checkMemberEpoch(old, req.MemberEpoch, owned); e != nil {
				return nil, nil, e
			}
		}
		base = old
	} else {
		existing := g.staticMember(req.InstanceID)
		switch {
		case joining && existing == nil:
			old = g.members[memberID]
			base = old
		case joining:
			if existing.epoch != staticLeaveEpoch {
				return nil, nil, &hbError{code: errUnreleasedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *req.InstanceID, existing.id)}
			}
			// The member comes back under a new id: it takes over the
			// old member's subscription and assignment.
			replaces = existing
			base = existing.clone()
			base.id = memberID
			base.epoch, base.previousEpoch = 0, 0
		case existing == nil:
			return nil, nil, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)}
		case existing.id != memberID:
			return nil, nil, &hbError{code: errFencedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, *req.InstanceID, existing.id)}
		default:
			if e := checkMemberEpoch(existing, req.MemberEpoch, owned); e != nil {
				return nil, nil, e
			}
			old = existing
			base = existing
		}
	}
	if base == nil {
		base = &consumerMember{id: memberID, rebalanceTimeoutMs: -1, assigned: tpSet{}, revoking: tpSet{}}
	}
	if base.state == memberUnknownState && (owned == nil || owned.size() > 0) {
		return nil, nil, &hbError{code: errFencedMemberEpoch, msg: "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" && *req.SubscribedTopicRegex != base.regex {
		if e := checkRegex(*req.SubscribedTopicRegex); e != nil {
			return nil, nil, e
		}
	}

	// From here on the request is valid: change the group, snapshotting it
	// before the first change that matters, which most heartbeats never
	// make.
	if p.consumers[g.id] != g {
		op.begin()
		if c := op.replaced; c != nil {
			op.recs = append(op.recs, groupTombstone(c.id))
			m.deleteGroup(p, c)
			g.offsetStore = c.offsetStore
		}
		if op.upgraded != nil {
			m.installUpgrade(op)
		}
		p.consumers[g.id] = g
	}
	if replaces != nil {
		op.begin()
		// Kafka's replaceMember: the old member's records go, the new
		// member's come with the old target.
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
	if req.RackID != nil {
		s := *req.RackID
		updated.rackID = &s
	}
	if req.RebalanceTimeoutMillis != -1 {
		updated.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		updated.serverAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		updated.topicNames = normalizeTopics(req.SubscribedTopicNames)
	}
	if req.SubscribedTopicRegex != nil {
		updated.regex = *req.SubscribedTopicRegex
	}
	updated.clientID, updated.clientHost = ci.ClientID, ci.ClientHost
	updated.classic = nil // a classic member speaking this protocol now uses it

	next, code := m.updateConsumerMember(op, old, updated, owned)
	if code != 0 {
		// Only a member in an unknown state fails here, and that was
		// checked above.
		return op, nil, &hbError{code: code}
	}
	m.scheduleConsumerSession(g, next.id)
	switch {
	case replaces != nil:
		m.log.Info("static member rejoined the consumer group", "group", g.id, "member", next.id, "replaces", replaces.id,
			"instance", deref(next.instanceID), "group_epoch", g.epoch, "client_id", ci.ClientID, "client_host", ci.ClientHost)
	case old == nil:
		m.log.Info("member joined the consumer group", "group", g.id, "member", next.id, "instance", deref(next.instanceID),
			"group_epoch", g.epoch, "client_id", ci.ClientID, "client_host", ci.ClientHost)
	}

	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := next.id
	r.MemberID = &id
	r.MemberEpoch = next.epoch
	r.HeartbeatIntervalMillis = m.consumerSettings(g.id).heartbeatIntervalMs
	full := joining || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || old == nil || !next.assigned.equal(old.assigned) {
		r.Assignment = heartbeatAssignment(next.assigned)
	}
	return op, r, nil
}

// updateConsumerMember is the heart of a heartbeat or a classic member's
// join, as the three steps of Kafka's consumerGroupHeartbeat: (1) store the
// member, bumping the group epoch if its subscription or the subscribed
// topics changed, (2) compute a new target assignment if the epoch moved
// past it, (3) move the member towards its target. owned is what the
// member reports it owns; nil when it did not say. It returns the member
// as it is now, or an error code for a member in an unknown state.
func (m *machine) updateConsumerMember(op *consumerOp, old, updated *consumerMember, owned tpSet) (*consumerMember, int16) {
	g := op.g
	// 1. The member and the group epoch.
	bump := g.epoch == 0
	if old == nil || !updated.sameSubscription(old) {
		op.begin()
		op.recs = append(op.recs, cgMemberRecord(g.id, updated))
		if old == nil || !slices.Equal(updated.topicNames, old.topicNames) || updated.regex != old.regex {
			bump = true
		}
	}
	bump = m.updateRegexes(op, old, updated) || bump
	if (bump || g.refresh) && !joinKeepsSubscription(g, old, updated) {
		meta := m.subscriptionMetadata(g.subscribedTopics(old, updated))
		if !sameSubscriptionMetadata(meta, g.subscription) {
			op.begin()
			bump = true
			g.subscription = meta
			op.recs = append(op.recs, cgSubscriptionMetadataRecord(g.id, meta))
		}
		g.refresh = false
	}
	if bump {
		op.begin()
		g.epoch++
		op.recs = append(op.recs, cgEpochRecord(g.id, g.epoch))
		m.log.Debug("bumped consumer group epoch", "group", g.id, "epoch", g.epoch)
	}
	g.updateMember(updated)

	// 2. The target assignment, at most once per
	// consumer.assignment.interval.ms, as Kafka 4.4's
	// maybeUpdateTargetAssignment: the heartbeats of a burst of joins bump
	// the epoch, and the first heartbeat after the interval computes one
	// target for all of them. Until then members reconcile towards the
	// last target, whose epoch they take (a joiner gets nothing yet), so
	// revocation still comes before assignment.
	if g.epoch > g.assignmentEpoch && canComputeNextTargetAssignment(g.assignmentTimestampMs, m.consumerSettings(g.id).assignmentIntervalMs, m.nowMs()) {
		op.begin()
		m.computeTargetAssignment(op)
	}

	// 3. Reconcile the member with its target.
	next := updated
	if !updated.isReconciledTo(g.assignmentEpoch) {
		var code int16
		next, code = reconcile(g, updated, g.assignmentEpoch, g.target[updated.id], owned)
		if code != 0 {
			return nil, code
		}
	}
	if !next.sameAssignment(updated) {
		op.begin()
		op.recs = append(op.recs, cgCurrentAssignmentRecord(g.id, next))
		g.updateMember(next)
		if next.state == memberUnrevokedPartitions {
			m.scheduleConsumerRebalance(g, next)
		} else {
			m.fx.Cancel(consumerRebalanceKey(g, next.id))
		}
	}
	return next, 0
}

// joinKeepsSubscription reports whether the subscription metadata stays as
// it is when updated joins: it subscribes by name to topics the group
// already has metadata for, which it was computed with (no refresh
// pending). It spares a join the count over every member's subscription,
// O(members) each, which a burst of 1,000 joins made quadratic.
func joinKeepsSubscription(g *consumerGroup, old, updated *consumerMember) bool {
	if old != nil || g.refresh || updated.regex != "" {
		return false
	}
	for _, t := range updated.topicNames {
		if _, ok := g.subscription[t]; !ok {
			return false
		}
	}
	return true
}

// leaveKeepsSubscription reports whether the subscription metadata stays as
// it is when mem leaves: it subscribes by name, and each of its topics the
// group has metadata for is subscribed by another member too. Finding
// that member takes a few steps when members share their subscription,
// where counting every member's cost O(members) per leave.
func leaveKeepsSubscription(g *consumerGroup, mem *consumerMember) bool {
	if g.refresh || mem.regex != "" {
		return false
	}
	for _, t := range mem.topicNames {
		if _, ok := g.subscription[t]; ok && !g.subscribedByOther(t, mem.id) {
			return false
		}
	}
	return true
}

// checkMemberEpoch is throwIfConsumerGroupMemberEpochIsInvalid: a member
// may come with its current epoch, or with the previous one if it owns no
// more than its assignment (the answer bumping it may have been lost).
func checkMemberEpoch(mem *consumerMember, epoch int32, owned tpSet) *hbError {
	switch {
	case epoch > mem.epoch:
		return &hbError{code: errFencedMemberEpoch, msg: fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, mem.epoch)}
	case epoch < mem.epoch && (epoch != mem.previousEpoch || !isSubset(owned, mem.assigned)):
		return &hbError{code: errFencedMemberEpoch, msg: fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, mem.epoch)}
	}
	return nil
}

func isSubset(owned, assigned tpSet) bool {
	if owned == nil {
		return false
	}
	for id, ps := range owned {
		for _, p := range ps {
			if !assigned.has(id, p) {
				return false
			}
		}
	}
	return true
}

// ownedFrom reads the partitions a heartbeat reports; nil when it reports
// none (a keep-alive heartbeat).
func ownedFrom(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, present bool) tpSet {
	if !present {
		return nil
	}
	out := make(tpSet, len(ts))
	for _, t := range ts {
		out.add(t.TopicID, t.Partitions...)
	}
	return out
}

func heartbeatAssignment(s tpSet) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, id := range s.topics() {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID = id
		t.Partitions = slices.Clone(s[id])
		a.Topics = append(a.Topics, t)
	}
	return a
}

// memberTombstones removes a member's records, in Kafka's order.
func memberTombstones(group, member string) []Record {
	return []Record{
		tombstone(cgCurrentAssignmentKeyVersion, group, member),
		tombstone(cgTargetMemberKeyVersion, group, member),
		tombstone(cgMemberMetadataKeyVersion, group, member),
	}
}

// subscriptionMetadata is the metadata of the subscribed topics that exist.
func (m *machine) subscriptionMetadata(topics map[string]int) map[string]topicMeta {
	out := make(map[string]topicMeta, len(topics))
	for name := range topics {
		if t, ok := m.topicsByName()[name]; ok {
			out[name] = topicMeta{id: t.ID, name: name, partitions: t.Partitions}
		}
	}
	return out
}

func sameSubscriptionMetadata(a, b map[string]topicMeta) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// updateRegexes keeps the group's resolved regexes in step with its
// members, as Kafka's maybeUpdateRegularExpressions, and reports whether
// the group epoch must be bumped. Kafka resolves regexes in the background
// and in batches; Gregor's topic view is in memory, so it resolves them at
// once: a new regex when a member brings it, all of them after the topics
// changed.
func (m *machine) updateRegexes(op *consumerOp, old, updated *consumerMember) bool {
	g := op.g
	bump := false
	oldRegex := ""
	if old != nil {
		oldRegex = old.regex
	}
	if oldRegex != updated.regex {
		if oldRegex != "" && g.regexMembers(oldRegex) == 1 && g.members[old.id] != nil {
			op.begin()
			delete(g.regexes, oldRegex)
			op.recs = append(op.recs, tombstone(cgRegexKeyVersion, g.id, oldRegex))
		}
		if updated.regex != "" {
			if _, ok := g.regexes[updated.regex]; !ok {
				m.resolveRegex(op, updated.regex)
			}
			bump = true
		}
	}
	if g.refresh {
		for _, re := range sortedKeys(g.regexes) {
			if m.resolveRegex(op, re) {
				bump = true
			}
		}
	}
	return bump
}

// resolveRegex matches a regex against the topics and records the result
// if it changed, reporting whether it did. As Kafka's TopicRegexResolver,
// every topic in the metadata is a candidate, internal ones included: the
// classic consumer's exclude.internal.topics is a client-side filter, and
// a KIP-848 client that wants it sends topic names instead of a regex.
// With an authorizer, only the topics the heartbeat's principal may
// DESCRIBE are kept (Kafka 4.2's filterTopicDescribeAuthorizedTopics).
func (m *machine) resolveRegex(op *consumerOp, expr string) bool {
	g := op.g
	re, err := compileTopicRegex(expr)
	if err != nil {
		// Only valid regexes are admitted; one in the log that is not
		// matches nothing.
		re = nil
	}
	topics := []string{}
	if re != nil {
		for name := range m.topicsByName() {
			if re.MatchString(name) && (op.describable == nil || op.describable(name)) {
				topics = append(topics, name)
			}
		}
	}
	slices.Sort(topics)
	prev, known := g.regexes[expr]
	if known && slices.Equal(prev.topics, topics) {
		return false
	}
	res := resolvedRegex{topics: topics, version: m.topicsVersion, timestamp: m.nowMs()}
	op.begin()
	g.regexes[expr] = res
	op.recs = append(op.recs, cgRegexRecord(g.id, expr, res))
	return true
}

// canComputeNextTargetAssignment is Kafka 4.4's, for consumer and streams
// groups: a group that never had a target assignment (or whose time is
// unknown), or has no interval, gets one at once; else once the interval
// since the last one has passed.
func canComputeNextTargetAssignment(lastMs int64, intervalMs int32, nowMs int64) bool {
	return lastMs == 0 || intervalMs == 0 || nowMs >= lastMs+int64(intervalMs)
}

// consumerSettings are a consumer group's pacing and session settings:
// its group configs where set, else the broker's group.consumer.* values.
type consumerSettings struct {
	assignmentIntervalMs, sessionTimeoutMs, heartbeatIntervalMs int32
}

func (m *machine) consumerSettings(group string) consumerSettings {
	s := consumerSettings{m.cfg.ConsumerGroupAssignmentIntervalMs, m.cfg.ConsumerGroupSessionTimeoutMs, m.cfg.ConsumerGroupHeartbeatIntervalMs}
	if m.cfg.ConsumerGroupConfig == nil {
		return s
	}
	o := m.cfg.ConsumerGroupConfig(group)
	if o.AssignmentIntervalMs >= 0 {
		s.assignmentIntervalMs = o.AssignmentIntervalMs
	}
	if o.SessionTimeoutMs > 0 {
		s.sessionTimeoutMs = o.SessionTimeoutMs
	}
	if o.HeartbeatIntervalMs > 0 {
		s.heartbeatIntervalMs = o.HeartbeatIntervalMs
	}
	return s
}

// computeTargetAssignment runs the group's assignor over its members and
// subscribed topics and records the members whose target changed, then the
// new assignment epoch, as Kafka's TargetAssignmentBuilder.
func (m *machine) computeTargetAssignment(op *consumerOp) {
	g := op.g
	name := g.preferredAssignor(nil, nil)
	if name == "" || !slices.Contains(m.cfg.ConsumerGroupAssignors, name) {
		name = m.cfg.ConsumerGroupAssignors[0]
	}
	spec := assignSpec{topics: make(map[topicID]int32, len(g.subscription)), names: make(map[topicID]string, len(g.subscription))}
	byName := make(map[string]topicID, len(g.subscription))
	for n, t := range g.subscription {
		spec.topics[t.id] = t.partitions
		spec.names[t.id] = n
		byName[n] = t.id
	}
	for _, id := range g.sortedMemberIDs() {
		mem := g.members[id]
		am := assignMember{id: id, instanceID: mem.instanceID, current: g.target[id]}
		seen := make(map[topicID]bool)
		add := func(names []string) {
			for _, n := range names {
				if t, ok := byName[n]; ok && !seen[t] {
					seen[t] = true
					am.topics = append(am.topics, t)
				}
			}
		}
		add(mem.topicNames)
		if mem.regex != "" {
			add(g.regexes[mem.regex].topics)
		}
		slices.SortFunc(am.topics, func(a, b topicID) int { return slices.Compare(a[:], b[:]) })
		spec.members = append(spec.members, am)
	}
	result := assignorByName(name).assign(spec)
	for _, am := range spec.members {
		next := result[am.id]
		if next == nil {
			next = tpSet{}
		}
		if cur, ok := g.target[am.id]; !ok || !cur.equal(next) {
			g.setTarget(am.id, next)
			op.recs = append(op.recs, cgTargetMemberRecord(g.id, am.id, next))
		}
	}
	g.assignmentEpoch = g.epoch
	g.assignmentTimestampMs = m.nowMs()
	op.recs = append(op.recs, cgTargetEpochRecord(g.id, g.epoch, g.assignmentTimestampMs))
	m.log.Info("computed a new target assignment for the consumer group", "group", g.id, "epoch", g.epoch, "assignor", name, "members", len(spec.members))
}

// consumerLeave handles a heartbeat with epoch -1 (leave) or -2 (a static
// member leaving for a while, keeping its assignment for its session).
func (m *machine) consumerLeave(p *partitionState, req *kmsg.ConsumerGroupHeartbeatRequest) (*consumerOp, *kmsg.ConsumerGroupHeartbeatResponse, *hbError) {
	g := p.consumers[req.Group]
	if g == nil {
		return nil, nil, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Group %s not found.", req.Group)}
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := req.MemberID
	r.MemberID = &id
	r.MemberEpoch = req.MemberEpoch
	var mem *consumerMember
	if req.InstanceID == nil {
		mem = g.members[req.MemberID]
		if mem == nil {
			return nil, nil, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)}
		}
	} else {
		mem = g.staticMember(req.InstanceID)
		switch {
		case mem == nil:
			return nil, nil, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)}
		case mem.id != req.MemberID:
			return nil, nil, &hbError{code: errFencedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, mem.id)}
		}
	}
	op := &consumerOp{p: p, g: g}
	if req.InstanceID != nil && req.MemberEpoch == staticLeaveEpoch {
		// The member keeps its place, and its session timer, so that it
		// can come back under a new member id with its assignment.
		op.begin()
		left := mem.clone()
		left.epoch = staticLeaveEpoch
		left.revoking = tpSet{}
		g.updateMember(left)
		m.fx.Cancel(consumerRebalanceKey(g, left.id))
		op.recs = append(op.recs, cgCurrentAssignmentRecord(g.id, left))
		m.log.Info("static member left the consumer group for now", "group", g.id, "member", mem.id, "instance", *req.InstanceID)
		return op, r, nil
	}
	m.log.Info("member left the consumer group", "group", g.id, "member", mem.id)
	m.fenceConsumerMember(op, mem)
	return op, r, nil
}

// fenceConsumerMember removes a member and bumps the group epoch so that
// the others take over its partitions, as consumerGroupFenceMember; when
// it was the last member not speaking the classic protocol, the group
// becomes a classic group instead (online downgrade).
func (m *machine) fenceConsumerMember(op *consumerOp, mem *consumerMember) {
	if m.canDowngrade(op.g, mem.id) {
		m.downgrade(op, mem.id)
		return
	}
	m.removeConsumerMember(op, mem)
}

// removeConsumerMember removes a member and bumps the group epoch.
func (m *machine) removeConsumerMember(op *consumerOp, mem *consumerMember) {
	g := op.g
	op.begin()
	op.recs = append(op.recs, memberTombstones(g.id, mem.id)...)
	if mem.regex != "" && g.regexMembers(mem.regex) == 1 {
		delete(g.regexes, mem.regex)
		op.recs = append(op.recs, tombstone(cgRegexKeyVersion, g.id, mem.regex))
	}
	if !leaveKeepsSubscription(g, mem) {
		meta := m.subscriptionMetadata(g.subscribedTopics(mem, nil))
		if !sameSubscriptionMetadata(meta, g.subscription) {
			g.subscription = meta
			op.recs = append(op.recs, cgSubscriptionMetadataRecord(g.id, meta))
		}
	}
	g.epoch++
	op.recs = append(op.recs, cgEpochRecord(g.id, g.epoch))
	g.removeMember(mem.id)
	g.deleteTarget(mem.id)
	m.cancelConsumerMemberTimers(g, mem.id)
}

// expireConsumerMember fences a member whose session or revocation
// deadline passed. epoch is the epoch a rebalance timeout was set for; -3
// for a session timeout, which applies whatever the epoch.
func (m *machine) expireConsumerMember(g *consumerGroup, id string, epoch int32, why string) {
	if !m.currentConsumer(g) {
		return
	}
	mem := g.members[id]
	if mem == nil || epoch != anyEpoch && mem.epoch != epoch {
		return
	}
	m.log.Info("member fenced from the consumer group", "group", g.id, "member", id, "reason", why)
	op := &consumerOp{p: m.partitions[g.partition], g: g}
	m.fenceConsumerMember(op, mem)
	m.finishConsumerOp(op, func(error) {})
}

const anyEpoch = -3

func consumerSessionKey(g *consumerGroup, id string) timerKey {
	return timerKey{kind: timerConsumerSession, group: g.id, member: id}
}

func consumerRebalanceKey(g *consumerGroup, id string) timerKey {
	return timerKey{kind: timerConsumerRebalance, group: g.id, member: id}
}

// scheduleConsumerSession (re)starts a member's session: a classic member
// keeps the session timeout it joined with, as Kafka's
// classicProtocolSessionTimeout.
func (m *machine) scheduleConsumerSession(g *consumerGroup, id string) {
	timeout := m.consumerSettings(g.id).sessionTimeoutMs
	if mem := g.members[id]; mem != nil && mem.classic != nil {
		timeout = mem.classic.sessionTimeoutMs
	}
	m.fx.Schedule(consumerSessionKey(g, id), ms(int64(timeout)), func() {
		m.expireConsumerMember(g, id, anyEpoch, "the member session expired")
	})
}

// scheduleConsumerRebalance bounds how long a member may take to revoke
// partitions: past its rebalance timeout in the same epoch, it is fenced.
func (m *machine) scheduleConsumerRebalance(g *consumerGroup, mem *consumerMember) {
	id, epoch, timeout := mem.id, mem.epoch, mem.rebalanceTimeoutMs
	if timeout < 0 {
		timeout = m.consumerSettings(g.id).sessionTimeoutMs
	}
	m.fx.Schedule(consumerRebalanceKey(g, id), ms(int64(timeout)), func() {
		m.expireConsumerMember(g, id, epoch, "it did not revoke its partitions within its rebalance timeout")
	})
}

func (m *machine) cancelConsumerMemberTimers(g *consumerGroup, id string) {
	m.fx.Cancel(consumerSessionKey(g, id))
	m.fx.Cancel(consumerRebalanceKey(g, id))
	m.cancelConsumerJoin(g, id)
	m.fx.Cancel(consumerSyncKey(g, id))
}

func (m *machine) cancelConsumerTimers(g *consumerGroup) {
	for id := range g.members {
		m.cancelConsumerMemberTimers(g, id)
	}
}

// consumerTombstones deletes a whole consumer group, as ConsumerGroup's
// createGroupTombstoneRecords.
func consumerTombstones(g *consumerGroup) []Record {
	ids := g.sortedMemberIDs()
	var recs []Record
	for _, id := range ids {
		recs = append(recs, tombstone(cgCurrentAssignmentKeyVersion, g.id, id))
	}
	for _, id := range ids {
		recs = append(recs, tombstone(cgTargetMemberKeyVersion, g.id, id))
	}
	recs = append(recs, tombstone(cgTargetMetadataKeyVersion, g.id))
	for _, id := range ids {
		recs = append(recs, tombstone(cgMemberMetadataKeyVersion, g.id, id))
	}
	for _, re := range sortedKeys(g.regexes) {
		recs = append(recs, tombstone(cgRegexKeyVersion, g.id, re))
	}
	recs = append(recs, tombstone(cgPartitionMetadataKeyVersion, g.id), tombstone(cgMetadataKeyVersion, g.id))
	return recs
}

// deleteConsumerGroup removes a group from its partition.
func (m *machine) deleteConsumerGroup(p *partitionState, g *consumerGroup) {
	m.cancelConsumerTimers(g)
	g.dead = true
	delete(p.consumers, g.id)
}
