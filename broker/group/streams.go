package group

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the streams rebalance protocol (KIP-1071):
// StreamsGroupHeartbeat and the member lifecycle it drives, after Kafka's
// GroupMetadataManager.streamsGroupHeartbeat. A heartbeat (1) creates or
// updates the member, (2) initializes the group's topology from the first
// member's and resolves it against the topics (internal topics to create,
// partition counts, status), bumping the group epoch when the member, the
// topics or the validated topology changed, (3) computes a new target
// assignment of tasks when the group epoch is ahead of it, and (4) moves
// the member towards its target, revoking tasks before others get them.
// Changes are made at once and undone if their records fail to append.

// StreamsHeartbeatResult is a StreamsGroupHeartbeat answer and the
// internal topics the broker must create for the group (Kafka's
// StreamsGroupHeartbeatResult).
type StreamsHeartbeatResult struct {
	Response     *kmsg.StreamsGroupHeartbeatResponse
	CreateTopics []InternalTopic
}

// streamsOp is the outcome of a request that changes a streams group.
type streamsOp struct {
	p    *partitionState
	g    *streamsGroup
	recs []Record
	snap *streamsGroup
	// replaced is the empty classic group the new streams group took the
	// place of.
	replaced *classicGroup
	seq      uint64
}

func (op *streamsOp) begin() {
	if op.seq != 0 {
		return
	}
	if op.p.streams[op.g.id] == op.g {
		op.snap = op.g.snapshot()
	}
	op.g.seq++
	op.seq = op.g.seq
}

func (m *machine) finishStreamsOp(op *streamsOp, done func(error)) {
	if op == nil || len(op.recs) == 0 {
		done(nil)
		return
	}
	m.fx.Append(op.p.id, op.recs, func(err error) {
		if err != nil {
			m.log.Warn("write streams group records", "group", op.g.id, "records", len(op.recs), "err", err)
			m.undoStreamsOp(op)
		}
		done(err)
	})
}

// undoStreamsOp puts a group back as it was before an op whose records
// failed, unless a later op changed it since (whose records then fail as
// well: appends of a partition complete in order).
func (m *machine) undoStreamsOp(op *streamsOp) {
	g := op.g
	if !m.currentStreams(g) || g.seq != op.seq {
		return
	}
	if op.snap == nil {
		// The op created the group: it goes, and the classic group it
		// replaced comes back.
		m.deleteStreamsGroup(op.p, g)
		if c := op.replaced; c != nil {
			c.offsetStore = g.offsetStore
			op.p.groups[c.id] = c
		}
		return
	}
	g.restore(op.snap)
	for id := range g.members {
		m.scheduleStreamsSession(g, id)
	}
}

func (m *machine) currentStreams(g *streamsGroup) bool {
	p := m.partitions[g.partition]
	return p != nil && !p.loading && p.streams[g.id] == g && !g.dead
}

func (m *machine) streamsGroupHeartbeat(ci ClientInfo, req *kmsg.StreamsGroupHeartbeatRequest, reply func(StreamsHeartbeatResult)) {
	fail := func(e *hbError) {
		r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		r.ErrorCode = e.code
		if e.msg != "" {
			msg := e.msg
			r.ErrorMessage = &msg
		}
		reply(StreamsHeartbeatResult{Response: r})
	}
	if e := validateStreamsHeartbeat(req); e != nil {
		fail(e)
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		fail(&hbError{code: code})
		return
	}
	var (
		op  *streamsOp
		out StreamsHeartbeatResult
		e   *hbError
	)
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		op, out, e = m.streamsLeave(p, req)
	} else {
		op, out, e = m.streamsHeartbeat(p, ci, req)
	}
	if e != nil {
		fail(e)
		return
	}
	m.finishStreamsOp(op, func(err error) {
		if err != nil {
			fail(&hbError{code: appendErrorCode(err)})
			return
		}
		reply(out)
	})
}

