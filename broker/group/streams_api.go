package group

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// StreamsGroupHeartbeat handles StreamsGroupHeartbeat v0-v1 (KIP-1071):
// joining with the topology (member epoch 0), heartbeating with the
// current epoch and owned tasks, and leaving (-1). The answer comes once
// the records the heartbeat caused are durable; it names the internal
// topics the broker must create when some are missing.
func (c *Coordinator) StreamsGroupHeartbeat(ctx context.Context, client ClientInfo, req *kmsg.StreamsGroupHeartbeatRequest) Pending[StreamsHeartbeatResult] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(StreamsHeartbeatResult)) {
		m.streamsGroupHeartbeat(client, req, reply)
	}, func(code int16) StreamsHeartbeatResult {
		r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		r.ErrorCode = code
		return StreamsHeartbeatResult{Response: r}
	})
	return coord.Then(p, func(r StreamsHeartbeatResult) StreamsHeartbeatResult {
		r.Response.Version = req.Version
		return r
	})
}

// StreamsGroupDescribe handles StreamsGroupDescribe v0-v1 for the given
// group ids, answering in their order. Other groups and unknown ids answer
// GROUP_ID_NOT_FOUND. Topology descriptions (KIP-1331, v1) are never
// stored: the status says NOT_REQUESTED or NOT_STORED.
func (c *Coordinator) StreamsGroupDescribe(ctx context.Context, groups []string, version int16, includeTopologyDescription bool) Pending[[]kmsg.StreamsGroupDescribeResponseGroup] {
	out := make([]kmsg.StreamsGroupDescribeResponseGroup, len(groups))
	wait := c.perShard(groups, func(s *shard, idx []int) func() {
		ids := pick(groups, idx)
		p := coord.Submit(c.rt, ctx, s, func(m *machine, reply func([]kmsg.StreamsGroupDescribeResponseGroup)) {
			res := make([]kmsg.StreamsGroupDescribeResponseGroup, len(ids))
			for i, id := range ids {
				res[i] = m.streamsGroupDescribe(id, version, includeTopologyDescription)
			}
			reply(res)
		}, func(code int16) []kmsg.StreamsGroupDescribeResponseGroup {
			res := make([]kmsg.StreamsGroupDescribeResponseGroup, len(ids))
			for i, id := range ids {
				res[i] = kmsg.NewStreamsGroupDescribeResponseGroup()
				res[i].Group = id
				res[i].ErrorCode = code
			}
			return res
		})
		return func() {
			for i, d := range p() {
				out[idx[i]] = d
			}
		}
	})
	return func() []kmsg.StreamsGroupDescribeResponseGroup {
		wait()
		return out
	}
}

// Topology description statuses (StreamsGroupDescribe v1).
const (
	topologyDescriptionNotRequested int8 = 0
	topologyDescriptionNotStored    int8 = 1
)

