package share

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Kafka splits a share group over three roles, and so does this package:
//
//   - the group's coordinator (the leader of the group's partition of
//     __share_group_state here) keeps its members and assignment
//     (group.go);
//   - the leader of each topic partition the group reads keeps the share
//     partition in memory (SharePartition in Kafka: in-flight records,
//     acquisitions, locks) and serves ShareFetch and ShareAcknowledge for
//     it (session.go, partition.go);
//   - the share coordinator keeps each share partition's durable state
//     (ShareCoordinatorShard in Kafka): this file. The leader reads it
//     when it starts serving a share partition and writes it on every
//     change that must survive, with the inter-broker requests
//     InitializeShareGroupState (83), ReadShareGroupState (84) and
//     WriteShareGroupState (85) through a Persister, or directly when
//     the share coordinator is this node.
//
// Kafka's share coordinator maps a share partition to a partition of
// __share_group_state by "group:topic id:partition"; Gregor keeps a
// group's share partitions in the partition of the group id, so that the
// node serving a group's membership also holds every share partition of
// it (the offsets admin requests and DeleteGroups enumerate them there).

// StateKey names a share partition in the share-state requests.
type StateKey struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// State is a share partition's durable state, as ReadShareGroupState and
// ReadShareGroupStateSummary answer it.
type State struct {
	ErrorCode   int16
	StateEpoch  int32
	LeaderEpoch int32
	StartOffset int64
	Batches     []StateBatch
}

// StateWrite is the WriteShareGroupState of one share partition: its
// whole in-flight state (Kafka's leaders send the batches that changed
// and the share coordinator merges them; Gregor's send every batch, and
// the coordinator keeps what it is sent).
type StateWrite struct {
	StateEpoch  int32
	LeaderEpoch int32
	StartOffset int64
	Batches     []StateBatch
}

// Persister reaches the share coordinator of a group another node serves
// (Kafka's Persister, with the share-state requests between brokers). Its
// methods block: the shard calls them on goroutines of their own. They
// answer Kafka error codes: INVALID_REQUEST for a share partition never
// initialized, FENCED_LEADER_EPOCH for a leader older than the last
// one that read or wrote, FENCED_STATE_EPOCH for a write from before a
// reset of the share partition, and the coordinator errors
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) when the request found no coordinator.
type Persister interface {
	ReadState(ctx context.Context, key StateKey, leaderEpoch int32) State
	InitializeState(ctx context.Context, key StateKey, stateEpoch int32, startOffset int64) int16
	WriteState(ctx context.Context, key StateKey, w StateWrite) int16
}

var (
	errFencedLeaderEpoch = kerr.FencedLeaderEpoch.Code
	errFencedStateEpoch  = kerr.FencedStateEpoch.Code
)

// durableGroup is the group of a share-state request on its share
// coordinator; the code says why this node cannot answer for it.
func (m *machine) durableGroup(group string) (*groupState, int16) {
	if group == "" {
		return nil, errInvalidRequest
	}
	if code := m.owns(m.partitionOf(group)); code != 0 {
		return nil, code
	}
	return m.groups[group], 0
}

// readState is ReadShareGroupState of one share partition. A leader with
// a newer leader epoch than the state recorded is kept as the last one,
// durably, so that the writes of the leader before it are fenced.
func (m *machine) readState(key StateKey, leaderEpoch int32, reply func(State)) {
	g, code := m.durableGroup(key.Group)
	if code != 0 {
		reply(State{ErrorCode: code})
		return
	}
	k := partKey{key.TopicID, key.Partition}
	if g == nil || g.durable[k] == nil {
		reply(State{ErrorCode: errInvalidRequest})
		return
	}
	v := g.durable[k]
	if leaderEpoch >= 0 && v.LeaderEpoch > leaderEpoch {
		reply(State{ErrorCode: errFencedLeaderEpoch})
		return
	}
	st := State{StateEpoch: v.StateEpoch, LeaderEpoch: v.LeaderEpoch, StartOffset: v.StartOffset, Batches: slices.Clone(v.Batches)}
	if leaderEpoch <= v.LeaderEpoch {
		reply(st)
		return
	}
	v.LeaderEpoch = leaderEpoch
	st.LeaderEpoch = leaderEpoch
	m.appendDurable(g, []partKey{k}, func(code int16) {
		st.ErrorCode = code
		reply(st)
	})
}