// validateStreamsHeartbeat is Kafka's throwIfStreamsGroupHeartbeatRequest
// IsInvalid, with its checks in Kafka's order, after the features Gregor
// does not serve (static membership, source topic regexes).
func validateStreamsHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest) *hbError {
	invalid := func(msg string) *hbError { return &hbError{code: errInvalidRequest, msg: msg} }
	blank := func(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }
	if req.Topology != nil {
		for _, s := range req.Topology.Subtopologies {
			if len(s.SourceTopicRegex) > 0 {
				return invalid("Regular expressions for source topics are not supported yet.")
			}
		}
	}
	switch {
	case blank(&req.MemberID):
		return invalid("MemberId can't be empty.")
	case blank(&req.Group):
		return invalid("GroupId can't be empty.")
	case blank(req.InstanceID):
		return invalid("InstanceId can't be empty.")
	case blank(req.RackID):
		return invalid("RackId can't be empty.")
	case len(req.Group) > math.MaxInt16 || len(req.MemberID) > math.MaxInt16:
		return invalid("GroupId and MemberId must be at most 32767 bytes.")
	}
	switch {
	case req.MemberEpoch == joinEpoch:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case len(req.ActiveTasks) > 0:
			return invalid("ActiveTasks must be empty when (re-)joining.")
		case len(req.StandbyTasks) > 0:
			return invalid("StandbyTasks must be empty when (re-)joining.")
		case len(req.WarmupTasks) > 0:
			return invalid("WarmupTasks must be empty when (re-)joining.")
		case req.Topology == nil:
			return invalid("Topology must be non-null when (re-)joining.")
		}
		for _, s := range req.Topology.Subtopologies {
			for _, c := range s.StateChangelogTopics {
				if c.NumPartitions != 0 {
					return &hbError{code: errStreamsInvalidTopology, msg: fmt.Sprintf("Changelog topic %s must have an undefined partition count, but it is set to %d.", c.Topic, c.NumPartitions)}
				}
			}
		}
	case req.MemberEpoch == staticLeaveEpoch && req.InstanceID == nil:
		return invalid("InstanceId can't be null.")
	case req.MemberEpoch < staticLeaveEpoch:
		return invalid(fmt.Sprintf("MemberEpoch is %d, but must be greater than or equal to -2.", req.MemberEpoch))
	}
	if req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil {
		if req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil {
			return invalid("If one task-type is non-null, all must be non-null.")
		}
	}
	if req.MemberEpoch != joinEpoch && req.Topology != nil {
		return invalid("Topology can only be provided when (re-)joining.")
	}
	if req.RebalanceTimeoutMillis < -1 {
		return invalid("RebalanceTimeoutMs is invalid.")
	}
	return nil
}

