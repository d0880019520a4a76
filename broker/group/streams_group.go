package group

import (
	"maps"
	"slices"
)

// This file is the state of a streams group (KIP-1071), after Kafka's
// StreamsGroup and StreamsGroupMember: the topology the first member
// initialized, the members with their process, endpoint and tasks, and
// the target assignment. Tasks are named by subtopology id and partition.

// taskSet maps subtopology ids to sorted, distinct partitions (tasks).
// Subtopologies without partitions are never stored.
type taskSet map[string][]int32

func (s taskSet) add(sub string, ps ...int32) {
	if len(ps) == 0 {
		return
	}
	cur := append(s[sub], ps...)
	slices.Sort(cur)
	s[sub] = slices.Compact(cur)
}

func (s taskSet) has(sub string, p int32) bool {
	_, ok := slices.BinarySearch(s[sub], p)
	return ok
}

func (s taskSet) size() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s taskSet) clone() taskSet {
	out := make(taskSet, len(s))
	for k, ps := range s {
		out[k] = slices.Clone(ps)
	}
	return out
}

func (s taskSet) equal(o taskSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k, ps := range s {
		if !slices.Equal(ps, o[k]) {
			return false
		}
	}
	return true
}

// containsAny reports whether s and o share a task.
func (s taskSet) containsAny(o taskSet) bool {
	for k, ps := range o {
		for _, p := range ps {
			if s.has(k, p) {
				return true
			}
		}
	}
	return false
}

// subsetOf reports whether every task of s is in o.
func (s taskSet) subsetOf(o taskSet) bool {
	for k, ps := range s {
		for _, p := range ps {
			if !o.has(k, p) {
				return false
			}
		}
	}
	return true
}

// tasksTuple is Kafka's TasksTuple: active, standby and warm-up tasks.
type tasksTuple struct {
	active, standby, warmup taskSet
}

func emptyTasks() tasksTuple {
	return tasksTuple{active: taskSet{}, standby: taskSet{}, warmup: taskSet{}}
}

func (t tasksTuple) clone() tasksTuple {
	return tasksTuple{active: t.active.clone(), standby: t.standby.clone(), warmup: t.warmup.clone()}
}

func (t tasksTuple) equal(o tasksTuple) bool {
	return t.active.equal(o.active) && t.standby.equal(o.standby) && t.warmup.equal(o.warmup)
}

func (t tasksTuple) isEmpty() bool {
	return t.active.size() == 0 && t.standby.size() == 0 && t.warmup.size() == 0
}

func (t tasksTuple) containsAny(o tasksTuple) bool {
	return t.active.containsAny(o.active) || t.standby.containsAny(o.standby) || t.warmup.containsAny(o.warmup)
}

// streamsEndpoint is a member's endpoint for interactive queries.
type streamsEndpoint struct {
	host string
	port uint16
}

// streamsMember is one member of a streams group: a stream thread of a
// Kafka Streams client (process).
type streamsMember struct {
	id                 string
	instanceID         *string
	rackID             *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	topologyEpoch      int32
	processID          string
	endpoint           *streamsEndpoint
	clientTags         map[string]string

	epoch         int32
	previousEpoch int32
	state         memberState
	assigned      tasksTuple // tasks the member owns (or may own)
	revoking      tasksTuple // tasks it must give up first
	// activeEpochs is the assignment epoch of each active task in
	// assigned and revoking: the target assignment epoch at which the
	// member got it (Kafka 4.4's TasksTupleWithEpochs). An offset commit
	// from an older member epoch is accepted for a task the member got
	// at or before that epoch.
	activeEpochs map[streamsTask]int32

	// taskOffsets and taskEndOffsets are the changelog offsets the member
	// last reported; Kafka keeps them in memory only, for describing.
	taskOffsets, taskEndOffsets []taskOffset
}

// taskOffset is a cumulative changelog offset of one task.
type taskOffset struct {
	sub       string
	partition int32
	offset    int64
}