// readSummary is ReadShareGroupStateSummary of one share partition: its
// start offset and epochs, start offset -1 when it was never initialized.
func (m *machine) readSummary(key StateKey) State {
	g, code := m.durableGroup(key.Group)
	if code != 0 {
		return State{ErrorCode: code}
	}
	if g == nil || g.durable[partKey{key.TopicID, key.Partition}] == nil {
		return State{StartOffset: -1, LeaderEpoch: -1}
	}
	v := g.durable[partKey{key.TopicID, key.Partition}]
	return State{StateEpoch: v.StateEpoch, LeaderEpoch: v.LeaderEpoch, StartOffset: v.StartOffset}
}

// initializeState is InitializeShareGroupState: the share partition
// starts over at startOffset with nothing in flight. A share partition
// this node leads is dropped from memory, to be read again.
func (m *machine) initializeState(key StateKey, stateEpoch int32, startOffset int64, reply func(int16)) {
	g, code := m.durableGroup(key.Group)
	if code != 0 {
		reply(code)
		return
	}
	if key.Partition < 0 || startOffset < 0 {
		reply(errInvalidRequest)
		return
	}
	if g == nil {
		g = m.newGroup(key.Group)
	}
	g.exists = true
	k := partKey{key.TopicID, key.Partition}
	old := g.durable[k]
	if old != nil && stateEpoch != -1 && old.StateEpoch > stateEpoch {
		reply(errFencedStateEpoch)
		return
	}
	v := &snapshotValue{StateEpoch: max(stateEpoch, 0), LeaderEpoch: -1, StartOffset: startOffset, CreateTimestamp: m.clock.Now().UnixMilli()}
	if old != nil {
		v.SnapshotEpoch, v.LeaderEpoch = old.SnapshotEpoch, old.LeaderEpoch
	}
	g.durable[k] = v
	m.dropLocal(g, k)
	m.appendDurable(g, []partKey{k}, reply)
}

// applyWrite checks a WriteShareGroupState of one share partition as
// Kafka's share coordinator does and keeps it (not yet written).
func (m *machine) applyWrite(g *groupState, k partKey, w StateWrite) int16 {
	v := g.durable[k]
	switch {
	case v == nil:
		return errInvalidRequest // never initialized, or deleted
	case w.LeaderEpoch != -1 && v.LeaderEpoch > w.LeaderEpoch:
		return errFencedLeaderEpoch
	case w.StateEpoch != -1 && v.StateEpoch > w.StateEpoch:
		return errFencedStateEpoch
	}
	// In offset order, joined, from the start offset on: as updateDelta
	// and the records' replay read them.
	v.StartOffset, v.Batches = w.StartOffset, mergeBatches(nil, w.Batches, w.StartOffset)
	v.LeaderEpoch = max(v.LeaderEpoch, w.LeaderEpoch)
	return 0
}

// writeState is WriteShareGroupState of one share partition.
func (m *machine) writeState(key StateKey, w StateWrite, reply func(int16)) {
	g, code := m.durableGroup(key.Group)
	if code != 0 {
		reply(code)
		return
	}
	if g == nil {
		reply(errInvalidRequest)
		return
	}
	k := partKey{key.TopicID, key.Partition}
	undo := m.durableUndo(g, []partKey{k})
	if code := m.applyWrite(g, k, w); code != 0 {
		reply(code)
		return
	}
	m.appendDurable(g, []partKey{k}, func(code int16) {
		if code != 0 {
			undo()
		}
		reply(code)
	})
}

// durableUndo saves the durable state of keys before a change and returns
// what puts it back should the change's write fail, so that the state
// served stays what the log holds (Kafka's coordinator runtime reverts
// its in-memory state when an append fails). A share partition written
// again since keeps the newer state.
func (m *machine) durableUndo(g *groupState, keys []partKey) func() {
	type saved struct {
		v    *snapshotValue
		prev snapshotValue
	}
	var all []saved
	for _, k := range keys {
		if v := g.durable[k]; v != nil {
			all = append(all, saved{v, *v})
		}
	}
	return func() {
		for _, s := range all {
			// appendDurable counted one write more.
			if s.v.writes == s.prev.writes+1 {
				*s.v = s.prev
			}
		}
	}
}

// deleteState is DeleteShareGroupState of one share partition.
func (m *machine) deleteState(key StateKey, reply func(int16)) {
	g, code := m.durableGroup(key.Group)
	if code != 0 {
		reply(code)
		return
	}
	k := partKey{key.TopicID, key.Partition}
	if g == nil || g.durable[k] == nil {
		reply(0)
		return
	}
	delete(g.durable, k)
	m.dropLocal(g, k)
	m.appendDurable(g, []partKey{k}, reply)
}