// topologyFromRequest is StreamsTopology.fromHeartbeatRequest: the
// subtopologies sorted by id.
func topologyFromRequest(t *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsTopology {
	infos := func(ts []kmsg.TopicInfo) []streamsTopicInfo {
		out := make([]streamsTopicInfo, 0, len(ts))
		for _, t := range ts {
			it := streamsTopicInfo{name: t.Topic, partitions: t.NumPartitions, rf: t.ReplicationFactor}
			for _, c := range t.Configs {
				it.configs = append(it.configs, [2]string{c.Key, c.Value})
			}
			out = append(out, it)
		}
		return out
	}
	out := &streamsTopology{epoch: t.Epoch}
	for _, s := range t.Subtopologies {
		st := streamsSubtopology{
			id:                      s.SubtopologyID,
			sourceTopics:            orEmpty(s.SourceTopics),
			sourceTopicRegex:        orEmpty(s.SourceTopicRegex),
			changelogTopics:         infos(s.StateChangelogTopics),
			repartitionSinkTopics:   orEmpty(s.RepartitionSinkTopics),
			repartitionSourceTopics: infos(s.RepartitionSourceTopics),
		}
		for _, cg := range s.CopartitionGroups {
			st.copartitionGroups = append(st.copartitionGroups, copartitionGroup{orEmpty(cg.SourceTopics), orEmpty(cg.SourceTopicRegex), orEmpty(cg.RepartitionSourceTopics)})
		}
		out.subtopologies = append(out.subtopologies, st)
	}
	slices.SortFunc(out.subtopologies, func(a, b streamsSubtopology) int { return strings.Compare(a.id, b.id) })
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// equalTopology compares two topologies field by field, as Kafka compares
// the records they make.
func equalTopology(a, b *streamsTopology) bool {
	return bytes.Equal(sgTopologyRecord("", a).Value, sgTopologyRecord("", b).Value)
}

// ownedTasksOf is what a heartbeat reports the member owns; nil when it
// did not say (unchanged since its last heartbeat).
func ownedTasksOf(req *kmsg.StreamsGroupHeartbeatRequest) *tasksTuple {
	if req.ActiveTasks == nil {
		return nil
	}
	conv := func(ts []kmsg.TaskIDs) taskSet {
		out := taskSet{}
		for _, t := range ts {
			out.add(t.SubtopologyID, t.Partitions...)
		}
		return out
	}
	t := tasksTuple{active: conv(req.ActiveTasks), standby: conv(req.StandbyTasks), warmup: conv(req.WarmupTasks)}
	return &t
}

// streamsSettings are a group's effective configs: the broker's, with the
// group's overrides.
type streamsSettings struct {
	sessionTimeoutMs, heartbeatIntervalMs, standbys, initialDelayMs int32
	// assignmentIntervalMs is group.streams.assignment.interval.ms: the
	// least time between two target assignments.
	assignmentIntervalMs int32
	// rackTags are group.streams.rack.aware.assignment.tags: client tags
	// every member must have (MISSING_CLIENT_TAGS otherwise).
	rackTags []string
	// taskOffsetIntervalMs and recoveryLag are passed on to members.
	taskOffsetIntervalMs int32
	recoveryLag          int64
}

func (m *machine) streamsSettings(group string) streamsSettings {
	s := streamsSettings{m.cfg.StreamsGroupSessionTimeoutMs, m.cfg.StreamsGroupHeartbeatIntervalMs, m.cfg.StreamsGroupNumStandbyReplicas, m.cfg.StreamsGroupInitialRebalanceDelayMs, m.cfg.StreamsGroupAssignmentIntervalMs, m.cfg.StreamsGroupRackAwareAssignmentTags,
		m.cfg.StreamsGroupTaskOffsetIntervalMs, m.cfg.StreamsGroupAcceptableRecoveryLag}
	if m.cfg.StreamsGroupConfig == nil {
		return s
	}
	o := m.cfg.StreamsGroupConfig(group)
	if o.SessionTimeoutMs > 0 {
		s.sessionTimeoutMs = o.SessionTimeoutMs
	}
	if o.HeartbeatIntervalMs > 0 {
		s.heartbeatIntervalMs = o.HeartbeatIntervalMs
	}
	if o.NumStandbyReplicas >= 0 {
		s.standbys = o.NumStandbyReplicas
	}
	if o.InitialRebalanceDelayMs >= 0 {
		s.initialDelayMs = o.InitialRebalanceDelayMs
	}
	if o.AssignmentIntervalMs >= 0 {
		s.assignmentIntervalMs = o.AssignmentIntervalMs
	}
	if o.RackAwareAssignmentTags != nil {
		s.rackTags = o.RackAwareAssignmentTags
	}
	if o.TaskOffsetIntervalMs > 0 {
		s.taskOffsetIntervalMs = o.TaskOffsetIntervalMs
	}
	if o.AcceptableRecoveryLag >= 0 {
		s.recoveryLag = o.AcceptableRecoveryLag
	}
	return s
}

// streamsHeartbeat is a heartbeat of a member joining (epoch 0) or in the
// group.
func (m *machine) streamsHeartbeat(p *partitionState, ci ClientInfo, req *kmsg.StreamsGroupHeartbeatRequest) (*streamsOp, StreamsHeartbeatResult, *hbError) {
	var none StreamsHeartbeatResult
	joining := req.MemberEpoch == joinEpoch
	op := &streamsOp{p: p, g: p.streams[req.Group]}
	if op.g == nil {
		// Kafka's getOrCreateStreamsGroup: an empty classic group gives
		// way (its offsets stay); any other group is not a streams group.
		c := p.groups[req.Group]
		switch {
		case !joining:
			return nil, none, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Streams group %s not found.", req.Group)}
		case p.consumers[req.Group] != nil || c != nil && !c.is(stateEmpty):
			return nil, none, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Group %s is not a streams group.", req.Group)}
		}
		op.replaced = c
		op.g = newStreamsGroup(req.Group, p.id)
	}
	g := op.g
	settings := m.streamsSettings(g.id)
	old := g.members[req.MemberID]
	// A static member (group.instance.id) may come back under a new member
	// id after leaving with epoch -2: it takes over its predecessor's tasks.
	var replaces *streamsMember
	if req.InstanceID != nil {
		existing := g.staticMember(*req.InstanceID)
		switch {
		case existing == nil && !joining:
			return nil, none, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)}
		case existing == nil || existing.id == req.MemberID:
		case !joining:
			return nil, none, &hbError{code: errFencedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, existing.id)}
		case existing.epoch != staticLeaveEpoch:
			return nil, none, &hbError{code: errUnreleasedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", req.MemberID, *req.InstanceID, existing.id)}
		default:
			replaces = existing
		}
	}
	if joining && old == nil && replaces == nil && int32(len(g.members)) >= m.cfg.StreamsGroupMaxSize {
		return nil, none, &hbError{code: errGroupMaxSizeReached, msg: fmt.Sprintf("The streams group has reached its maximum capacity of %d members.", m.cfg.StreamsGroupMaxSize)}
	}
	if old == nil && !joining {
		return nil, none, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)}
	}
	owned := ownedTasksOf(req)
	base := old
	switch {
	case replaces != nil:
		base = replaces.clone()
		base.id = req.MemberID
		base.epoch, base.previousEpoch = 0, 0
		base.revoking = emptyTasks()
		base.setActiveEpochs(replaces.activeEpochs, 0)
	case base != nil:
		if e := checkStreamsMemberEpoch(base, req.MemberEpoch, owned); e != nil {
			return nil, none, e
		}
	default:
		base = &streamsMember{id: req.MemberID, rebalanceTimeoutMs: -1, topologyEpoch: -1, assigned: emptyTasks(), revoking: emptyTasks()}
	}
	if base.state == memberUnknownState && (owned == nil || !owned.isEmpty()) {
		return nil, none, &hbError{code: errFencedMemberEpoch, msg: "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin."}
	}

	// The topology: the first member's initializes the group's; a member
	// with an older one is told it is stale; another one of the same or a
	// later epoch is an update, which Kafka does not support yet.
	topology := g.topology
	newTopology := false
	if req.Topology != nil {
		t := topologyFromRequest(req.Topology)
		switch {
		case g.topology == nil:
			topology, newTopology = t, true
		case g.topology.epoch > t.epoch:
		case !equalTopology(g.topology, t):
			return nil, none, &hbError{code: errInvalidRequest, msg: "Topology updates are not supported yet."}
		}
	}
	if topology == nil {
		return nil, none, &hbError{code: errInvalidRequest, msg: fmt.Sprintf("Streams group %s has no topology; members must join with one.", g.id)}
	}
	// Resolve the topology against the topics when it is new or they
	// changed since.
	configured := g.configured
	if newTopology || configured == nil || g.configuredVersion != m.topicsVersion {
		c, err := configureTopology(topology, m.topicsByName())
		if err != nil {
			return nil, none, &hbError{code: errStreamsInvalidTopology, msg: err.Error()}
		}
		configured = c
	}
	validated := int32(-1)
	if configured.ready() {
		validated = topology.epoch
		if owned != nil {
			for _, s := range []taskSet{owned.active, owned.standby, owned.warmup} {
				if e := checkTasksExist(configured, s); e != nil {
					return nil, none, e
				}
			}
		}
	}

	// From here on the request is valid: change the group.
	if p.streams[g.id] != g {
		op.begin()
		if c := op.replaced; c != nil {
			op.recs = append(op.recs, groupTombstone(c.id))
			m.deleteGroup(p, c)
			g.offsetStore = c.offsetStore
		}
		p.streams[g.id] = g
		m.log.Info("created streams group", "group", g.id)
	}
	if newTopology {
		op.begin()
		g.topology = topology
		op.recs = append(op.recs, sgTopologyRecord(g.id, topology))
		m.log.Info("streams group topology initialized", "group", g.id, "member", req.MemberID, "epoch", topology.epoch)
	}
	if configured != g.configured {
		g.configured, g.configuredVersion = configured, m.topicsVersion
	}
	if replaces != nil {
		// Kafka's static member replacement: the old member's records go,
		// the new one's come with the old target; no new group epoch.
		op.begin()
		op.recs = append(op.recs, sgMemberTombstones(g.id, replaces.id)...)
		m.cancelStreamsMemberTimers(g, replaces.id)
		target, ok := g.target[replaces.id]
		if !ok {
			target = emptyTasks()
		}
		delete(g.members, replaces.id)
		delete(g.target, replaces.id)
		g.target[base.id] = target
		op.recs = append(op.recs, sgMemberRecord(g.id, base), sgTargetMemberRecord(g.id, base.id, target), sgCurrentAssignmentRecord(g.id, base))
		g.members[base.id] = base
		old = base
		m.log.Info("static member rejoined the streams group", "group", g.id, "member", base.id, "replaces", replaces.id, "instance", *req.InstanceID)
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
	if req.Topology != nil {
		updated.topologyEpoch = req.Topology.Epoch
	}
	updated.clientID, updated.clientHost = ci.ClientID, ci.ClientHost
	if req.ProcessID != nil {
		updated.processID = *req.ProcessID
	}
	if req.UserEndpoint != nil {
		updated.endpoint = &streamsEndpoint{host: req.UserEndpoint.Host, port: req.UserEndpoint.Port}
	}
	if req.ClientTags != nil {
		updated.clientTags = make(map[string]string, len(req.ClientTags))
		for _, t := range req.ClientTags {
			updated.clientTags[t.Key] = t.Value
		}
	}
	if req.TaskOffsets != nil {
		updated.taskOffsets = taskOffsetsOf(req.TaskOffsets)
	}
	if req.TaskEndOffsets != nil {
		updated.taskEndOffsets = taskOffsetsOf(req.TaskEndOffsets)
	}

	// 1. The member and the group epoch.
	bump := false
	if old == nil || !updated.sameMetadata(old) {
		op.begin()
		op.recs = append(op.recs, sgMemberRecord(g.id, updated))
		bump = true
	}
	// The assignment configs (standbys, rack tags) are kept with the
	// epoch; a change recomputes the assignment, as Kafka's
	// lastAssignmentConfigs.
	rackTags := strings.Join(settings.rackTags, ",")
	if configured.hash != g.metadataHash || validated != g.validatedTopologyEpoch || settings.standbys != g.standbyReplicas || rackTags != g.rackAwareTags {
		bump = true
	}
	if bump {
		op.begin()
		g.epoch++
		g.metadataHash, g.validatedTopologyEpoch, g.standbyReplicas, g.rackAwareTags = configured.hash, validated, settings.standbys, rackTags
		op.recs = append(op.recs, sgEpochRecord(g))
		m.log.Debug("bumped streams group epoch", "group", g.id, "epoch", g.epoch)
		// The first member of an empty group: the first assignment waits
		// for more, as Kafka's initial rebalance delay.
		if len(g.members) == 0 && settings.initialDelayMs > 0 && g.assignDelayUntil == 0 {
			g.assignDelayUntil = m.nowMs() + int64(settings.initialDelayMs)
			m.scheduleStreamsAssign(g, settings.initialDelayMs)
		}
	}
	g.members[updated.id] = updated

	// 2. The target assignment, unless it is delayed.
	delayed, batched := false, false
	if g.epoch > g.assignmentEpoch {
		if g.assignDelayUntil > m.nowMs() {
			delayed = true
		} else if !canComputeNextTargetAssignment(g.assignmentTimestampMs, settings.assignmentIntervalMs, m.nowMs()) {
			// Kafka 4.4 spaces target assignments apart: members
			// reconcile to the last one (joiners get nothing yet) and the
			// first heartbeat after the interval computes the next.
			batched = true
		} else {
			op.begin()
			g.assignDelayUntil = 0
			m.computeStreamsTarget(op)
		}
	}

	// 3. Reconcile the member with its target. While the first
	// assignment is delayed the member moves to the group epoch with the
	// target it has (none), as Kafka's: its epoch is then not 0, which a
	// Streams client would take for a join.
	targetEpoch := g.assignmentEpoch
	if delayed {
		targetEpoch = g.epoch
	}
	next := updated
	if !updated.isReconciledTo(targetEpoch) {
		next = reconcileStreams(g, updated, owned, targetEpoch)
	}
	if !next.sameAssignment(updated) {
		op.begin()
		op.recs = append(op.recs, sgCurrentAssignmentRecord(g.id, next))
		g.members[next.id] = next
		if next.state == memberUnrevokedPartitions {
			m.scheduleStreamsRebalance(g, next)
		} else {
			m.fx.Cancel(streamsRebalanceKey(g, next.id))
		}
	}
	m.scheduleStreamsSession(g, next.id)
	if req.ShutdownApplication {
		g.shutdownRequester = next.id
	}

	// The answer.
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.MemberID = next.id
	r.MemberEpoch = next.epoch
	r.HeartbeatIntervalMillis = settings.heartbeatIntervalMs
	r.TaskOffsetIntervalMillis = settings.taskOffsetIntervalMs
	if req.Version >= 1 {
		r.AcceptableRecoveryLag = settings.recoveryLag
	} else {
		r.AcceptableRecoveryLagLegacy = int32(min(settings.recoveryLag, math.MaxInt32))
	}
	if joining || old == nil || !next.assigned.equal(old.assigned) {
		r.ActiveTasks = responseTasks(next.assigned.active)
		r.StandbyTasks = responseTasks(next.assigned.standby)
		r.WarmupTasks = responseTasks(next.assigned.warmup)
		if !joining || !next.assigned.isEmpty() {
			g.endpointEpoch++
		}
	}
	if g.endpointEpoch != req.EndpointInformationEpoch {
		r.PartitionsByUserEndpoint = m.endpointsToPartitions(g)
	}
	r.EndpointInformationEpoch = g.endpointEpoch
	var status []kmsg.StreamsGroupHeartbeatResponseStatus
	addStatus := func(code int8, detail string) {
		s := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		s.StatusCode, s.StatusDetail = code, detail
		status = append(status, s)
	}
	if next.topologyEpoch < topology.epoch {
		addStatus(statusStaleTopology, fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", next.topologyEpoch, topology.epoch))
	}
	out := StreamsHeartbeatResult{Response: r}
	if configured.problem != nil {
		addStatus(configured.problem.code, configured.problem.detail)
		if configured.problem.code == statusMissingInternalTopics {
			out.CreateTopics = slices.Clone(configured.toCreate)
		}
	}
	if delayed {
		addStatus(statusAssignmentDelayed, "Assignment delayed due to the configured initial rebalance delay.")
	}
	if batched {
		addStatus(statusAssignmentDelayed, "Assignment delayed due to the configured assignment interval.")
	}
	if g.shutdownRequester != "" {
		addStatus(statusShutdownApplication, fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", g.shutdownRequester))
	}
	// Kafka 4.4's assignor does not use the tags; it only tells members
	// (v1+ heartbeats) which listed ones they lack.
	if req.Version >= 1 {
		var missing []string
		for _, tag := range settings.rackTags {
			if _, ok := next.clientTags[tag]; !ok {
				missing = append(missing, tag)
			}
		}
		if len(missing) > 0 {
			addStatus(statusMissingClientTags, fmt.Sprintf("Missing required client tags for rack-aware standby assignment: [%s]. Configure them via 'client.tag.<tagKey>' in your Streams config.", strings.Join(missing, ", ")))
		}
	}
	r.Status = status
	return op, out, nil
}

func taskOffsetsOf(ts []kmsg.TaskOffset) []taskOffset {
	out := make([]taskOffset, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOffset{t.SubtopologyID, t.Partition, t.Offset})
	}
	return out
}

// checkTasksExist is throwIfRequestContainsInvalidTasks: reported tasks
// must be tasks of the configured topology.
func checkTasksExist(c *configuredTopology, s taskSet) *hbError {
	for _, sub := range sortedKeys(s) {
		n, ok := c.tasks[sub]
		if !ok {
			return &hbError{code: errInvalidRequest, msg: fmt.Sprintf("Subtopology %s does not exist in the topology.", sub)}
		}
		for _, p := range s[sub] {
			if p < 0 || p >= n {
				return &hbError{code: errInvalidRequest, msg: fmt.Sprintf("Task %d for subtopology %s is invalid. Number of tasks for this subtopology: %d", p, sub, n)}
			}
		}
	}
	return nil
}

// checkStreamsMemberEpoch is throwIfStreamsGroupMemberEpochIsInvalid.
func checkStreamsMemberEpoch(mem *streamsMember, epoch int32, owned *tasksTuple) *hbError {
	switch {
	case epoch > mem.epoch:
		return &hbError{code: errFencedMemberEpoch, msg: fmt.Sprintf("The streams group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, mem.epoch)}
	case epoch < mem.epoch:
		if epoch != mem.previousEpoch || owned != nil && (!owned.active.subsetOf(mem.assigned.active) || !owned.standby.subsetOf(mem.assigned.standby) || !owned.warmup.subsetOf(mem.assigned.warmup)) {
			return &hbError{code: errFencedMemberEpoch, msg: fmt.Sprintf("The streams group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, mem.epoch)}
		}
	}
	return nil
}

func responseTasks(s taskSet) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, sub := range sortedKeys(s) {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID = sub
		t.Partitions = slices.Clone(s[sub])
		out = append(out, t)
	}
	return out
}

// computeStreamsTarget computes the target assignment of the group's
// epoch and writes the members' targets that changed.
func (m *machine) computeStreamsTarget(op *streamsOp) {
	g := op.g
	var tasks map[string]int32
	stateful := map[string]bool{}
	if g.configured != nil && g.configured.ready() && g.topology != nil {
		tasks = g.configured.tasks
		for _, s := range g.topology.subtopologies {
			stateful[s.id] = s.stateful()
		}
	}
	target := assignStreamsTasks(g.members, tasks, stateful, int(g.standbyReplicas))
	for _, id := range sortedKeys(target) {
		if old, ok := g.target[id]; !ok || !old.equal(target[id]) {
			op.recs = append(op.recs, sgTargetMemberRecord(g.id, id, target[id]))
		}
	}
	g.target = target
	g.assignmentEpoch = g.epoch
	g.assignmentTimestampMs = m.nowMs()
	op.recs = append(op.recs, sgTargetEpochRecord(g, g.assignmentTimestampMs))
	m.log.Debug("computed streams group target assignment", "group", g.id, "epoch", g.epoch, "members", len(target))
}

// reconcileStreams is Kafka's streams CurrentAssignmentBuilder.build,
// towards the member's target in the group's target assignment, taken as
// of targetEpoch.
func reconcileStreams(g *streamsGroup, mem *streamsMember, owned *tasksTuple, targetEpoch int32) *streamsMember {
	target, ok := g.target[mem.id]
	if !ok {
		target = emptyTasks()
	}
	switch mem.state {
	case memberStable:
		if mem.epoch != targetEpoch {
			return nextStreamsAssignment(g, mem, mem.epoch, targetEpoch, target, owned)
		}
		return mem
	case memberUnrevokedPartitions:
		if owned == nil || owned.containsAny(mem.revoking) {
			return mem
		}
		return nextStreamsAssignment(g, mem, mem.epoch+1, targetEpoch, target, owned)
	case memberUnreleasedPartitions:
		return nextStreamsAssignment(g, mem, mem.epoch, targetEpoch, target, owned)
	default: // unknown: checked before, the member owns nothing
		return nextStreamsAssignment(g, mem, targetEpoch, targetEpoch, target, owned)
	}
}

// nextStreamsAssignment is computeNextAssignment: what the member keeps,
// must revoke, and may take now. A task another member still owns (an
// active task anywhere, a standby or warm-up copy on the member's own
// process) is withheld until it is released.
func nextStreamsAssignment(g *streamsGroup, mem *streamsMember, memberEpoch, targetEpoch int32, target tasksTuple, owned *tasksTuple) *streamsMember {
	own := g.owners("")
	onProcess := func(procs map[string]map[int32]map[string]bool, sub string, p int32) bool {
		return procs[sub][p][mem.processID]
	}
	activeOf := func(sub string, p int32) (string, bool) {
		pid, ok := own.active[sub][p]
		return pid, ok
	}
	var unreleased bool
	diff := func(cur, tgt taskSet, blocked func(sub string, p int32) bool) (keep, revoke, pending taskSet) {
		keep, revoke, pending = taskSet{}, taskSet{}, taskSet{}
		for sub, ps := range cur {
			for _, p := range ps {
				if tgt.has(sub, p) {
					keep.add(sub, p)
				} else {
					revoke.add(sub, p)
				}
			}
		}
		for sub, ps := range tgt {
			for _, p := range ps {
				if cur.has(sub, p) {
					continue
				}
				if blocked(sub, p) {
					unreleased = true
					continue
				}
				pending.add(sub, p)
			}
		}
		return keep, revoke, pending
	}
	keepA, revokeA, pendA := diff(mem.assigned.active, target.active, func(sub string, p int32) bool {
		_, activeSomewhere := activeOf(sub, p)
		return activeSomewhere || onProcess(own.standby, sub, p) || onProcess(own.warmup, sub, p)
	})
	copyBlocked := func(sub string, p int32) bool {
		pid, ok := activeOf(sub, p)
		return ok && pid == mem.processID || onProcess(own.standby, sub, p) || onProcess(own.warmup, sub, p)
	}
	keepS, revokeS, pendS := diff(mem.assigned.standby, target.standby, copyBlocked)
	keepW, revokeW, pendW := diff(mem.assigned.warmup, target.warmup, copyBlocked)
	keep := tasksTuple{keepA, keepS, keepW}
	revoke := tasksTuple{revokeA, revokeS, revokeW}
	pending := tasksTuple{pendA, pendS, pendW}

	next := mem.clone()
	setEpoch := func(e int32) { next.previousEpoch, next.epoch = next.epoch, e }
	switch {
	case !revoke.isEmpty() && (owned == nil || owned.containsAny(revoke)):
		next.state = memberUnrevokedPartitions
		setEpoch(memberEpoch)
		next.assigned, next.revoking = keep, revoke
	case !pending.isEmpty():
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		setEpoch(targetEpoch)
		for sub, ps := range pending.active {
			keep.active.add(sub, ps...)
		}
		for sub, ps := range pending.standby {
			keep.standby.add(sub, ps...)
		}
		for sub, ps := range pending.warmup {
			keep.warmup.add(sub, ps...)
		}
		next.assigned, next.revoking = keep, emptyTasks()
	default:
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		setEpoch(targetEpoch)
		next.assigned, next.revoking = keep, emptyTasks()
	}
	// Kept and revoking tasks keep their epochs; those granted now get
	// the target assignment's, as Kafka 4.4's CurrentAssignmentBuilder.
	next.setActiveEpochs(mem.activeEpochs, targetEpoch)
	return next
}

// endpointsToPartitions is the interactive-queries map of a heartbeat
// answer: for every member with an endpoint, the source partitions of its
// active tasks and of its standby and warm-up tasks.
func (m *machine) endpointsToPartitions(g *streamsGroup) []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	if g.topology == nil {
		return nil
	}
	var out []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint
	partitionsOf := func(s taskSet) map[string][]int32 {
		res := map[string][]int32{}
		for _, t := range sortedTasks(s) {
			st := g.topology.subtopology(t.sub)
			if st == nil {
				continue
			}
			topics := slices.Clone(st.sourceTopics)
			for _, r := range st.repartitionSourceTopics {
				topics = append(topics, r.name)
			}
			for _, topic := range topics {
				info, ok := m.topicsByName()[topic]
				if ok && t.partition < info.Partitions && !slices.Contains(res[topic], t.partition) {
					res[topic] = append(res[topic], t.partition)
				}
			}
		}
		return res
	}
	for _, id := range sortedKeys(g.members) {
		mem := g.members[id]
		if mem.endpoint == nil {
			continue
		}
		e := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		e.UserEndpoint.Host, e.UserEndpoint.Port = mem.endpoint.host, mem.endpoint.port
		e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		act := partitionsOf(mem.assigned.active)
		for _, topic := range sortedKeys(act) {
			ap := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition()
			ap.Topic, ap.Partitions = topic, slices.Sorted(slices.Values(act[topic]))
			e.ActivePartitions = append(e.ActivePartitions, ap)
		}
		stb := taskSet{}
		for sub, ps := range mem.assigned.standby {
			stb.add(sub, ps...)
		}
		for sub, ps := range mem.assigned.warmup {
			stb.add(sub, ps...)
		}
		sp := partitionsOf(stb)
		for _, topic := range sortedKeys(sp) {
			p := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition()
			p.Topic, p.Partitions = topic, slices.Sorted(slices.Values(sp[topic]))
			e.StandbyPartitions = append(e.StandbyPartitions, p)
		}
		out = append(out, e)
	}
	return out
}

// streamsLeave is a heartbeat with epoch -1: the member leaves and the
// group epoch is bumped so that the others take over its tasks.
func (m *machine) streamsLeave(p *partitionState, req *kmsg.StreamsGroupHeartbeatRequest) (*streamsOp, StreamsHeartbeatResult, *hbError) {
	var none StreamsHeartbeatResult
	g := p.streams[req.Group]
	if g == nil {
		return nil, none, &hbError{code: errGroupIDNotFound, msg: fmt.Sprintf("Streams group %s not found.", req.Group)}
	}
	if req.ShutdownApplication {
		g.shutdownRequester = req.MemberID
	}
	var mem *streamsMember
	if req.InstanceID == nil {
		mem = g.members[req.MemberID]
		if mem == nil {
			return nil, none, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)}
		}
	} else {
		mem = g.staticMember(*req.InstanceID)
		switch {
		case mem == nil:
			return nil, none, &hbError{code: errUnknownMemberID, msg: fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)}
		case mem.id != req.MemberID:
			return nil, none, &hbError{code: errFencedInstanceID, msg: fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, mem.id)}
		}
	}
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.MemberID = req.MemberID
	r.MemberEpoch = req.MemberEpoch
	op := &streamsOp{p: p, g: g}
	if req.MemberEpoch == staticLeaveEpoch {
		// The static member keeps its place, tasks and session timer, so
		// that it can come back under a new member id with its tasks.
		op.begin()
		left := mem.clone()
		left.epoch = staticLeaveEpoch
		left.revoking = emptyTasks()
		g.members[left.id] = left
		m.fx.Cancel(streamsRebalanceKey(g, left.id))
		op.recs = append(op.recs, sgCurrentAssignmentRecord(g.id, left))
		m.log.Info("static member left the streams group for now", "group", g.id, "member", mem.id, "instance", *req.InstanceID)
		return op, StreamsHeartbeatResult{Response: r}, nil
	}
	m.log.Info("member left the streams group", "group", g.id, "member", mem.id)
	m.fenceStreamsMember(op, mem)
	return op, StreamsHeartbeatResult{Response: r}, nil
}