// streamsGroupDescribe describes one group as Kafka's StreamsGroup.
// asDescribedGroup.
func (m *machine) streamsGroupDescribe(id string, version int16, includeDescription bool) kmsg.StreamsGroupDescribeResponseGroup {
	d := kmsg.NewStreamsGroupDescribeResponseGroup()
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
	g := p.streams[id]
	if g == nil {
		d.ErrorCode = errGroupIDNotFound
		msg := fmt.Sprintf("Group %s not found.", id)
		if p.groups[id] != nil || p.consumers[id] != nil {
			msg = fmt.Sprintf("Group %s is not a streams group.", id)
		}
		d.ErrorMessage = &msg
		return d
	}
	d.State = g.state().String()
	d.Epoch = g.epoch
	d.AssignmentEpoch = g.assignmentEpoch
	if version >= 1 {
		name := streamsAssignorName
		d.AssignorName = &name
		d.TopologyDescriptionStatus = topologyDescriptionNotRequested
		if includeDescription {
			d.TopologyDescriptionStatus = topologyDescriptionNotStored
		}
	}
	if g.topology != nil {
		t := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
		t.Epoch = g.topology.epoch
		// The subtopologies as configured (partition counts decided) once
		// the topics fit the topology, else as the members declared them,
		// as Kafka's asDescribedGroup; topics sorted by name.
		ready := g.configured != nil && g.configured.ready()
		infos := func(ts []streamsTopicInfo) []kmsg.TopicInfo {
			out := []kmsg.TopicInfo{}
			for _, it := range ts {
				ti := kmsg.NewTopicInfo()
				ti.Topic = it.name
				ti.NumPartitions = it.partitions
				if ti.NumPartitions == 0 && ready {
					ti.NumPartitions = g.configured.partitions[it.name]
				}
				ti.ReplicationFactor = it.rf
				ti.Configs = []kmsg.TopicInfoConfig{}
				for _, kv := range it.configs {
					c := kmsg.NewTopicInfoConfig()
					c.Key, c.Value = kv[0], kv[1]
					ti.Configs = append(ti.Configs, c)
				}
				out = append(out, ti)
			}
			slices.SortFunc(out, func(a, b kmsg.TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
			return out
		}
		sorted := func(ss []string) []string {
			out := slices.Clone(orEmpty(ss))
			slices.Sort(out)
			return out
		}
		t.Subtopologies = []kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology{}
		for _, s := range g.topology.subtopologies {
			ds := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
			ds.SubtopologyID = s.id
			ds.SourceTopics = sorted(s.sourceTopics)
			ds.RepartitionSinkTopics = sorted(s.repartitionSinkTopics)
			ds.StateChangelogTopics = infos(s.changelogTopics)
			ds.RepartitionSourceTopics = infos(s.repartitionSourceTopics)
			t.Subtopologies = append(t.Subtopologies, ds)
		}
		d.Topology = &t
	}
	assignment := func(t tasksTuple) kmsg.StreamsAssignment {
		a := kmsg.NewStreamsAssignment()
		a.ActiveTasks = responseTasks(t.active)
		a.StandbyTasks = responseTasks(t.standby)
		a.WarmupTasks = responseTasks(t.warmup)
		return a
	}
	offsets := func(ts []taskOffset) []kmsg.TaskOffset {
		out := []kmsg.TaskOffset{}
		for _, o := range ts {
			to := kmsg.NewTaskOffset()
			to.SubtopologyID, to.Partition, to.Offset = o.sub, o.partition, o.offset
			out = append(out, to)
		}
		return out
	}
	for _, mid := range sortedKeys(g.members) {
		mem := g.members[mid]
		dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		dm.MemberID = mem.id
		dm.MemberEpoch = mem.epoch
		dm.InstanceID = mem.instanceID
		dm.RackID = mem.rackID
		dm.ClientID = mem.clientID
		dm.ClientHost = mem.clientHost
		dm.TopologyEpoch = mem.topologyEpoch
		dm.ProcessID = mem.processID
		if mem.endpoint != nil {
			ep := kmsg.NewStreamsGroupDescribeResponseGroupMemberUserEndpoint()
			ep.Host, ep.Port = mem.endpoint.host, mem.endpoint.port
			dm.UserEndpoint = &ep
		}
		dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
		for _, k := range sortedKeys(mem.clientTags) {
			ct := kmsg.NewStreamsGroupDescribeResponseGroupMemberClientTag()
			ct.Key, ct.Value = k, mem.clientTags[k]
			dm.ClientTags = append(dm.ClientTags, ct)
		}
		dm.TaskOffsets = offsets(mem.taskOffsets)
		dm.TaskEndOffsets = offsets(mem.taskEndOffsets)
		dm.Assignment = assignment(mem.assigned)
		target, ok := g.target[mid]
		if !ok {
			target = emptyTasks()
		}
		dm.TargetAssignment = assignment(target)
		d.Members = append(d.Members, dm)
	}
	if d.Members == nil {
		d.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
	}
	return d
}

// validateStreamsOffsetCommit is StreamsGroup.validateOffsetCommit for
// OffsetCommit: a commit without member (epoch < 0) is allowed in an empty
// group; otherwise it must come from a member, with OffsetCommit v9 or
// later, at its current epoch or at an older one that the member's tasks
// allow (streamsCommitEpochOK).
func validateStreamsOffsetCommit(g *streamsGroup, req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && len(g.members) == 0 {
		return 0
	}
	mem := g.members[req.MemberID]
	switch {
	case mem == nil:
		return errUnknownMemberID
	case req.Version < 9:
		return errUnsupportedVersion
	case !streamsCommitEpochOK(g, mem, req.Generation, func(yield func(string, int32) bool) {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if !yield(t.Topic, p.Partition) {
					return
				}
			}
		}
	}):
		return errStaleMemberEpoch
	}
	return 0
}

// streamsCommitEpochOK is Kafka 4.4's check of a commit's member epoch:
// the member's current epoch commits anything and a newer one nothing;
// an older one (a commit sent before the member's last heartbeat moved
// its epoch) commits a partition only if it is read by an active task the
// member owns or is revoking and that task was assigned to it at or
// before that epoch. Any other partition fails the whole commit, as
// Kafka's CommitPartitionValidator does.
func streamsCommitEpochOK(g *streamsGroup, mem *streamsMember, epoch int32, partitions iter.Seq2[string, int32]) bool {
	if epoch == mem.epoch {
		return true
	}
	if epoch > mem.epoch || g.topology == nil {
		return false
	}
	for topic, p := range partitions {
		sub := g.topology.subtopologyReading(topic)
		if sub == "" {
			return false
		}
		assignedAt, ok := mem.activeEpochs[streamsTask{sub, p}]
		if !ok || epoch < assignedAt {
			return false
		}
	}
	return true
}

// validateStreamsTxnCommit is validateOffsetCommit for TxnOffsetCommit,
// which may come without member; a stale epoch answers
// ILLEGAL_GENERATION, as Kafka maps STALE_MEMBER_EPOCH for this API.
func validateStreamsTxnCommit(g *streamsGroup, req *kmsg.TxnOffsetCommitRequest) int16 {
	if req.Generation < 0 && len(g.members) == 0 {
		return 0
	}
	if req.Generation == -1 && req.MemberID == "" && req.InstanceID == nil {
		return 0
	}
	mem := g.members[req.MemberID]
	switch {
	case mem == nil:
		return errUnknownMemberID
	case !streamsCommitEpochOK(g, mem, req.Generation, func(yield func(string, int32) bool) {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if !yield(t.Topic, p.Partition) {
					return
				}
			}
		}
	}):
		return errIllegalGeneration
	}
	return 0
}

// validateStreamsOffsetFetch is StreamsGroup.validateOffsetFetch.
func validateStreamsOffsetFetch(g *streamsGroup, f *fetchMember) int16 {
	if f == nil || f.id == nil && f.epoch < 0 {
		return 0
	}
	id := ""
	if f.id != nil {
		id = *f.id
	}
	mem := g.members[id]
	switch {
	case mem == nil:
		return errUnknownMemberID
	case f.epoch != mem.epoch:
		return errStaleMemberEpoch
	}
	return 0
}