// appendDurable writes the durable state of keys to the group's partition
// of __share_group_state: a ShareUpdate record of each with what changed
// since its snapshot, or a new ShareSnapshot record once it has
// share.coordinator.snapshot.update.records.per.snapshot updates (or
// was reset, or was never written here), as Kafka's share coordinator
// does; a tombstone for one no longer kept. done gets the write's error
// code.
func (m *machine) appendDurable(g *groupState, keys []partKey, done func(code int16)) {
	now := m.clock.Now().UnixMilli()
	recs := make([]Record, 0, len(keys))
	for _, k := range keys {
		v := g.durable[k]
		if v == nil {
			recs = append(recs, Record{Key: snapshotKey(g.id, k)})
			continue
		}
		v.writes++
		v.WriteTimestamp = now
		if v.logged && v.updates < m.cfg.UpdatesPerSnapshot && v.loggedStateEpoch == v.StateEpoch {
			if delta, ok := updateDelta(v.snapshotBatches, v.loggedBatches, v.Batches, v.StartOffset); ok {
				u := updateValue{SnapshotEpoch: v.SnapshotEpoch, LeaderEpoch: v.LeaderEpoch, StartOffset: v.StartOffset, Batches: delta}
				recs = append(recs, Record{Key: updateKey(g.id, k), Value: u.encode()})
				v.updates++
				v.loggedBatches = slices.Clone(v.Batches)
				continue
			}
		}
		v.SnapshotEpoch++
		recs = append(recs, Record{Key: snapshotKey(g.id, k), Value: v.encode()})
		v.logged, v.updates, v.loggedStateEpoch = true, 0, v.StateEpoch
		v.snapshotBatches = slices.Clone(v.Batches)
		v.loggedBatches = v.snapshotBatches
	}
	m.s.Append(g.partition, recs, func(err error) {
		if err != nil {
			done(coord.AppendErrorCode(err, nil))
			return
		}
		done(0)
	})
}

// dropLocal forgets the in-memory share partition this node kept as its
// leader: leadership moved, or its durable state was reset or deleted. A
// later fetch reads the durable state again; what it had acquired is
// delivered again, as after a change of leader in Kafka.
func (m *machine) dropLocal(g *groupState, k partKey) {
	if g.parts[k] == nil {
		return
	}
	delete(g.parts, k)
	m.s.Cancel(timerKey{kind: timerLocks, group: g.id, part: k})
	m.wake(g, k)
}

// leading reports whether this node leads a topic partition, and its
// leader epoch there (-1, true when the configuration cannot tell, as in
// unit tests without a broker).
func (m *machine) leading(topic string, partition int32) (int32, bool) {
	if m.cfg.LeaderEpoch == nil {
		return -1, true
	}
	e := m.cfg.LeaderEpoch(topic, partition)
	return e, e >= 0
}

// current is the share partition this node serves for k as its leader,
// nil when it must be read first; a share partition kept from an earlier
// leadership (the leader epoch moved) is dropped. The code is
// NOT_LEADER_OR_FOLLOWER when this node does not lead the partition.
func (m *machine) current(g *groupState, k partKey, topic string) (*partitionState, int16) {
	ps := g.parts[k]
	if topic == "" && ps != nil {
		topic = ps.topic
	}
	if topic == "" {
		return ps, 0
	}
	epoch, ok := m.leading(topic, k.partition)
	if !ok {
		m.dropLocal(g, k)
		return nil, errNotLeader
	}
	if ps != nil && ps.leaderEpoch != epoch {
		m.dropLocal(g, k)
		return nil, 0
	}
	return ps, 0
}

// stateWrite is the WriteShareGroupState of a share partition served
// here.
func stateWrite(ps *partitionState) StateWrite {
	return StateWrite{StateEpoch: ps.stateEpoch, LeaderEpoch: ps.leaderEpoch, StartOffset: ps.start, Batches: ps.stateBatches()}
}

