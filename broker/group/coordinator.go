package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Coordinator is the group coordinator of one broker. It serves the groups
// of the __consumer_offsets partitions loaded into it. Its methods block the
// calling goroutine until the answer is ready (a JoinGroup may wait for a
// whole rebalance) and never block the shards; when ctx ends first they
// answer COORDINATOR_NOT_AVAILABLE, and once Close has begun NOT_COORDINATOR.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	rt    *coord.Runtime[timerKey, *machine]
}

// New starts a coordinator with cfg's shards. It serves no group until Load.
func New(cfg Config, store Store, clock Clock) (*Coordinator, error) {
	return newCoordinator(cfg, store, clock, randomUUID)
}

func newCoordinator(cfg Config, store Store, clock Clock, newID func() string) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("group coordinator config: %w", err)
	}
	if store == nil || clock == nil {
		return nil, fmt.Errorf("group coordinator needs a store and a clock")
	}
	log := coord.Logger(cfg.Logger, "group-coordinator")
	c := &Coordinator{cfg: cfg, log: log, clock: clock}
	rtCfg := coord.Config{
		Name:       "group coordinator",
		Topic:      "__consumer_offsets",
		Partitions: cfg.OffsetsTopicPartitions,
		Shards:     cfg.Shards,
		Store:      store,
		Clock:      clock,
		Log:        log,
	}
	c.rt = coord.NewRuntime(rtCfg, func(s *shard) *machine {
		return newMachine(cfg, log, clock, shardEffects{s, store}, newID)
	})
	c.rt.Start((*machine).start)
	return c, nil
}

// randomUUID returns a random (version 4) UUID in its canonical form, as
// Java's UUID.randomUUID().toString(), which Kafka puts in member ids.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Close stops every shard, its timers and its appends, and answers the
// requests still waiting with NOT_COORDINATOR.
func (c *Coordinator) Close() { c.rt.Close() }

// PartitionFor returns the __consumer_offsets partition of a group under
// this coordinator's offsets.topic.num.partitions.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return c.rt.PartitionFor(groupID)
}

// Pending is an answer the coordinator owes (see coord.Pending): the
// request was queued on its shard before the method returned, so a
// connection's requests take effect in the order they came.
type Pending[T any] = coord.Pending[T]

// Load replays a __consumer_offsets partition the broker now leads and then
// serves its groups. Requests for its groups answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile. The records come in log order,
// those of transactional batches and the control records of markers
// included (see Record). Records are decoded on the caller's goroutine; a
// record that does not decode fails the load and leaves the partition
// unserved.
func (c *Coordinator) Load(ctx context.Context, partition int32, records iter.Seq2[Record, error]) error {
	var loaded *loadedPartition
	n := 0
	err := c.rt.Load(ctx, partition, coord.LoadSteps[*machine]{
		Begin: func(m *machine) uint64 { return m.beginLoad(partition) },
		Replay: func() (err error) {
			loaded, err = replay(partition, records, c.clock.Now().UnixMilli(), c.log)
			if err == nil {
				// Count before handing the maps over: from then on the
				// shard owns them.
				n = len(loaded.classic) + len(loaded.consumers)
			}
			return err
		},
		Abort: func(m *machine, token uint64) { m.abortLoad(partition, token) },
		Finish: func(m *machine, token uint64) bool {
			return m.finishLoad(partition, token, loaded)
		},
	})
	if err != nil {
		return err
	}
	c.log.Debug("loaded __consumer_offsets partition", "partition", partition, "groups", n)
	return nil
}

// Unload stops serving a partition the broker no longer leads. Requests
// parked on its groups answer NOT_COORDINATOR.
func (c *Coordinator) Unload(partition int32) {
	c.rt.Unload(partition, func(m *machine) { m.unload(partition) })
}

// JoinGroup handles JoinGroup v0-v9. The answer may wait for the whole join
// phase of a rebalance.
func (c *Coordinator) JoinGroup(ctx context.Context, client ClientInfo, req *kmsg.JoinGroupRequest) Pending[*kmsg.JoinGroupResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.JoinGroupResponse)) {
		m.joinGroup(client, req, reply)
	}, func(code int16) *kmsg.JoinGroupResponse { return joinError(code, req.MemberID) })
	return coord.Then(p, func(r *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
		r.Version = req.Version
		return r
	})
}

// SyncGroup handles SyncGroup v0-v5. Followers wait for the leader's
// assignment; everyone's answer waits until the assignment is durable.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) Pending[*kmsg.SyncGroupResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.SyncGroupResponse)) {
		m.syncGroup(req, reply)
	}, syncError)
	return coord.Then(p, func(r *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
		r.Version = req.Version
		return r
	})
}

// Heartbeat handles Heartbeat v0-v4.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) Pending[*kmsg.HeartbeatResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(int16)) {
		reply(m.heartbeat(req))
	}, func(code int16) int16 { return code })
	return coord.Then(p, func(code int16) *kmsg.HeartbeatResponse {
		r := kmsg.NewPtrHeartbeatResponse()
		r.Version = req.Version
		r.ErrorCode = code
		return r
	})
}

