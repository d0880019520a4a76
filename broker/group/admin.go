package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is group administration: ListGroups, DescribeGroups and
// DeleteGroups, each answered per shard and merged by the Coordinator.

// The group types ListGroups v5 reports.
const (
	classicGroupType  = "classic"
	consumerGroupType = "consumer"
	streamsGroupType  = "streams"
)

// groupOpsAll is the authorized operations bit field of a group when no
// authorizer restricts it, Kafka 4's supported group operations: READ (3),
// DELETE (6), DESCRIBE (8), DESCRIBE_CONFIGS (10) and ALTER_CONFIGS (11).
const groupOpsAll = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// listGroups lists the groups of the machine's loaded partitions that pass
// the filters (case-insensitive; empty filters pass everything). A partition
// still loading fails the whole list, as in Kafka.
func (m *machine) listGroups(states, types []string) ([]kmsg.ListGroupsResponseGroup, int16) {
	if m.anyLoading() {
		return nil, errCoordinatorLoadInProgress
	}
	wantState := make(map[string]bool, len(states))
	for _, s := range states {
		wantState[strings.ToLower(strings.TrimSpace(s))] = true
	}
	wantType := make(map[string]bool, len(types))
	for _, t := range types {
		wantType[strings.ToLower(strings.TrimSpace(t))] = true
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, p := range m.partitions {
		for _, g := range p.groups {
			if len(wantState) > 0 && !wantState[strings.ToLower(g.state.String())] {
				continue
			}
			if len(wantType) > 0 && !wantType[classicGroupType] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = g.protocolType
			lg.GroupState = g.state.String()
			lg.GroupType = classicGroupType
			out = append(out, lg)
		}
		for _, g := range p.consumers {
			state := g.state().String()
			if len(wantState) > 0 && !wantState[strings.ToLower(state)] {
				continue
			}
			if len(wantType) > 0 && !wantType[consumerGroupType] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = consumerProtocolType
			lg.GroupState = state
			lg.GroupType = consumerGroupType
			out = append(out, lg)
		}
		for _, g := range p.streams {
			state := g.state().String()
			if len(wantState) > 0 && !wantState[strings.ToLower(state)] {
				continue
			}
			if len(wantType) > 0 && !wantType[streamsGroupType] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = streamsGroupType
			lg.GroupState = state
			lg.GroupType = streamsGroupType
			out = append(out, lg)
		}
	}
	return out, 0
}

// describeGroup describes one group for DescribeGroups of the given version.
// Only a stable group shows its protocol and member metadata.
func (m *machine) describeGroup(id string, version int16) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	p, code := m.partitionOf(id)
	if code != 0 {
		d.ErrorCode = code
		return d
	}
	g := p.groups[id]
	if g == nil {
		// A consumer group, classic members inside it or not, is no
		// classic group: Kafka 4's describeGroups looks up classic groups
		// only and describes it as a missing one, with its own message
		// from v6. Tools read it with ConsumerGroupDescribe (Kafka's
		// Admin tries that first and falls back to DescribeGroups on
		// GROUP_ID_NOT_FOUND); describing it here in classic form would
		// answer what Kafka does not.
		d.State = stateDead.String()
		if version >= 6 {
			d.ErrorCode = errGroupIDNotFound
			msg := fmt.Sprintf("Group %s not found.", id)
			if p.consumers[id] != nil || p.streams[id] != nil {
				msg = fmt.Sprintf("Group %s is not a classic group.", id)
			}
			d.ErrorMessage = &msg
		}
		return d
	}
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	stable := g.is(stateStable) && g.protocolName != nil
	if stable {
		d.Protocol = *g.protocolName
	}
	for _, mid := range g.order {
		mem := g.members[mid]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = mem.id
		dm.InstanceID = mem.instanceID
		dm.ClientID = mem.clientID
		dm.ClientHost = mem.clientHost
		dm.ProtocolMetadata = []byte{}
		if stable {
			dm.ProtocolMetadata = mem.metadata(*g.protocolName)
		}
		dm.MemberAssignment = mem.assignment
		if dm.MemberAssignment == nil {
			dm.MemberAssignment = []byte{}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// deleteGroups deletes empty groups with their offsets and answers, in the
// order asked, once the tombstones are durable.
func (m *machine) deleteGroups(ids []string, reply func([]kmsg.DeleteGroupsResponseGroup)) {
	results := make([]kmsg.DeleteGroupsResponseGroup, len(ids))
	byPartition := make(map[int32][]Record)
	members := make(map[int32][]int) // partition -> indexes into results
	for i, id := range ids {
		results[i] = kmsg.NewDeleteGroupsResponseGroup()
		results[i].Group = id
		p, code := m.partitionOf(id)
		if code != 0 {
			results[i].ErrorCode = code
			continue
		}
		if cg := p.consumers[id]; cg != nil {
			if cg.state() != cgEmpty {
				results[i].ErrorCode = errNonEmptyGroup
				continue
			}
			recs := byPartition[p.id]
			recs = append(recs, offsetsTombstones(id, &cg.offsetStore, p.txns)...)
			recs = append(recs, consumerTombstones(cg)...)
			byPartition[p.id] = recs
			members[p.id] = append(members[p.id], i)
			m.deleteConsumerGroup(p, cg)
			continue
		}
		if sg := p.streams[id]; sg != nil {
			if sg.state() != sgEmpty {
				results[i].ErrorCode = errNonEmptyGroup
				continue
			}
			recs := byPartition[p.id]
			recs = append(recs, offsetsTombstones(id, &sg.offsetStore, p.txns)...)
			recs = append(recs, streamsTombstones(sg)...)
			byPartition[p.id] = recs
			members[p.id] = append(members[p.id], i)
			m.deleteStreamsGroup(p, sg)
			continue
		}
		g := p.groups[id]
		switch {
		case g == nil || g.is(stateDead):
			results[i].ErrorCode = errGroupIDNotFound
			continue
		case !g.is(stateEmpty):
			results[i].ErrorCode = errNonEmptyGroup
			continue
		}
		recs := byPartition[p.id]
		recs = append(recs, offsetsTombstones(id, &g.offsetStore, p.txns)...)
		recs = append(recs, groupTombstone(id))
		byPartition[p.id] = recs
		members[p.id] = append(members[p.id], i)
		m.deleteGroup(p, g)
	}
	if len(byPartition) == 0 {
		reply(results)
		return
	}
	left := len(byPartition)
	partitions := make([]int32, 0, len(byPartition))
	for p := range byPartition {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	for _, p := range partitions {
		idx := members[p]
		m.fx.Append(p, byPartition[p], func(err error) {
			if code := appendErrorCode(err); code != 0 {
				for _, i := range idx {
					results[i].ErrorCode = code
				}
			}
			left--
			if left == 0 {
				reply(results)
			}
		})
	}
}

// offsetsTombstones deletes every offset of a group, commits still in
// flight and offsets pending in open transactions included, or they would
// outlive the group in the log, as Kafka's deleteAllOffsets. The commits in
// flight are forgotten: the tombstones follow them in the log.
func offsetsTombstones(group string, s *offsetStore, txns *txnOffsets) []Record {
	var recs []Record
	seen := make(map[tp]bool, len(s.offsets)+len(s.inflight))
	for _, k := range sortedTPs(s.offsets) {
		seen[k] = true
		recs = append(recs, offsetTombstone(group, k))
	}
	pending := txns.pendingOf(group)
	for k := range s.inflight {
		pending[k] = offsetValue{}
	}
	for _, k := range sortedTPs(pending) {
		if !seen[k] {
			recs = append(recs, offsetTombstone(group, k))
		}
	}
	clear(s.inflight)
	txns.removeGroup(group)
	return recs
}
