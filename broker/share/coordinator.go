package share

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// StateTopic is the internal topic of share-partition state.
const StateTopic = "__share_group_state"

// Coordinator is the share coordinator of one broker: it serves the share
// groups of the __share_group_state partitions loaded into it. Its
// methods queue their work on the group's shard and return the pending
// answer; when ctx ends first they answer COORDINATOR_NOT_AVAILABLE, and
// once Close has begun NOT_COORDINATOR.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	clock coord.Clock
	rt    *coord.Runtime[timerKey, *machine]
}

// New starts a coordinator; it serves no group until Load.
func New(cfg Config, store coord.Store, clock coord.Clock) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("share coordinator config: %w", err)
	}
	if store == nil || clock == nil {
		return nil, fmt.Errorf("share coordinator needs a store and a clock")
	}
	log := coord.Logger(cfg.Logger, "share-coordinator")
	c := &Coordinator{cfg: cfg, log: log, clock: clock}
	c.rt = coord.NewRuntime(coord.Config{
		Name: "share coordinator", Topic: StateTopic, Partitions: cfg.StatePartitions,
		Shards: cfg.Shards, Store: store, Clock: clock, Log: log,
	}, func(s *shard) *machine { return newMachine(cfg, log, clock, s) })
	c.rt.Start(func(*machine) {})
	return c, nil
}

// Close stops the shards and answers waiting requests NOT_COORDINATOR.
func (c *Coordinator) Close() { c.rt.Close() }

// PartitionFor is the __share_group_state partition of a group.
func (c *Coordinator) PartitionFor(group string) int32 { return c.rt.PartitionFor(group) }

// Load replays a __share_group_state partition the broker now leads and
// then serves its groups.
func (c *Coordinator) Load(ctx context.Context, partition int32, records iter.Seq2[Record, error]) error {
	var loaded map[string]*groupState
	return c.rt.Load(ctx, partition, coord.LoadSteps[*machine]{
		Begin: func(m *machine) uint64 {
			m.tokens++
			m.loading[partition] = m.tokens
			delete(m.loaded, partition)
			return m.tokens
		},
		Replay: func() (err error) {
			loaded, err = replay(partition, records, c.log)
			return err
		},
		Abort: func(m *machine, token uint64) {
			if m.loading[partition] == token {
				delete(m.loading, partition)
			}
		},
		Finish: func(m *machine, token uint64) bool {
			if m.loading[partition] != token {
				return false
			}
			delete(m.loading, partition)
			m.loaded[partition] = true
			for id, g := range loaded {
				if cur := m.groups[id]; cur != nil {
					// The share partitions this node leads stay as they
					// are; the group's durable state and membership come
					// from the log.
					cur.durable, cur.exists = g.durable, true
					cur.epoch, cur.members, cur.target = g.epoch, g.members, g.target
					cur.assignmentEpoch, cur.assignmentTimestampMs = g.assignmentEpoch, g.assignmentTimestampMs
					g = cur
				} else {
					m.groups[id] = g
				}
				// Every member loaded gets a full session from now, as
				// Kafka's coordinator schedules them when it loads.
				for _, mem := range g.members {
					m.scheduleSession(g, mem)
				}
			}
			return true
		},
	})
}

// Unload stops serving a partition the broker no longer leads: the
// membership and durable state of its groups are forgotten here (the new
// leader replays them); the share partitions this node leads, and the
// share sessions reading them, stay.
func (c *Coordinator) Unload(partition int32) {
	c.rt.Unload(partition, func(m *machine) {
		delete(m.loaded, partition)
		delete(m.loading, partition)
		for id, g := range m.groups {
			if g.partition != partition {
				continue
			}
			for mid := range g.members {
				m.s.Cancel(timerKey{kind: timerMember, group: id, member: mid})
			}
			g.members, g.target, g.epoch = map[string]*member{}, map[string]assignment{}, 0
			g.assignmentEpoch, g.assignmentTimestampMs = 0, 0
			g.durable, g.exists = map[partKey]*snapshotValue{}, false
			g.unloads, g.deferred = g.unloads+1, nil
			if len(g.parts) == 0 && len(g.sessions) == 0 {
				delete(m.groups, id)
			}
		}
	})
}

