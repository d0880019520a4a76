package group

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// ConsumerGroupHeartbeat handles ConsumerGroupHeartbeat v0-v1, the KIP-848
// consumer group protocol: joining (member epoch 0), heartbeating with the
// current epoch and owned partitions, and leaving (-1, or -2 for a static
// member that will come back). The answer comes once the records the
// heartbeat caused are durable.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, client ClientInfo, req *kmsg.ConsumerGroupHeartbeatRequest) Pending[*kmsg.ConsumerGroupHeartbeatResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
		m.consumerGroupHeartbeat(client, req, reply)
	}, func(code int16) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode = code
		return r
	})
	return coord.Then(p, func(r *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
		r.Version = req.Version
		return r
	})
}

// ConsumerGroupDescribe handles ConsumerGroupDescribe v0-v1, answering in
// request order. Classic groups and unknown ids answer GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) Pending[*kmsg.ConsumerGroupDescribeResponse] {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = req.Version
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	wait := c.perShard(req.Groups, func(s *shard, idx []int) func() {
		ids := pick(req.Groups, idx)
		p := coord.Submit(c.rt, ctx, s, func(m *machine, reply func([]kmsg.ConsumerGroupDescribeResponseGroup)) {
			out := make([]kmsg.ConsumerGroupDescribeResponseGroup, len(ids))
			for i, id := range ids {
				out[i] = m.consumerGroupDescribe(id, req.Version)
			}
			reply(out)
		}, func(code int16) []kmsg.ConsumerGroupDescribeResponseGroup {
			out := make([]kmsg.ConsumerGroupDescribeResponseGroup, len(ids))
			for i, id := range ids {
				out[i] = kmsg.NewConsumerGroupDescribeResponseGroup()
				out[i].Group = id
				out[i].ErrorCode = code
			}
			return out
		})
		return func() {
			for i, d := range p() {
				if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
					d.AuthorizedOperations = groupOpsAll
				}
				resp.Groups[idx[i]] = d
			}
		}
	})
	return func() *kmsg.ConsumerGroupDescribeResponse {
		wait()
		return resp
	}
}

// TopicsChanged tells the coordinator that the broker's topics changed
// (created, deleted, repartitioned). Each shard takes a new snapshot of
// Config.Topics when it next needs one (the view shares one between
// them); consumer groups rebalance on their next heartbeat if what they
// subscribe to changed. It returns once every shard knows of the change.
func (c *Coordinator) TopicsChanged() {
	c.rt.Each((*machine).topicsChanged)
}

// consumerGroupDescribe describes one group as Kafka's ConsumerGroup.
// asDescribedGroup.
func (m *machine) consumerGroupDescribe(id string, version int16) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = id
	if id == "" {
		d.ErrorCode = errInvalidGroupID
		return d
	}
	p, code := m.partitionOf(id)
	if code != 0 {
		d.ErrorCode = code
		return d
	}
	g := p.consumers[id]
	if g == nil {
		d.ErrorCode = errGroupIDNotFound
		msg := fmt.Sprintf("Group %s not found.", id)
		if p.groups[id] != nil {
			msg = fmt.Sprintf("Group %s is not a consumer group.", id)
		}
		d.ErrorMessage = &msg
		return d
	}
	d.State = g.state().String()
	d.Epoch = g.epoch
	d.AssignmentEpoch = g.assignmentEpoch
	d.AssignorName = g.preferredAssignor(nil, nil)
	if d.AssignorName == "" {
		d.AssignorName = m.cfg.ConsumerGroupAssignors[0]
	}
	for _, mid := range g.sortedMemberIDs() {
		mem := g.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = mem.id
		dm.InstanceID = mem.instanceID
		dm.RackID = mem.rackID
		dm.MemberEpoch = mem.epoch
		dm.ClientID = mem.clientID
		dm.ClientHost = mem.clientHost
		dm.SubscribedTopics = slices.Clone(mem.topicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = optString(mem.regex)
		dm.Assignment = m.describeAssignment(mem.assigned)
		dm.TargetAssignment = m.describeAssignment(g.target[mid])
		if version >= 1 {
			dm.MemberType = 1 // a consumer protocol member
			if mem.usesClassicProtocol() {
				dm.MemberType = 0
			}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// describeAssignment names a set's topics; topics that no longer exist are
// left out, as Kafka does.
func (m *machine) describeAssignment(s tpSet) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range s.topics() {
		name, ok := m.topicsByID()[[16]byte(id)]
		if !ok {
			continue
		}
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID = id
		t.Topic = name
		t.Partitions = slices.Clone(s[id])
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	return a
}