// fenceStreamsMember removes a member and bumps the group epoch, as
// streamsGroupFenceMember.
func (m *machine) fenceStreamsMember(op *streamsOp, mem *streamsMember) {
	g := op.g
	op.begin()
	op.recs = append(op.recs, sgMemberTombstones(g.id, mem.id)...)
	g.epoch++
	op.recs = append(op.recs, sgEpochRecord(g))
	delete(g.members, mem.id)
	delete(g.target, mem.id)
	m.cancelStreamsMemberTimers(g, mem.id)
	if len(g.members) == 0 {
		g.shutdownRequester = ""
	}
}

// expireStreamsMember fences a member whose session or revocation deadline
// passed; epoch is the epoch a rebalance timeout was set for, anyEpoch for
// a session timeout.
func (m *machine) expireStreamsMember(g *streamsGroup, id string, epoch int32, why string) {
	if !m.currentStreams(g) {
		return
	}
	mem := g.members[id]
	if mem == nil || epoch != anyEpoch && mem.epoch != epoch {
		return
	}
	m.log.Info("member fenced from the streams group", "group", g.id, "member", id, "reason", why)
	op := &streamsOp{p: m.partitions[g.partition], g: g}
	m.fenceStreamsMember(op, mem)
	m.finishStreamsOp(op, func(error) {})
}