// Heartbeat handles ShareGroupHeartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, client ClientInfo, req *kmsg.ShareGroupHeartbeatRequest) coord.Pending[*kmsg.ShareGroupHeartbeatResponse] {
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.GroupID), func(m *machine, reply func(*kmsg.ShareGroupHeartbeatResponse)) {
		u := m.capture(req.GroupID, req.MemberID)
		resp := m.heartbeat(client, req)
		// The answer waits for the membership records, as Kafka's
		// heartbeat waits for its records to be committed; when they
		// cannot be written the group is as it was before.
		m.commit(u, func(code int16) {
			if code != 0 && resp.ErrorCode == 0 {
				resp = kmsg.NewPtrShareGroupHeartbeatResponse()
				resp.ErrorCode = code
			}
			reply(resp)
		})
	}, func(code int16) *kmsg.ShareGroupHeartbeatResponse {
		r := kmsg.NewPtrShareGroupHeartbeatResponse()
		r.ErrorCode = code
		return r
	})
	return coord.Then(p, func(r *kmsg.ShareGroupHeartbeatResponse) *kmsg.ShareGroupHeartbeatResponse {
		r.Version = req.Version
		return r
	})
}

// Describe handles ShareGroupDescribe.
func (c *Coordinator) Describe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) coord.Pending[*kmsg.ShareGroupDescribeResponse] {
	waits := make([]coord.Pending[kmsg.ShareGroupDescribeResponseGroup], len(req.GroupIDs))
	for i, id := range req.GroupIDs {
		waits[i] = coord.Submit(c.rt, ctx, c.rt.ShardFor(id), func(m *machine, reply func(kmsg.ShareGroupDescribeResponseGroup)) {
			reply(m.describe(id))
		}, func(code int16) kmsg.ShareGroupDescribeResponseGroup {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, code
			return g
		})
	}
	return func() *kmsg.ShareGroupDescribeResponse {
		resp := kmsg.NewPtrShareGroupDescribeResponse()
		resp.Version = req.Version
		for _, w := range waits {
			g := w()
			if !req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = -2147483648
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
}

// ListGroups lists the share groups of every loaded partition.
func (c *Coordinator) ListGroups() []GroupListing {
	var out []GroupListing
	ch := make(chan []GroupListing, len(c.rt.Shards()))
	c.rt.Each(func(m *machine) { ch <- m.list() })
	close(ch)
	for l := range ch {
		out = append(out, l...)
	}
	return out
}

// IsShareGroup reports whether a share group of that id exists here.
func (c *Coordinator) IsShareGroup(ctx context.Context, group string) bool {
	return coord.Call(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(bool)) {
		g := m.groups[group]
		reply(g != nil && m.loaded[g.partition] && g.known())
	}, func(int16) bool { return false })
}

// DeleteGroup deletes an empty share group and its share-partition state;
// the answer is DeleteGroups' error code (GROUP_ID_NOT_FOUND when there is
// no such share group).
func (c *Coordinator) DeleteGroup(ctx context.Context, group string) coord.Pending[int16] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(int16)) {
		m.deleteGroup(group, reply)
	}, func(code int16) int16 { return code })
}

// StartFetch runs the first step of a ShareFetch (see FetchStart).
func (c *Coordinator) StartFetch(ctx context.Context, req FetchStart) FetchPlan {
	return coord.Call(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(FetchPlan)) {
		m.startFetch(req, reply)
	}, func(code int16) FetchPlan { return FetchPlan{ErrorCode: code} })
}

// PlanReads says again where to read the partitions of an earlier plan
// (a long-polling ShareFetch looks again after a wait); a partition that
// errored stays as it was.
func (c *Coordinator) PlanReads(ctx context.Context, group string, prev []PartitionRead) []PartitionRead {
	return coord.Call(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func([]PartitionRead)) {
		g := m.groups[group]
		if g == nil {
			reply(nil)
			return
		}
		out := make([]PartitionRead, len(prev))
		for i, rd := range prev {
			out[i] = rd
			if ps := g.parts[partKey{rd.Ref.TopicID, rd.Ref.Partition}]; rd.ErrorCode == 0 && ps != nil {
				out[i].Offset = ps.readFrom()
			}
		}
		reply(out)
	}, func(int16) []PartitionRead { return nil })
}

