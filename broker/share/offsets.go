package share

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// The share-group offsets admin requests (KIP-932): a share partition's
// start offset is the group's "offset" there; DescribeShareGroupOffsets
// reads it, AlterShareGroupOffsets resets it and DeleteShareGroupOffsets
// forgets a topic's state, the last two only for a group without members.

func (m *machine) topics() map[string]TopicInfo {
	if m.cfg.Topics == nil {
		return nil
	}
	return m.cfg.Topics.Topics()
}

// describeOffsets is one group of DescribeShareGroupOffsets: the start
// offset of each share partition asked for (-1 where the group has no
// state), or of every one the group has when topics is nil; with lag
// (v1), the records from the start offset to the high watermark not yet
// acknowledged or archived.
func (m *machine) describeOffsets(req kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = req.GroupID
	if code := m.owns(m.partitionOf(req.GroupID)); code != 0 {
		out.ErrorCode = code
		return out
	}
	g := m.groups[req.GroupID]
	if g == nil || !g.known() {
		out.ErrorCode = errGroupIDNotFound
		msg := "Group " + req.GroupID + " not found."
		out.ErrorMessage = &msg
		return out
	}
	topics := m.topics()
	names := map[[16]byte]string{}
	for name, t := range topics {
		names[t.ID] = name
	}
	asked := req.Topics
	if asked == nil {
		byTopic := map[string][]int32{}
		for k := range g.durable {
			if name, ok := names[k.topic]; ok {
				byTopic[name] = append(byTopic[name], k.partition)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(byTopic)) {
			parts := byTopic[name]
			slices.Sort(parts)
			asked = append(asked, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: parts})
		}
	}
	for _, at := range asked {
		rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		rt.Topic = at.Topic
		t, known := topics[at.Topic]
		rt.TopicID = t.ID
		for _, p := range at.Partitions {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
			switch v := g.durable[partKey{t.ID, p}]; {
			case !known || p < 0 || p >= t.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case v != nil:
				rp.StartOffset, rp.LeaderEpoch = v.StartOffset, v.LeaderEpoch
				rp.Lag = m.lag(at.Topic, p, v)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// lag is KIP-1226's lag of a share partition, from its durable state: the
// records between the start offset and the high watermark whose delivery
// is not complete. It is -1 where this node does not lead the partition.
func (m *machine) lag(topic string, partition int32, v *snapshotValue) int64 {
	if m.cfg.Offsets == nil {
		return -1
	}
	_, hw, ok := m.cfg.Offsets(topic, partition)
	if !ok {
		return -1
	}
	done := int64(0)
	for _, b := range v.Batches {
		if b.State != stateAcknowledged && b.State != stateArchived {
			continue
		}
		first, last := max(b.First, v.StartOffset), min(b.Last, hw-1)
		if last >= first {
			done += last - first + 1
		}
	}
	return max(hw-v.StartOffset-done, 0)
}

// alterOffsets is AlterShareGroupOffsets: each partition named starts over
// at the offset given, with nothing in flight. A group with members
// answers NON_EMPTY_GROUP; an unknown group is created, as Kafka.
func (m *machine) alterOffsets(req *kmsg.AlterShareGroupOffsetsRequest, reply func(*kmsg.AlterShareGroupOffsetsResponse)) {
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	if req.GroupID == "" {
		resp.ErrorCode = errInvalidRequest
		reply(resp)
		return
	}
	if code := m.owns(m.partitionOf(req.GroupID)); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	g := m.groups[req.GroupID]
	if g != nil && len(g.members) > 0 {
		resp.ErrorCode = errNonEmptyGroup
		msg := "The group has active members."
		resp.ErrorMessage = &msg
		reply(resp)
		return
	}
	if g == nil {
		g = m.newGroup(req.GroupID)
	}
	g.exists = true
	topics := m.topics()
	var changed []partKey
	now := m.clock.Now().UnixMilli()
	for _, at := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = at.Topic
		t, known := topics[at.Topic]
		rt.TopicID = t.ID
		for _, p := range at.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !known || p.Partition < 0 || p.Partition >= t.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < 0:
				rp.ErrorCode = errInvalidRequest
			default:
				// A new state epoch, as Kafka's group coordinator
				// initializes the share partition again: a leader
				// serving it from before is fenced at its next write.
				k := partKey{t.ID, p.Partition}
				v := &snapshotValue{LeaderEpoch: -1, StartOffset: p.StartOffset, CreateTimestamp: now}
				if old := g.durable[k]; old != nil {
					v.StateEpoch, v.SnapshotEpoch, v.LeaderEpoch = old.StateEpoch+1, old.SnapshotEpoch, old.LeaderEpoch
				}
				g.durable[k] = v
				m.dropLocal(g, k)
				changed = append(changed, k)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(changed) == 0 {
		reply(resp)
		return
	}
	m.appendDurable(g, changed, func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	})
}

// deleteOffsets is DeleteShareGroupOffsets: the group forgets its state of
// every partition of the topics named.
func (m *machine) deleteOffsets(req *kmsg.DeleteShareGroupOffsetsRequest, reply func(*kmsg.DeleteShareGroupOffsetsResponse)) {
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	if code := m.owns(m.partitionOf(req.GroupID)); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	g := m.groups[req.GroupID]
	switch {
	case g == nil || !g.known():
		resp.ErrorCode = errGroupIDNotFound
		reply(resp)
		return
	case len(g.members) > 0:
		resp.ErrorCode = errNonEmptyGroup
		reply(resp)
		return
	}
	topics := m.topics()
	var changed []partKey
	for _, at := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = at.Topic
		t, known := topics[at.Topic]
		if !known {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		for k := range g.durable {
			if k.topic == t.ID {
				delete(g.durable, k)
				m.dropLocal(g, k)
				changed = append(changed, k)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(changed) == 0 {
		reply(resp)
		return
	}
	m.appendDurable(g, changed, func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	})
}

// DescribeOffsets handles DescribeShareGroupOffsets.
func (c *Coordinator) DescribeOffsets(ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	waits := make([]coord.Pending[kmsg.DescribeShareGroupOffsetsResponseGroup], len(req.Groups))
	for i, rg := range req.Groups {
		waits[i] = coord.Submit(c.rt, ctx, c.rt.ShardFor(rg.GroupID), func(m *machine, reply func(kmsg.DescribeShareGroupOffsetsResponseGroup)) {
			reply(m.describeOffsets(rg))
		}, func(code int16) kmsg.DescribeShareGroupOffsetsResponseGroup {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, code
			return g
		})
	}
	resp := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
	resp.Version = req.Version
	for _, w := range waits {
		resp.Groups = append(resp.Groups, w())
	}
	return resp
}

// AlterOffsets handles AlterShareGroupOffsets.
func (c *Coordinator) AlterOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := coord.Call(c.rt, ctx, c.rt.ShardFor(req.GroupID), func(m *machine, reply func(*kmsg.AlterShareGroupOffsetsResponse)) {
		m.alterOffsets(req, reply)
	}, func(code int16) *kmsg.AlterShareGroupOffsetsResponse {
		r := kmsg.NewPtrAlterShareGroupOffsetsResponse()
		r.ErrorCode = code
		return r
	})
	resp.Version = req.Version
	return resp
}

// DeleteOffsets handles DeleteShareGroupOffsets.
func (c *Coordinator) DeleteOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := coord.Call(c.rt, ctx, c.rt.ShardFor(req.GroupID), func(m *machine, reply func(*kmsg.DeleteShareGroupOffsetsResponse)) {
		m.deleteOffsets(req, reply)
	}, func(code int16) *kmsg.DeleteShareGroupOffsetsResponse {
		r := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
		r.ErrorCode = code
		return r
	})
	resp.Version = req.Version
	return resp
}
