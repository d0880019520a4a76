package group

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// timerKind names what a timer does when it fires.
type timerKind uint8

const (
	timerHeartbeat         timerKind = iota // a member's session expiry
	timerJoin                               // the end of a group's join phase
	timerSync                               // the deadline for a group's SyncGroups
	timerExpiry                             // the shard's offset retention sweep
	timerConsumerSession                    // a consumer group member's session expiry
	timerConsumerRebalance                  // a consumer group member's revocation deadline
	timerConsumerJoin                       // a classic member of a consumer group told to rejoin
	timerConsumerSync                       // a classic member of a consumer group that joined, until it syncs
	timerStreamsSession                     // a streams group member's session expiry
	timerStreamsRebalance                   // a streams group member's revocation deadline
	timerStreamsAssign                      // a streams group's delayed first assignment
)

// timerKey identifies a timer; scheduling a key again replaces its timer.
type timerKey struct {
	kind   timerKind
	group  string
	member string
}

// effects is everything the state machine asks of the goroutine that owns
// it. None of it blocks: timers call fn later on the owner's goroutine, and
// append hands records to the Store and calls done on the owner's goroutine
// once they are durable or failed. Appends to one partition (plain,
// transactional and markers alike) reach the log and complete in the order
// they were issued; an append of no records completes after every append
// issued before it on the partition, which makes it a barrier.
//
// The shard runtime (coord.Shard) provides the timers and plain appends.
type effects interface {
	Schedule(k timerKey, d time.Duration, fn func())
	Cancel(k timerKey)
	Append(partition int32, recs []Record, done func(error))
	// appendTxn writes recs as one transactional batch of a producer.
	appendTxn(partition int32, txn TxnAppend, recs []Record, done func(error))
	// appendMarker writes a transaction marker.
	appendMarker(partition int32, marker TxnMarker, done func(error))
}

// ClientInfo is what the coordinator needs from a request's connection.
type ClientInfo struct {
	// ClientID is the request header's client id; new member ids start
	// with it.
	ClientID string
	// ClientHost is the client's address as Kafka shows it in
	// DescribeGroups: "/" followed by the IP.
	ClientHost string
	// TopicDescribable says whether the member's principal may DESCRIBE a
	// topic; nil without an authorizer. A regex subscription resolved on
	// the member's heartbeat keeps only the topics it says yes to, as
	// Kafka's GroupMetadataManager filters a regex's topics with the
	// authorizer and the context of the heartbeat that refreshes it.
	TopicDescribable func(topic string) bool
}

// partitionState holds the groups of one loaded __consumer_offsets
// partition.
type partitionState struct {
	id        int32
	loading   bool
	loadToken uint64
	groups    map[string]*classicGroup
	// consumers holds the KIP-848 consumer groups. A group id is in at
	// most one of the two maps.
	consumers map[string]*consumerGroup
	// streams holds the KIP-1071 streams groups; a group id is in at most
	// one of the three maps.
	streams map[string]*streamsGroup
	// txns holds the offsets of transactions not ended yet, by producer.
	txns *txnOffsets
	// nextOrder is the order (offsetValue.order) of the next offset
	// record appended: appends reach the log in the order they are issued.
	nextOrder int64
}

// takeOrder returns the order of an offset record about to be appended.
func (p *partitionState) takeOrder() int64 {
	o := p.nextOrder
	p.nextOrder++
	return o
}

// machine is the state of one shard: the groups and offsets of the
// partitions it owns. Only the shard's goroutine touches it.
type machine struct {
	cfg        Config
	log        *slog.Logger
	clock      Clock
	fx         effects
	newID      func() string
	partitions map[int32]*partitionState
	loadTokens uint64

	// topics is the latest snapshot of the broker's topics, by name and
	// by id (topicsByName, topicsByID); topicsVersion counts the changes
	// the coordinator was told of. After a change the snapshot is stale
	// and taken again from Config.Topics at its next use, not at the
	// change: the metadata watcher reports every CreateTopics, and a
	// snapshot is a pass over every topic that a shard with no group
	// work would take for nothing.
	topics        map[string]TopicInfo
	topicNames    map[[16]byte]string // by topic id; shared, never written
	topicsStale   bool
	topicsVersion int64
}