func streamsSessionKey(g *streamsGroup, id string) timerKey {
	return timerKey{kind: timerStreamsSession, group: g.id, member: id}
}

func streamsRebalanceKey(g *streamsGroup, id string) timerKey {
	return timerKey{kind: timerStreamsRebalance, group: g.id, member: id}
}

func (m *machine) scheduleStreamsSession(g *streamsGroup, id string) {
	timeout := m.streamsSettings(g.id).sessionTimeoutMs
	m.fx.Schedule(streamsSessionKey(g, id), ms(int64(timeout)), func() {
		m.expireStreamsMember(g, id, anyEpoch, "the member session expired")
	})
}

// scheduleStreamsRebalance bounds how long a member may take to revoke
// tasks: past its rebalance timeout in the same epoch, it is fenced.
func (m *machine) scheduleStreamsRebalance(g *streamsGroup, mem *streamsMember) {
	id, epoch, timeout := mem.id, mem.epoch, mem.rebalanceTimeoutMs
	if timeout < 0 {
		timeout = m.streamsSettings(g.id).sessionTimeoutMs
	}
	m.fx.Schedule(streamsRebalanceKey(g, id), ms(int64(timeout)), func() {
		m.expireStreamsMember(g, id, epoch, "it did not revoke its tasks within its rebalance timeout")
	})
}