// Acquire runs the second step of a ShareFetch: it acquires for member
// the records read, at most maxRecords (exact: KIP-1206's record-limit
// mode). With nothing acquired it registers wake on the partitions for
// their next change, unless they changed already (Retry); Unwatch takes
// a registration back.
func (c *Coordinator) Acquire(ctx context.Context, group, member string, reads []PartitionBatches, maxRecords int, exact bool, wake chan struct{}) Acquisition {
	return coord.Call(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(Acquisition)) {
		reply(m.acquire(group, member, reads, maxRecords, exact, wake))
	}, func(int16) Acquisition { return Acquisition{} })
}

// Unwatch takes back a wait Acquire registered, without waiting for the
// shard.
func (c *Coordinator) Unwatch(ctx context.Context, group string, refs []PartitionRef, wake chan struct{}) {
	coord.Submit(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(struct{})) {
		m.unwatch(group, refs, wake)
		reply(struct{}{})
	}, func(int16) struct{} { return struct{}{} })
}

// Acknowledge handles a ShareAcknowledge; it answers the top-level code
// and the code of each partition acknowledged.
func (c *Coordinator) Acknowledge(ctx context.Context, req AckStart) (int16, map[PartitionRef]int16) {
	type result struct {
		code  int16
		codes map[PartitionRef]int16
	}
	r := coord.Call(c.rt, ctx, c.rt.ShardFor(req.Group), func(m *machine, reply func(result)) {
		m.acknowledge(req, func(code int16, codes map[PartitionRef]int16) { reply(result{code, codes}) })
	}, func(code int16) result { return result{code: code} })
	return r.code, r.codes
}

// PartitionInfo is a share partition's state, for tests and operators.
type PartitionInfo struct {
	Start, End int64
	// InFlight counts in-flight records by state name.
	InFlight map[string]int
}

// Partition returns the state of a group's share partition, if any.
func (c *Coordinator) Partition(ctx context.Context, group string, topicID [16]byte, partition int32) (PartitionInfo, bool) {
	type result struct {
		info PartitionInfo
		ok   bool
	}
	r := coord.Call(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(result)) {
		g := m.groups[group]
		if g == nil {
			reply(result{})
			return
		}
		ps := g.parts[partKey{topicID, partition}]
		if v := g.durable[partKey{topicID, partition}]; ps == nil && v != nil {
			ps = restore("", *v) // not served here now: its durable state
		}
		if ps == nil {
			reply(result{})
			return
		}
		info := PartitionInfo{Start: ps.start, End: ps.end, InFlight: map[string]int{}}
		for st, n := range ps.counts() {
			info.InFlight[stateName(st)] = n
		}
		reply(result{info, true})
	}, func(int16) result { return result{} })
	return r.info, r.ok
}

func stateName(st int8) string {
	switch st {
	case stateAvailable:
		return "AVAILABLE"
	case stateAcquired:
		return "ACQUIRED"
	case stateAcknowledged:
		return "ACKNOWLEDGED"
	case stateArchived:
		return "ARCHIVED"
	}
	return fmt.Sprintf("STATE(%d)", st)
}

// Loaded reports whether the group's __share_group_state partition is
// served here.
func (c *Coordinator) Loaded(ctx context.Context, group string) bool {
	return coord.Call(c.rt, ctx, c.rt.ShardFor(group), func(m *machine, reply func(bool)) {
		reply(m.loaded[m.partitionOf(group)])
	}, func(int16) bool { return false })
}

// ConnectionClosed ends the share sessions opened on a client connection
// that closed and releases the records their members hold.
func (c *Coordinator) ConnectionClosed(conn uint64) {
	c.rt.Each(func(m *machine) { m.connectionClosed(conn) })
}