func newMachine(cfg Config, log *slog.Logger, clock Clock, fx effects, newID func() string) *machine {
	m := &machine{cfg: cfg, log: log, clock: clock, fx: fx, newID: newID, partitions: make(map[int32]*partitionState)}
	m.topicsChanged() // the first use takes the first snapshot
	return m
}

// start schedules the offset retention sweep, which reschedules itself;
// the shard runs it before any other work.
func (m *machine) start() {
	m.fx.Schedule(timerKey{kind: timerExpiry}, ms(m.cfg.OffsetsRetentionCheckIntervalMs), func() {
		m.sweepExpired()
		m.start()
	})
}

// topicsChanged marks the snapshot stale: the next use takes a new one
// from Config.Topics. Consumer groups recompute their subscriptions on
// their next heartbeat, as Kafka's groups do on a new metadata image.
func (m *machine) topicsChanged() {
	m.topicsStale = true
	m.topicsVersion++
	for _, p := range m.partitions {
		for _, g := range p.consumers {
			g.refresh = true
		}
	}
}

// topicsByName is the snapshot of the topics by name, taken again first
// if the topics changed since it was taken. The map is shared: never
// written.
func (m *machine) topicsByName() map[string]TopicInfo {
	m.refreshTopics()
	return m.topics
}

// topicsByID is the snapshot's topic names by id; shared as well.
func (m *machine) topicsByID() map[[16]byte]string {
	m.refreshTopics()
	return m.topicNames
}

func (m *machine) refreshTopics() {
	if !m.topicsStale {
		return
	}
	m.topicsStale = false
	var topics map[string]TopicInfo
	var names map[[16]byte]string
	switch v := m.cfg.Topics.(type) {
	case nil:
	case TopicNamesView:
		topics, names = v.TopicsAndNames()
	default:
		topics = v.Topics()
	}
	if topics == nil {
		topics = map[string]TopicInfo{}
	}
	if names == nil {
		names = topicNamesOf(topics)
	}
	m.topics, m.topicNames = topics, names
}

// topicNamesOf is the topic names of topics by id.
func topicNamesOf(topics map[string]TopicInfo) map[[16]byte]string {
	names := make(map[[16]byte]string, len(topics))
	for name, t := range topics {
		names[t.ID] = name
	}
	return names
}

func (m *machine) nowMs() int64 { return m.clock.Now().UnixMilli() }

// partitionOf finds the loaded partition of a group, or the error code
// Kafka answers when this coordinator does not serve it.
func (m *machine) partitionOf(groupID string) (*partitionState, int16) {
	p := m.partitions[PartitionFor(groupID, m.cfg.OffsetsTopicPartitions)]
	switch {
	case p == nil:
		return nil, errNotCoordinator
	case p.loading:
		return nil, errCoordinatorLoadInProgress
	}
	return p, 0
}

// current reports whether g is still the live group of its id: timers and
// appends outlive groups that were deleted, unloaded or replaced.
func (m *machine) current(g *classicGroup) bool {
	p := m.partitions[g.partition]
	return p != nil && !p.loading && p.groups[g.id] == g && !g.is(stateDead)
}

func heartbeatKey(g *classicGroup, memberID string) timerKey {
	return timerKey{kind: timerHeartbeat, group: g.id, member: memberID}
}
func joinKey(g *classicGroup) timerKey { return timerKey{kind: timerJoin, group: g.id} }
func syncKey(g *classicGroup) timerKey { return timerKey{kind: timerSync, group: g.id} }

// scheduleHeartbeat (re)starts a member's session timer.
func (m *machine) scheduleHeartbeat(g *classicGroup, memberID string, timeoutMs int32) {
	m.fx.Schedule(heartbeatKey(g, memberID), ms(int64(timeoutMs)), func() { m.expireHeartbeat(g, memberID) })
}

// cancelGroupTimers stops every timer of a group that goes away.
func (m *machine) cancelGroupTimers(g *classicGroup) {
	for id := range g.members {
		m.fx.Cancel(heartbeatKey(g, id))
	}
	for id := range g.pendingJoin {
		m.fx.Cancel(heartbeatKey(g, id))
	}
	m.fx.Cancel(joinKey(g))
	m.fx.Cancel(syncKey(g))
}