func (m *machine) cancelStreamsMemberTimers(g *streamsGroup, id string) {
	m.fx.Cancel(streamsSessionKey(g, id))
	m.fx.Cancel(streamsRebalanceKey(g, id))
}

func (m *machine) cancelStreamsTimers(g *streamsGroup) {
	for id := range g.members {
		m.cancelStreamsMemberTimers(g, id)
	}
	m.fx.Cancel(streamsAssignKey(g))
}

func streamsAssignKey(g *streamsGroup) timerKey {
	return timerKey{kind: timerStreamsAssign, group: g.id}
}

// scheduleStreamsAssign computes the group's delayed first target
// assignment once the initial rebalance delay has passed, with the members
// that joined meanwhile; they get their tasks on their next heartbeat.
func (m *machine) scheduleStreamsAssign(g *streamsGroup, delayMs int32) {
	m.fx.Schedule(streamsAssignKey(g), ms(int64(delayMs)), func() {
		if !m.currentStreams(g) || g.assignDelayUntil == 0 {
			return
		}
		g.assignDelayUntil = 0
		if len(g.members) == 0 || g.configured == nil || g.epoch <= g.assignmentEpoch {
			return
		}
		// A group that emptied and refilled within the assignment
		// interval waits for the rest of it.
		interval := m.streamsSettings(g.id).assignmentIntervalMs
		if now := m.nowMs(); !canComputeNextTargetAssignment(g.assignmentTimestampMs, interval, now) {
			g.assignDelayUntil = g.assignmentTimestampMs + int64(interval)
			m.scheduleStreamsAssign(g, int32(g.assignDelayUntil-now))
			return
		}
		// The members already moved to the group epoch without tasks: a
		// new epoch makes them reconcile to the assignment.
		op := &streamsOp{p: m.partitions[g.partition], g: g}
		op.begin()
		g.epoch++
		op.recs = append(op.recs, sgEpochRecord(g))
		m.computeStreamsTarget(op)
		m.finishStreamsOp(op, func(error) {})
	})
}

// deleteStreamsGroup removes a group from its partition.
func (m *machine) deleteStreamsGroup(p *partitionState, g *streamsGroup) {
	m.cancelStreamsTimers(g)
	g.dead = true
	delete(p.streams, g.id)
}

// streamsGroupLoaded starts the timers of a loaded streams group, as
// Kafka's onLoaded: fresh sessions, and fresh rebalance timeouts for the
// members revoking tasks. The topology is resolved again on the next
// heartbeat.
func (m *machine) streamsGroupLoaded(g *streamsGroup) {
	for _, id := range sortedKeys(g.members) {
		m.scheduleStreamsSession(g, id)
		if g.members[id].state == memberUnrevokedPartitions {
			m.scheduleStreamsRebalance(g, g.members[id])
		}
	}
}