// LeaveGroup handles LeaveGroup v0-v5: one member by id before v3, a batch
// of members (by id or group.instance.id) from v3.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) Pending[*kmsg.LeaveGroupResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.LeaveGroupResponse)) {
		m.leaveGroup(req, reply)
	}, func(code int16) *kmsg.LeaveGroupResponse {
		r := kmsg.NewPtrLeaveGroupResponse()
		r.ErrorCode = code
		return r
	})
	return coord.Then(p, func(r *kmsg.LeaveGroupResponse) *kmsg.LeaveGroupResponse {
		finishLeave(req, r)
		return r
	})
}

// finishLeave shapes a LeaveGroup answer for the request's version: before
// v3 there is one member and no member list, so its error moves to the top.
func finishLeave(req *kmsg.LeaveGroupRequest, r *kmsg.LeaveGroupResponse) {
	r.Version = req.Version
	if req.Version >= 3 {
		return
	}
	if r.ErrorCode == 0 {
		for _, mr := range r.Members {
			if mr.ErrorCode != 0 {
				r.ErrorCode = mr.ErrorCode
				break
			}
		}
	}
	r.Members = nil
}

// OffsetCommit handles OffsetCommit v0-v9 (v10 names topics by id, which the
// broker must resolve to names first). The answer comes once the offsets
// are durable. The broker answers UNKNOWN_TOPIC_OR_PARTITION for partitions
// that do not exist before calling this, as Kafka's KafkaApis does.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) Pending[*kmsg.OffsetCommitResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.OffsetCommitResponse)) {
		m.offsetCommit(req, reply)
	}, func(code int16) *kmsg.OffsetCommitResponse { return commitResponse(req, code) })
	return coord.Then(p, func(r *kmsg.OffsetCommitResponse) *kmsg.OffsetCommitResponse {
		r.Version = req.Version
		return r
	})
}

// OffsetFetch handles OffsetFetch v0-v9: one group before v8, a batch of
// groups from v8, each asked of its shard in parallel. Null topics (v2+)
// fetch every committed partition. A fetch reads after every commit
// submitted before it has completed.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) Pending[*kmsg.OffsetFetchResponse] {
	if req.Version < 8 {
		var topics []fetchTopic
		if req.Topics != nil {
			topics = make([]fetchTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
		}
		p := c.fetchGroups(ctx, []fetchQuery{{group: req.Group, topics: topics}}, req.RequireStable)
		return coord.Then(p, func(res []fetchResult) *kmsg.OffsetFetchResponse { return singleFetchResponse(req, topics, res[0]) })
	}
	queries := make([]fetchQuery, len(req.Groups))
	for i, g := range req.Groups {
		var topics []fetchTopic
		if g.Topics != nil {
			topics = make([]fetchTopic, 0, len(g.Topics))
			for _, t := range g.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
		}
		queries[i] = fetchQuery{group: g.Group, topics: topics}
		if req.Version >= 9 {
			queries[i].member = &fetchMember{id: g.MemberID, epoch: g.MemberEpoch}
		}
	}
	p := c.fetchGroups(ctx, queries, req.RequireStable)
	return coord.Then(p, func(results []fetchResult) *kmsg.OffsetFetchResponse {
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.Version = req.Version
		for i, res := range results {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = queries[i].group
			rg.ErrorCode = res.code
			rg.Topics = res.topics
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}

// singleFetchResponse is the answer of an OffsetFetch before v8, which asks
// of one group.
func singleFetchResponse(req *kmsg.OffsetFetchRequest, topics []fetchTopic, res fetchResult) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	resp.ErrorCode = res.code
	for _, t := range res.topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Version < 2 && res.code != 0 {
		// No top-level error before v2: every asked partition carries it.
		resp.Topics = nil
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, res.code
				md := ""
				rp.Metadata = &md
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

type fetchQuery struct {
	group  string
	topics []fetchTopic
	member *fetchMember // v9+
}

// fetchGroups asks every group's shard at once; the answers come in query
// order.
func (c *Coordinator) fetchGroups(ctx context.Context, qs []fetchQuery, requireStable bool) Pending[[]fetchResult] {
	waits := make([]Pending[fetchResult], len(qs))
	for i, q := range qs {
		waits[i] = coord.Submit(c.rt, ctx, c.rt.ShardFor(q.group), func(m *machine, reply func(fetchResult)) {
			m.offsetFetch(q.group, q.topics, q.member, requireStable, reply)
		}, func(code int16) fetchResult { return fetchResult{code: code} })
	}
	return func() []fetchResult {
		out := make([]fetchResult, len(waits))
		for i, w := range waits {
			out[i] = w()
		}
		return out
	}
}

// OffsetDelete handles OffsetDelete v0.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) Pending[*kmsg.OffsetDeleteResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(*kmsg.OffsetDeleteResponse)) {
		m.offsetDelete(req, reply)
	}, func(code int16) *kmsg.OffsetDeleteResponse {
		r := kmsg.NewPtrOffsetDeleteResponse()
		r.ErrorCode = code
		return r
	})
	return coord.Then(p, func(r *kmsg.OffsetDeleteResponse) *kmsg.OffsetDeleteResponse {
		r.Version = req.Version
		return r
	})
}

// ListGroups handles ListGroups v0-v5 across every shard; the states (v4+)
// and types (v5+) filters are case-insensitive. Groups come sorted by id.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) Pending[*kmsg.ListGroupsResponse] {
	type listed struct {
		groups []kmsg.ListGroupsResponseGroup
		code   int16
	}
	waits := make([]Pending[listed], len(c.rt.Shards()))
	for i, s := range c.rt.Shards() {
		waits[i] = coord.Submit(c.rt, ctx, s, func(m *machine, reply func(listed)) {
			gs, code := m.listGroups(req.StatesFilter, req.TypesFilter)
			reply(listed{gs, code})
		}, func(code int16) listed { return listed{code: code} })
	}
	return func() *kmsg.ListGroupsResponse {
		resp := kmsg.NewPtrListGroupsResponse()
		resp.Version = req.Version
		for _, w := range waits {
			r := w()
			if r.code != 0 && resp.ErrorCode == 0 {
				resp.ErrorCode = r.code
			}
			resp.Groups = append(resp.Groups, r.groups...)
		}
		if resp.ErrorCode != 0 {
			resp.Groups = nil
			return resp
		}
		slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
		return resp
	}
}

