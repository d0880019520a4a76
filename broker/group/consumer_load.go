package group

import (
	"fmt"
	"slices"
)

// replayConsumer applies one consumer group record to the partition being
// loaded, as GroupMetadataManager.replay does for each record type. Records
// create the group they name; tombstones of unknown groups or members are
// ignored.
func replayConsumer(lp *loadedPartition, partition int32, version int16, r Record, nowMs int64) error {
	k, err := decodeCGKey(version, r.Key)
	if err != nil {
		return fmt.Errorf("decode consumer group key type %d: %w", version, err)
	}
	g := lp.consumers[k.group]
	if r.Value == nil {
		if g != nil {
			replayConsumerTombstone(lp, partition, g, version, k, nowMs)
		}
		return nil
	}
	if g == nil {
		if c := lp.classic[k.group]; c != nil {
			// Only a simple group (offsets, no metadata) may become a
			// consumer group; it keeps its offsets.
			if c.protocolType != "" || len(c.members) > 0 {
				return fmt.Errorf("consumer group record type %d for %s, which is a classic group", version, k.group)
			}
			delete(lp.classic, k.group)
			g = newConsumerGroup(k.group, partition)
			g.offsetStore = c.offsetStore
		} else {
			g = newConsumerGroup(k.group, partition)
		}
		lp.consumers[k.group] = g
	}
	fail := func(err error) error {
		return fmt.Errorf("decode consumer group value type %d of %s: %w", version, k.group, err)
	}
	member := func() *consumerMember {
		m := g.members[k.member]
		if m == nil {
			m = &consumerMember{id: k.member, rebalanceTimeoutMs: -1, assigned: tpSet{}, revoking: tpSet{}}
		}
		return m.clone()
	}
	switch version {
	case cgMetadataKeyVersion:
		epoch, err := decodeCGEpoch(r.Value)
		if err != nil {
			return fail(err)
		}
		g.epoch = epoch
	case cgPartitionMetadataKeyVersion:
		meta, err := decodeCGSubscriptionMetadata(r.Value)
		if err != nil {
			return fail(err)
		}
		g.subscription = meta
	case cgMemberMetadataKeyVersion:
		s, err := decodeCGMember(r.Value)
		if err != nil {
			return fail(err)
		}
		m := member()
		m.instanceID, m.rackID = s.instanceID, s.rackID
		m.clientID, m.clientHost = s.clientID, s.clientHost
		m.topicNames = normalizeTopics(s.topicNames)
		m.regex = deref(s.regex)
		m.rebalanceTimeoutMs = s.rebalanceTimeoutMs
		m.serverAssignor = deref(s.serverAssignor)
		m.classic = s.classic
		if old := g.members[m.id]; old != nil && old.instanceID != nil && !eqOpt(old.instanceID, m.instanceID) {
			delete(g.static, *old.instanceID)
		}
		g.updateMember(m)
	case cgTargetMetadataKeyVersion:
		epoch, ts, err := decodeTargetEpoch(r.Value)
		if err != nil {
			return fail(err)
		}
		g.assignmentEpoch, g.assignmentTimestampMs = epoch, ts
	case cgTargetMemberKeyVersion:
		t, err := decodeCGTargetMember(r.Value)
		if err != nil {
			return fail(err)
		}
		g.target[k.member] = t
	case cgCurrentAssignmentKeyVersion:
		c, err := decodeCGCurrentAssignment(r.Value)
		if err != nil {
			return fail(err)
		}
		m := member()
		m.epoch, m.previousEpoch = c.epoch, c.previousEpoch
		m.state = c.state
		switch m.state {
		case memberStable, memberUnrevokedPartitions, memberUnreleasedPartitions:
		default:
			m.state = memberUnknownState
		}
		m.assigned, m.revoking = c.assigned, c.revoking
		g.updateMember(m)
	case cgRegexKeyVersion:
		res, err := decodeCGRegex(r.Value)
		if err != nil {
			return fail(err)
		}
		g.regexes[k.regex] = res
	}
	return nil
}

func replayConsumerTombstone(lp *loadedPartition, partition int32, g *consumerGroup, version int16, k cgKey, nowMs int64) {
	switch version {
	case cgMetadataKeyVersion:
		delete(lp.consumers, k.group)
		if len(g.offsets) > 0 {
			// The offsets outlive the group until their own tombstones.
			c := newClassicGroup(k.group, partition, nowMs)
			c.offsetStore = g.offsetStore
			lp.classic[k.group] = c
		}
	case cgPartitionMetadataKeyVersion:
		g.subscription = map[string]topicMeta{}
	case cgMemberMetadataKeyVersion:
		g.removeMember(k.member)
	case cgTargetMetadataKeyVersion:
		g.assignmentEpoch = -1
	case cgTargetMemberKeyVersion:
		delete(g.target, k.member)
	case cgCurrentAssignmentKeyVersion:
		if m := g.members[k.member]; m != nil {
			m = m.clone()
			m.epoch, m.previousEpoch = leaveEpoch, leaveEpoch
			m.assigned, m.revoking = tpSet{}, tpSet{}
			g.updateMember(m)
		}
	case cgRegexKeyVersion:
		delete(g.regexes, k.regex)
	}
}

// consumerGroupLoaded starts the timers of a loaded consumer group, as
// Kafka's onLoaded: every member gets a fresh session, and members that
// were revoking partitions a fresh rebalance timeout. Subscriptions are
// checked against the current topics on the next heartbeat.
func (m *machine) consumerGroupLoaded(g *consumerGroup) {
	g.refresh = true
	for _, id := range g.sortedMemberIDs() {
		mem := g.members[id]
		m.scheduleConsumerSession(g, id)
		if mem.state == memberUnrevokedPartitions {
			m.scheduleConsumerRebalance(g, mem)
		}
	}
}

// normalizeTopics sorts topic names and drops duplicates, so that the same
// subscription in another order is no change.
func normalizeTopics(ts []string) []string {
	out := slices.Clone(ts)
	slices.Sort(out)
	return slices.Compact(out)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