// staticMember returns the member holding a group.instance.id, or nil.
func (g *streamsGroup) staticMember(instanceID string) *streamsMember {
	for _, m := range g.members {
		if m.instanceID != nil && *m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

func (m *streamsMember) clone() *streamsMember {
	c := *m
	c.clientTags = maps.Clone(m.clientTags)
	if m.endpoint != nil {
		e := *m.endpoint
		c.endpoint = &e
	}
	c.assigned = m.assigned.clone()
	c.revoking = m.revoking.clone()
	c.activeEpochs = maps.Clone(m.activeEpochs)
	return &c
}

// setActiveEpochs gives every active task in assigned and revoking its
// assignment epoch: the one in prev if it had one (a task kept keeps the
// epoch it was assigned at), else epoch (a task assigned now).
func (m *streamsMember) setActiveEpochs(prev map[streamsTask]int32, epoch int32) {
	out := make(map[streamsTask]int32, m.assigned.active.size()+m.revoking.active.size())
	for _, s := range []taskSet{m.assigned.active, m.revoking.active} {
		for sub, ps := range s {
			for _, p := range ps {
				t := streamsTask{sub, p}
				e, ok := prev[t]
				if !ok {
					e = epoch
				}
				out[t] = e
			}
		}
	}
	m.activeEpochs = out
}

// sameMetadata reports whether the fields a StreamsGroupMemberMetadata
// record carries are equal.
func (m *streamsMember) sameMetadata(o *streamsMember) bool {
	return eqOpt(m.instanceID, o.instanceID) && eqOpt(m.rackID, o.rackID) &&
		m.clientID == o.clientID && m.clientHost == o.clientHost &&
		m.rebalanceTimeoutMs == o.rebalanceTimeoutMs && m.topologyEpoch == o.topologyEpoch &&
		m.processID == o.processID && eqEndpoint(m.endpoint, o.endpoint) && maps.Equal(m.clientTags, o.clientTags)
}

// sameAssignment reports whether the fields a StreamsGroupCurrentMember
// Assignment record carries are equal.
func (m *streamsMember) sameAssignment(o *streamsMember) bool {
	return m.epoch == o.epoch && m.previousEpoch == o.previousEpoch && m.state == o.state &&
		m.assigned.equal(o.assigned) && m.revoking.equal(o.revoking) && maps.Equal(m.activeEpochs, o.activeEpochs)
}

func (m *streamsMember) isReconciledTo(epoch int32) bool {
	return m.state == memberStable && m.epoch == epoch
}

func eqEndpoint(a, b *streamsEndpoint) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// streamsTopicInfo is a topology's internal topic: its name, the
// partitions and replication factor it asks for (0: decided by the
// coordinator, or the broker default) and its topic configs.
type streamsTopicInfo struct {
	name       string
	partitions int32
	rf         int16
	configs    [][2]string
}

// copartitionGroup names, by index into its subtopology's lists, topics
// that must have as many partitions as each other.
type copartitionGroup struct {
	sourceTopics, sourceTopicRegex, repartitionSourceTopics []int16
}

// streamsSubtopology is one subtopology as the members declared it.
type streamsSubtopology struct {
	id                      string
	sourceTopics            []string
	sourceTopicRegex        []string
	changelogTopics         []streamsTopicInfo
	repartitionSinkTopics   []string
	repartitionSourceTopics []streamsTopicInfo
	copartitionGroups       []copartitionGroup
}

// stateful reports whether the subtopology's tasks have state, which
// standby tasks replicate.
func (s *streamsSubtopology) stateful() bool { return len(s.changelogTopics) > 0 }

// streamsTopology is the topology of a streams group: its epoch and
// subtopologies, sorted by id.
type streamsTopology struct {
	epoch         int32
	subtopologies []streamsSubtopology
}

func (t *streamsTopology) subtopology(id string) *streamsSubtopology {
	for i := range t.subtopologies {
		if t.subtopologies[i].id == id {
			return &t.subtopologies[i]
		}
	}
	return nil
}

// sourceTopics lists every topic a task of the topology reads: source and
// repartition source topics.
func (t *streamsTopology) isSourceTopic(topic string) bool {
	return t.subtopologyReading(topic) != ""
}

// subtopologyReading returns the subtopology whose tasks read topic (a
// source or repartition source topic), or "" if none does: Kafka's
// StreamsTopology.sourceTopicMap.
func (t *streamsTopology) subtopologyReading(topic string) string {
	for _, s := range t.subtopologies {
		if slices.Contains(s.sourceTopics, topic) {
			return s.id
		}
		for _, r := range s.repartitionSourceTopics {
			if r.name == topic {
				return s.id
			}
		}
	}
	return ""
}

// streamsGroupState is a streams group's state as Kafka's
// StreamsGroup.maybeUpdateGroupState derives it.
type streamsGroupState int8

const (
	sgEmpty streamsGroupState = iota
	sgNotReady
	sgAssigning
	sgReconciling
	sgStable
	sgDead
)

func (s streamsGroupState) String() string {
	return [...]string{"Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"}[s]
}

// streamsGroup is one streams group with its committed offsets.
type streamsGroup struct {
	id        string
	partition int32
	dead      bool

	epoch           int32
	assignmentEpoch int32
	// metadataHash summarizes the topics the topology needs, as they were
	// when the group epoch last moved; a change bumps the epoch.
	metadataHash int64
	// validatedTopologyEpoch is the topology epoch whose topics were last
	// found complete and well partitioned; -1 when none.
	validatedTopologyEpoch int32
	// standbyReplicas is the num.standby.replicas the target assignment
	// was computed with (the record's LastAssignmentConfigs).
	standbyReplicas int32
	// rackAwareTags is the rack.aware.assignment.tags the target
	// assignment was computed with, joined by commas ("" for none).
	rackAwareTags string
	topology      *streamsTopology
	// configured is the topology resolved against the topics (derived,
	// not persisted); nil until the first heartbeat after a load or a
	// topic change.
	configured *configuredTopology
	// configuredVersion is the machine's topicsVersion configured was
	// resolved against.
	configuredVersion int64
	members           map[string]*streamsMember
	target            map[string]tasksTuple
	// endpointEpoch counts changes of the assignment, which clients use
	// to refresh their endpoint-to-partitions map (interactive queries).
	endpointEpoch int32
	// shutdownRequester is the member that asked the whole application to
	// shut down, until the group is empty.
	shutdownRequester string
	// assignDelayUntil is when the delayed first target assignment of the
	// group is due (group.streams.initial.rebalance.delay.ms); 0 when
	// none is pending. Kept in memory only, as Kafka's timer.
	assignDelayUntil int64
	// assignmentTimestampMs is when the target assignment was last
	// computed (0 never): the next waits for
	// group.streams.assignment.interval.ms after it, as Kafka 4.4.
	assignmentTimestampMs int64

	seq uint64
	offsetStore
}

func newStreamsGroup(id string, partition int32) *streamsGroup {
	return &streamsGroup{
		id: id, partition: partition,
		validatedTopologyEpoch: -1,
		members:                make(map[string]*streamsMember),
		target:                 make(map[string]tasksTuple),
		offsetStore:            newOffsetStore(),
	}
}

func (g *streamsGroup) state() streamsGroupState {
	switch {
	case g.dead:
		return sgDead
	case len(g.members) == 0:
		return sgEmpty
	case g.topology == nil || g.topology.epoch != g.validatedTopologyEpoch:
		return sgNotReady
	case g.epoch > g.assignmentEpoch:
		return sgAssigning
	}
	for _, m := range g.members {
		if !m.isReconciledTo(g.assignmentEpoch) {
			return sgReconciling
		}
	}
	return sgStable
}

// snapshot copies what a heartbeat may change, to undo it if its records
// fail to append; offsets change only once their own appends succeed.
func (g *streamsGroup) snapshot() *streamsGroup {
	c := *g
	c.members = make(map[string]*streamsMember, len(g.members))
	for id, m := range g.members {
		c.members[id] = m.clone()
	}
	c.target = make(map[string]tasksTuple, len(g.target))
	for id, t := range g.target {
		c.target[id] = t.clone()
	}
	return &c
}

func (g *streamsGroup) restore(s *streamsGroup) {
	offsets, seq := g.offsetStore, g.seq
	*g = *s
	g.offsetStore, g.seq = offsets, seq+1
}

// isSubscribedToTopic reports whether a live member reads the topic: such
// offsets are neither deleted nor expired.
func (g *streamsGroup) isSubscribedToTopic(topic string) bool {
	if len(g.members) == 0 || g.dead || g.topology == nil {
		return false
	}
	return g.topology.isSourceTopic(topic)
}

// taskOwners is who currently owns each task, by process, as Kafka's
// StreamsGroup tracks currentActiveTaskProcessId and the standby and
// warm-up process sets: a task is owned from its assignment until its
// revocation is acknowledged.
type taskOwners struct {
	active  map[string]map[int32]string
	standby map[string]map[int32]map[string]bool
	warmup  map[string]map[int32]map[string]bool
}

func (g *streamsGroup) owners(skip string) taskOwners {
	o := taskOwners{active: map[string]map[int32]string{}, standby: map[string]map[int32]map[string]bool{}, warmup: map[string]map[int32]map[string]bool{}}
	addSet := func(dst map[string]map[int32]map[string]bool, s taskSet, process string) {
		for sub, ps := range s {
			if dst[sub] == nil {
				dst[sub] = map[int32]map[string]bool{}
			}
			for _, p := range ps {
				if dst[sub][p] == nil {
					dst[sub][p] = map[string]bool{}
				}
				dst[sub][p][process] = true
			}
		}
	}
	for id, m := range g.members {
		if id == skip {
			continue
		}
		for _, s := range []taskSet{m.assigned.active, m.revoking.active} {
			for sub, ps := range s {
				if o.active[sub] == nil {
					o.active[sub] = map[int32]string{}
				}
				for _, p := range ps {
					o.active[sub][p] = m.processID
				}
			}
		}
		addSet(o.standby, m.assigned.standby, m.processID)
		addSet(o.standby, m.revoking.standby, m.processID)
		addSet(o.warmup, m.assigned.warmup, m.processID)
		addSet(o.warmup, m.revoking.warmup, m.processID)
	}
	return o
}