// DescribeGroups handles DescribeGroups v0-v6, answering in request order.
// With IncludeAuthorizedOperations (v3+) a group reports every group
// operation as allowed: the broker has no authorizer yet.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) Pending[*kmsg.DescribeGroupsResponse] {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	wait := c.perShard(req.Groups, func(s *shard, idx []int) func() {
		ids := pick(req.Groups, idx)
		p := coord.Submit(c.rt, ctx, s, func(m *machine, reply func([]kmsg.DescribeGroupsResponseGroup)) {
			out := make([]kmsg.DescribeGroupsResponseGroup, len(ids))
			for i, id := range ids {
				out[i] = m.describeGroup(id, req.Version)
			}
			reply(out)
		}, func(code int16) []kmsg.DescribeGroupsResponseGroup {
			out := make([]kmsg.DescribeGroupsResponseGroup, len(ids))
			for i, id := range ids {
				out[i] = kmsg.NewDescribeGroupsResponseGroup()
				out[i].Group = id
				out[i].ErrorCode = code
			}
			return out
		})
		return func() {
			for i, d := range p() {
				if req.Version >= 3 && req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
					d.AuthorizedOperations = groupOpsAll
				}
				resp.Groups[idx[i]] = d
			}
		}
	})
	return func() *kmsg.DescribeGroupsResponse {
		wait()
		return resp
	}
}

// DeleteGroups handles DeleteGroups v0-v3: empty groups are deleted with
// their offsets; the answer waits until the tombstones are durable.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) Pending[*kmsg.DeleteGroupsResponse] {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	wait := c.perShard(req.Groups, func(s *shard, idx []int) func() {
		ids := pick(req.Groups, idx)
		p := coord.Submit(c.rt, ctx, s, func(m *machine, reply func([]kmsg.DeleteGroupsResponseGroup)) {
			m.deleteGroups(ids, reply)
		}, func(code int16) []kmsg.DeleteGroupsResponseGroup {
			out := make([]kmsg.DeleteGroupsResponseGroup, len(ids))
			for i, id := range ids {
				out[i] = kmsg.NewDeleteGroupsResponseGroup()
				out[i].Group = id
				out[i].ErrorCode = code
			}
			return out
		})
		return func() {
			for i, r := range p() {
				resp.Groups[idx[i]] = r
			}
		}
	})
	return func() *kmsg.DeleteGroupsResponse {
		wait()
		return resp
	}
}

// perShard splits group ids by shard and calls submit for each shard, in
// the order of each shard's first group, with the indexes of its groups;
// submit queues the shard's work and returns the wait for it. perShard
// returns the wait for all of them.
func (c *Coordinator) perShard(groups []string, submit func(s *shard, idx []int) func()) func() {
	byShard := make(map[*shard][]int)
	var order []*shard
	for i, g := range groups {
		s := c.rt.ShardFor(g)
		if byShard[s] == nil {
			order = append(order, s)
		}
		byShard[s] = append(byShard[s], i)
	}
	waits := make([]func(), 0, len(order))
	for _, s := range order {
		waits = append(waits, submit(s, byShard[s]))
	}
	return func() {
		for _, w := range waits {
			w()
		}
	}
}

func pick(ids []string, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = ids[j]
	}
	return out
}