// ensureParts makes sure the share partitions of refs this node leads
// are in memory, reading their durable state (or initializing it at
// share.auto.offset.reset when the group never consumed them), and then
// calls then on the shard with the code of each share partition that
// could not be served here.
func (m *machine) ensureParts(g *groupState, refs []PartitionRef, then func(codes map[partKey]int16)) {
	codes := map[partKey]int16{}
	type need struct {
		ref   PartitionRef
		epoch int32
	}
	var needs []need
	for _, ref := range refs {
		if ref.Topic == "" {
			continue
		}
		k := partKey{ref.TopicID, ref.Partition}
		ps, code := m.current(g, k, ref.Topic)
		if code != 0 {
			codes[k] = code
			continue
		}
		if ps == nil && !slices.ContainsFunc(needs, func(n need) bool { return n.ref.TopicID == ref.TopicID && n.ref.Partition == ref.Partition }) {
			epoch, _ := m.leading(ref.Topic, ref.Partition)
			needs = append(needs, need{ref, epoch})
		}
	}
	if len(needs) == 0 {
		then(codes)
		return
	}
	if m.owns(g.partition) == 0 || m.cfg.Persister == nil {
		// This node is the group's share coordinator: its own state.
		var writes []partKey
		for _, n := range needs {
			k := partKey{n.ref.TopicID, n.ref.Partition}
			v := g.durable[k]
			switch {
			case v == nil:
				start, ok := m.startOffset(g, n.ref.Topic, n.ref.Partition)
				if !ok {
					codes[k] = errNotLeader
					continue
				}
				v = &snapshotValue{LeaderEpoch: n.epoch, StartOffset: start, CreateTimestamp: m.clock.Now().UnixMilli()}
				g.durable[k] = v
			case n.epoch >= 0 && v.LeaderEpoch > n.epoch:
				codes[k] = errNotLeader // a newer leader read it
				continue
			}
			v.LeaderEpoch = max(v.LeaderEpoch, n.epoch)
			ps := restore(n.ref.Topic, *v)
			ps.leaderEpoch = n.epoch
			g.parts[k] = ps
			writes = append(writes, k)
		}
		if len(writes) == 0 {
			then(codes)
			return
		}
		m.appendDurable(g, writes, func(code int16) {
			if code != 0 {
				for _, k := range writes {
					m.dropLocal(g, k)
					codes[k] = code
				}
			}
			then(codes)
		})
		return
	}
	persister, offsets := m.cfg.Persister, m.cfg.Offsets
	earliest := m.autoOffsetReset(g) == "earliest"
	now := m.clock.Now().UnixMilli()
	states := make([]State, len(needs))
	m.s.Go(func(ctx context.Context) func() {
		for i, n := range needs {
			key := StateKey{Group: g.id, TopicID: n.ref.TopicID, Partition: n.ref.Partition}
			st := persister.ReadState(ctx, key, n.epoch)
			if st.ErrorCode == errInvalidRequest {
				// Never initialized: this leader starts the share
				// partition at share.auto.offset.reset, as the group
				// coordinator does in Kafka when it first assigns it.
				logStart, hw, ok := offsets(n.ref.Topic, n.ref.Partition)
				if !ok {
					st = State{ErrorCode: errNotLeader}
				} else {
					start := hw
					if earliest {
						start = logStart
					}
					st = State{StartOffset: start, LeaderEpoch: -1}
					st.ErrorCode = persister.InitializeState(ctx, key, 0, start)
				}
			}
			states[i] = st
		}
		return func() {
			for i, n := range needs {
				k := partKey{n.ref.TopicID, n.ref.Partition}
				st := states[i]
				if st.ErrorCode != 0 {
					m.log.Debug("read share partition state", "group", g.id, "topic", n.ref.Topic, "partition", n.ref.Partition, "code", st.ErrorCode)
					codes[k] = errNotLeader
					continue
				}
				if m.groups[g.id] != g || g.parts[k] != nil {
					continue
				}
				if epoch, ok := m.leading(n.ref.Topic, n.ref.Partition); !ok || epoch != n.epoch {
					codes[k] = errNotLeader
					continue
				}
				ps := restore(n.ref.Topic, snapshotValue{StateEpoch: st.StateEpoch, StartOffset: st.StartOffset, CreateTimestamp: now, Batches: st.Batches})
				ps.leaderEpoch = n.epoch
				g.parts[k] = ps
			}
			then(codes)
		}
	})
}

