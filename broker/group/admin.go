package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is group administration: ListGroups, DescribeGroups and
// DeleteGroups, each answered per shard and merged by the Coordinator.

// classicGroupType is the group type ListGroups v5 reports.
const classicGroupType = "classic"

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
		d.State = stateDead.String()
		if version >= 6 {
			d.ErrorCode = errGroupIDNotFound
			msg := fmt.Sprintf("Group %s not found.", id)
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
		// Commits still in flight get a tombstone too, or they would
		// outlive the group in the log.
		seen := make(map[tp]bool, len(g.offsets)+len(g.inflight))
		for _, k := range sortedTPs(g.offsets) {
			seen[k] = true
			recs = append(recs, offsetTombstone(id, k))
		}
		for k := range g.inflight {
			if !seen[k] {
				recs = append(recs, offsetTombstone(id, k))
			}
		}
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
		m.fx.append(p, byPartition[p], func(err error) {
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