// removeMember drops a member, answering whatever it has parked.
func (m *machine) removeMember(g *classicGroup, id string, code int16, reason string) {
	m.fx.Cancel(heartbeatKey(g, id))
	if mem := g.members[id]; mem != nil {
		m.log.Info("removed member from group", "group", g.id, "state", g.state.String(), "generation", g.generation,
			"member", id, "instance", deref(mem.instanceID), "client_id", mem.clientID, "reason", reason)
		if mem.joinReply != nil {
			r := kmsg.NewPtrJoinGroupResponse()
			r.ErrorCode = code
			mem.joinReply(r)
			mem.joinReply = nil
			g.awaitingJoin--
		}
		if mem.syncReply != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = code
			mem.syncReply(r)
			mem.syncReply = nil
		}
	}
	g.remove(id)
}

// deleteGroup removes an empty group from its partition.
func (m *machine) deleteGroup(p *partitionState, g *classicGroup) {
	m.cancelGroupTimers(g)
	g.transitionTo(stateDead, m.nowMs())
	delete(p.groups, g.id)
}

// beginLoad marks a partition as loading and returns the token its
// finishLoad must present. A partition loaded again is unloaded first.
func (m *machine) beginLoad(partition int32) uint64 {
	if _, ok := m.partitions[partition]; ok {
		m.unload(partition)
	}
	m.loadTokens++
	m.partitions[partition] = &partitionState{id: partition, loading: true, loadToken: m.loadTokens, groups: map[string]*classicGroup{}, consumers: map[string]*consumerGroup{}, streams: map[string]*streamsGroup{}, txns: newTxnOffsets()}
	return m.loadTokens
}

// finishLoad installs replayed groups, unless the partition was unloaded or
// loaded again meanwhile. Members get fresh session timers, and groups over
// group.max.size rebalance, as in Kafka's onLoaded.
func (m *machine) finishLoad(partition int32, token uint64, loaded *loadedPartition) bool {
	p := m.partitions[partition]
	if p == nil || !p.loading || p.loadToken != token {
		return false
	}
	p.loading = false
	p.groups = loaded.classic
	p.consumers = loaded.consumers
	p.streams = loaded.streams
	p.txns = loaded.txns
	p.nextOrder = loaded.records
	for _, g := range p.consumers {
		m.consumerGroupLoaded(g)
	}
	for _, g := range p.streams {
		m.streamsGroupLoaded(g)
	}
	for _, g := range p.groups {
		for _, id := range g.order {
			m.scheduleHeartbeat(g, id, g.members[id].sessionTimeoutMs)
		}
		if int32(len(g.members)) > m.cfg.GroupMaxSize {
			m.prepareRebalance(g, fmt.Sprintf("loaded with %d members, more than group.max.size %d", len(g.members), m.cfg.GroupMaxSize))
		}
	}
	return true
}

// abortLoad forgets a partition whose load failed.
func (m *machine) abortLoad(partition int32, token uint64) {
	if p := m.partitions[partition]; p != nil && p.loadToken == token {
		delete(m.partitions, partition)
	}
}

// unload drops a partition's state, answering every parked request with
// NOT_COORDINATOR so its clients look for the new coordinator.
func (m *machine) unload(partition int32) {
	p := m.partitions[partition]
	if p == nil {
		return
	}
	delete(m.partitions, partition)
	for _, g := range p.consumers {
		m.cancelConsumerTimers(g)
		g.dead = true
	}
	for _, g := range p.streams {
		m.cancelStreamsTimers(g)
		g.dead = true
	}
	for _, g := range p.groups {
		m.cancelGroupTimers(g)
		for _, id := range g.order {
			mem := g.members[id]
			if mem.joinReply != nil {
				r := kmsg.NewPtrJoinGroupResponse()
				r.ErrorCode = errNotCoordinator
				r.MemberID = id
				mem.joinReply(r)
				mem.joinReply = nil
				g.awaitingJoin--
			}
			if mem.syncReply != nil {
				r := kmsg.NewPtrSyncGroupResponse()
				r.ErrorCode = errNotCoordinator
				mem.syncReply(r)
				mem.syncReply = nil
			}
		}
		g.transitionTo(stateDead, m.nowMs())
	}
}

// anyLoading reports whether one of the machine's partitions is loading.
func (m *machine) anyLoading() bool {
	for _, p := range m.partitions {
		if p.loading {
			return true
		}
	}
	return false
}