// persist keeps the state of the share partitions keys this node serves
// as their leader: with its own durable state when it is the group's
// share coordinator, else with WriteShareGroupState to that coordinator.
// done gets the first error code. A write fenced by the coordinator (a
// newer leader, a reset) drops the share partition here.
func (m *machine) persist(g *groupState, keys []partKey, done func(code int16)) {
	if m.owns(g.partition) == 0 || m.cfg.Persister == nil {
		var ok []partKey
		code := int16(0)
		undo := m.durableUndo(g, keys)
		for _, k := range keys {
			ps := g.parts[k]
			if ps == nil {
				continue
			}
			if c := m.applyWrite(g, k, stateWrite(ps)); c != 0 {
				code = c
				m.dropLocal(g, k)
				continue
			}
			ok = append(ok, k)
		}
		if len(ok) == 0 {
			done(code)
			return
		}
		m.appendDurable(g, ok, func(c int16) {
			if c != 0 {
				undo()
			}
			if c == 0 {
				c = code
			}
			done(c)
		})
		return
	}
	left, first := len(keys), int16(0)
	if left == 0 {
		done(0)
		return
	}
	cb := func(c int16) {
		if c != 0 && first == 0 {
			first = c
		}
		if left--; left == 0 {
			done(first)
		}
	}
	if g.writeQ == nil {
		g.writeQ = map[partKey][]func(int16){}
	}
	for _, k := range keys {
		g.writeQ[k] = append(g.writeQ[k], cb)
	}
	m.flushWrites(g)
}

// flushWrites sends the queued writes of a group to its share
// coordinator, one round at a time so that a share partition's writes
// arrive in order; each sends the share partition's state as it is when
// sent, so writes queued meanwhile become one.
func (m *machine) flushWrites(g *groupState) {
	if g.writing || len(g.writeQ) == 0 {
		return
	}
	batch := g.writeQ
	g.writeQ = nil
	type write struct {
		k   partKey
		ps  *partitionState
		w   StateWrite
		cbs []func(int16)
	}
	var writes []write
	for k, cbs := range batch {
		ps := g.parts[k]
		if ps == nil {
			for _, cb := range cbs {
				cb(errNotLeader)
			}
			continue
		}
		writes = append(writes, write{k, ps, stateWrite(ps), cbs})
	}
	if len(writes) == 0 {
		return
	}
	g.writing = true
	persister := m.cfg.Persister
	codes := make([]int16, len(writes))
	m.s.Go(func(ctx context.Context) func() {
		for i, w := range writes {
			codes[i] = persister.WriteState(ctx, StateKey{Group: g.id, TopicID: w.k.topic, Partition: w.k.partition}, w.w)
		}
		return func() {
			g.writing = false
			for i, w := range writes {
				switch codes[i] {
				case errFencedLeaderEpoch, errFencedStateEpoch, errInvalidRequest:
					if g.parts[w.k] == w.ps {
						m.dropLocal(g, w.k)
					}
				}
				for _, cb := range w.cbs {
					cb(codes[i])
				}
			}
			m.flushWrites(g)
		}
	})
}

// ReadState serves ReadShareGroupState of one share partition.
func (c *Coordinator) ReadState(ctx context.Context, key StateKey, leaderEpoch int32) coord.Pending[State] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(key.Group), func(m *machine, reply func(State)) {
		m.readState(key, leaderEpoch, reply)
	}, func(code int16) State { return State{ErrorCode: code} })
}

// ReadStateSummary serves ReadShareGroupStateSummary of one share
// partition.
func (c *Coordinator) ReadStateSummary(ctx context.Context, key StateKey) coord.Pending[State] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(key.Group), func(m *machine, reply func(State)) {
		reply(m.readSummary(key))
	}, func(code int16) State { return State{ErrorCode: code} })
}

// InitializeState serves InitializeShareGroupState of one share partition.
func (c *Coordinator) InitializeState(ctx context.Context, key StateKey, stateEpoch int32, startOffset int64) coord.Pending[int16] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(key.Group), func(m *machine, reply func(int16)) {
		m.initializeState(key, stateEpoch, startOffset, reply)
	}, func(code int16) int16 { return code })
}

// WriteState serves WriteShareGroupState of one share partition.
func (c *Coordinator) WriteState(ctx context.Context, key StateKey, w StateWrite) coord.Pending[int16] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(key.Group), func(m *machine, reply func(int16)) {
		m.writeState(key, w, reply)
	}, func(code int16) int16 { return code })
}

// DeleteState serves DeleteShareGroupState of one share partition.
func (c *Coordinator) DeleteState(ctx context.Context, key StateKey) coord.Pending[int16] {
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(key.Group), func(m *machine, reply func(int16)) {
		m.deleteState(key, reply)
	}, func(code int16) int16 { return code })
}
