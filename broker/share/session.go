package share

import (
	"maps"
	"slices"
)

// session is a member's share session (ShareSession in Kafka): the
// partitions its ShareFetch requests read, and the epoch the next request
// must carry.
type session struct {
	conn  uint64 // the connection that opened it
	epoch int32
	parts map[partKey]string // → topic name
}

// nextEpoch is the epoch after e: epochs run 1, 2, … and wrap to 1.
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// PartitionRef names a topic partition of a request: its id and, when the
// broker knows the id, its name ("" for an unknown topic id).
type PartitionRef struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// Ack is the acknowledgements of one partition.
type Ack struct {
	Ref     PartitionRef
	Batches []AckBatch
}

// AckBatch is an AcknowledgementBatch.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// FetchStart is what the broker hands the shard first for a ShareFetch:
// the session step, the piggy-backed acknowledgements, and the partitions
// the request adds to or forgets from the session.
type FetchStart struct {
	Group, Member string
	Epoch         int32
	Fetch         []PartitionRef
	Forget        []PartitionRef
	Acks          []Ack
	Renew         bool // renew acknowledgements allowed (v2 with IsRenewAck)
	// Readable reports whether the principal may READ a topic; nil when
	// no authorizer is configured. A partition of a topic it may not read
	// stays in the session, as in Kafka, but is neither read nor
	// acknowledged: it answers TOPIC_AUTHORIZATION_FAILED on every fetch,
	// so that an ACL granted later takes effect at the next one.
	Readable func(topic string) bool
	// Conn names the client connection: a share session lives as long as
	// the connection that opened it (see ConnectionClosed).
	Conn uint64
}

// PartitionRead is a partition the broker should read for a ShareFetch,
// from Offset.
type PartitionRead struct {
	Ref       PartitionRef
	Offset    int64
	ErrorCode int16
}

// FetchPlan is the shard's answer to a FetchStart.
type FetchPlan struct {
	// ErrorCode is the request's error (session or group), for the
	// top-level error of the response.
	ErrorCode int16
	// AckErrors are the acknowledgement results by partition (0 for
	// success), for every partition that carried acknowledgements.
	AckErrors map[PartitionRef]int16
	// Reads are the session's partitions to read.
	Reads []PartitionRead
	// ReadCommitted says to skip aborted transactions.
	ReadCommitted bool
	// LockMs is the acquisition lock duration.
	LockMs int32
}

// PartitionBatches is what the broker read of one partition, from From
// (the offset its plan said); Batches is empty when there was nothing to
// read.
type PartitionBatches struct {
	Ref     PartitionRef
	From    int64
	Batches []Batch
}

// Acquisition is the second step's answer: the ranges acquired by
// partition, and Retry when nothing was acquired but the share
// partitions changed since the plan (read again at once).
type Acquisition struct {
	Acquired map[PartitionRef][]Acquired
	Retry    bool
}

// startFetch runs a ShareFetch's session step and acknowledgements on the
// shard; reply gets the plan once the acknowledgements are durable. The
// node serves the share partitions it leads, whatever node coordinates
// the group: the share session and the share partitions are the
// leader's, as in Kafka; their durable state is the share coordinator's
// (state.go).
func (m *machine) startFetch(req FetchStart, reply func(FetchPlan)) {
	plan := FetchPlan{AckErrors: map[PartitionRef]int16{}}
	fail := func(code int16) { plan.ErrorCode = code; reply(plan) }
	if req.Member == "" || req.Group == "" {
		fail(errInvalidRequest)
		return
	}
	g := m.groups[req.Group]
	if g == nil {
		g = m.newGroup(req.Group)
	}
	plan.ReadCommitted = m.readCommitted(g)
	plan.LockMs = int32(m.lockDuration(g).Milliseconds())
	sess := g.sessions[req.Member]
	switch {
	case req.Epoch == 0:
		if len(req.Acks) > 0 {
			fail(errInvalidRequest)
			return
		}
		sess = &session{conn: req.Conn, epoch: 1, parts: map[partKey]string{}}
		g.sessions[req.Member] = sess
	case sess == nil:
		fail(errShareSessionNotFound)
		return
	case req.Epoch == -1:
		delete(g.sessions, req.Member)
	case req.Epoch != sess.epoch:
		fail(errInvalidShareSessionEpoch)
		return
	default:
		sess.epoch = nextEpoch(sess.epoch)
	}
	changed, undo := m.applyAcks(g, req.Member, req.Acks, req.Renew, req.Readable, plan.AckErrors)
	if req.Epoch == -1 {
		m.releaseMember(g, req.Member)
		m.finishFetch(g, changed, undo, plan, reply)
		return
	}
	for _, f := range req.Forget {
		delete(sess.parts, partKey{f.TopicID, f.Partition})
	}
	for _, f := range req.Fetch {
		sess.parts[partKey{f.TopicID, f.Partition}] = f.Topic
	}
	keys := slices.Collect(maps.Keys(sess.parts))
	slices.SortFunc(keys, func(a, b partKey) int {
		if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	refs := make([]PartitionRef, 0, len(keys))
	var load []PartitionRef
	for _, k := range keys {
		ref := PartitionRef{TopicID: k.topic, Topic: sess.parts[k], Partition: k.partition}
		refs = append(refs, ref)
		if req.Readable == nil || ref.Topic == "" || req.Readable(ref.Topic) {
			load = append(load, ref)
		}
	}
	m.ensureParts(g, load, func(codes map[partKey]int16) {
		var moved []partKey
		plan.Reads, moved = m.planReads(g, refs, req.Readable, codes)
		m.finishFetch(g, append(changed, moved...), undo, plan, reply)
	})
}

// finishFetch keeps the share partitions a ShareFetch changed and then
// answers its plan; a failed write fails the acknowledgements and rolls
// them back.
func (m *machine) finishFetch(g *groupState, changed []partKey, undo []ackUndo, plan FetchPlan, reply func(FetchPlan)) {
	if len(changed) == 0 {
		reply(plan)
		return
	}
	m.persist(g, changed, func(code int16) {
		if code == 0 {
			m.written(g, undo)
		} else {
			m.rollback(g, undo)
			for ref := range plan.AckErrors {
				if plan.AckErrors[ref] == 0 {
					plan.AckErrors[ref] = code
				}
			}
		}
		reply(plan)
	})
}

// ackUndo is what acknowledgements changed in one share partition.
type ackUndo struct {
	k    partKey
	ps   *partitionState
	recs []undoRec
}

// rollback undoes acknowledgements whose write failed, as Kafka's
// SharePartition does: their records are ACQUIRED by their member again
// (with their lock), so that the member, told the acknowledgement failed,
// may send it again. (The durable state, when this node is the group's
// share coordinator, went back to what the log holds in persist.)
func (m *machine) rollback(g *groupState, undo []ackUndo) {
	for _, u := range undo {
		if g.parts[u.k] != u.ps || !u.ps.rollback(u.recs) {
			continue
		}
		m.log.Info("share acknowledgement rolled back after a failed write", "group", g.id, "topic", u.ps.topic, "partition", u.k.partition)
		m.scheduleLocks(g, u.k)
		m.wake(g, u.k)
	}
}

// written makes the records acknowledgements released available to
// other members once their write is done, and wakes the fetches waiting
// for them.
func (m *machine) written(g *groupState, undo []ackUndo) {
	for _, u := range undo {
		if g.parts[u.k] == u.ps && u.ps.written(u.recs) {
			m.wake(g, u.k)
		}
	}
}

// applyAcks applies acknowledgements, one result per partition in codes,
// and returns the share partitions they changed and what to undo should
// their write fail. Those of topics readable says the principal may not
// READ answer TOPIC_AUTHORIZATION_FAILED and change nothing.
func (m *machine) applyAcks(g *groupState, memberID string, acks []Ack, renew bool, readable func(string) bool, codes map[PartitionRef]int16) ([]partKey, []ackUndo) {
	var changed []partKey
	var undo []ackUndo
	now := m.clock.Now()
	limit := m.deliveryLimit(g)
	renewed := now.Add(m.lockDuration(g))
	for _, a := range acks {
		k := partKey{a.Ref.TopicID, a.Ref.Partition}
		var ps *partitionState
		code := int16(0)
		switch {
		case a.Ref.Topic == "":
			code = errUnknownTopicID
		case readable != nil && !readable(a.Ref.Topic):
			code = errTopicAuthorizationFailed
		}
		if code == 0 {
			ps, code = m.current(g, k, a.Ref.Topic)
		}
		switch {
		case code != 0:
		case ps == nil:
			code = errInvalidRecordState
		default:
			for _, b := range a.Batches {
				if code = ps.ackCheck(memberID, b.First, b.Last, b.Types, renew); code != 0 {
					break
				}
			}
		}
		if code == 0 {
			u := ackUndo{k: k, ps: ps}
			for _, b := range a.Batches {
				u.recs = append(u.recs, ps.acknowledge(b.First, b.Last, b.Types, limit, renewed)...)
			}
			undo = append(undo, u)
			changed = append(changed, k)
			m.scheduleLocks(g, k)
			m.wake(g, k)
		}
		codes[a.Ref] = code
	}
	return changed, undo
}

// acquire hands the records the broker read to a ShareFetch's member:
// at most maxRecords over all partitions, in the order given. When it
// acquires nothing and nothing changed since the plan, it registers wake
// (if not nil) on the share partitions read, to be signalled at their next
// change (see wake): a long-polling fetch then tries again.
func (m *machine) acquire(group, memberID string, reads []PartitionBatches, maxRecords int, exact bool, wake chan struct{}) Acquisition {
	out := Acquisition{Acquired: map[PartitionRef][]Acquired{}}
	g := m.groups[group]
	if g == nil {
		return out
	}
	deadline := m.clock.Now().Add(m.lockDuration(g))
	left := maxRecords
	for _, r := range reads {
		if left <= 0 {
			break
		}
		k := partKey{r.Ref.TopicID, r.Ref.Partition}
		ps, _ := m.current(g, k, r.Ref.Topic)
		if ps == nil || len(r.Batches) == 0 {
			continue
		}
		got, archived := ps.acquire(r.Batches, memberID, left, exact, int64(m.cfg.PartitionMaxRecordLocks), m.deliveryLimit(g), deadline)
		if archived {
			m.persist(g, []partKey{k}, func(int16) {})
		}
		if len(got) == 0 {
			continue
		}
		for _, a := range got {
			left -= int(a.Last - a.First + 1)
		}
		out.Acquired[r.Ref] = got
		m.scheduleLocks(g, k)
	}
	if len(out.Acquired) > 0 {
		return out
	}
	for _, r := range reads {
		if ps := g.parts[partKey{r.Ref.TopicID, r.Ref.Partition}]; ps != nil && ps.readFrom() != r.From {
			out.Retry = true
			return out
		}
	}
	if wake != nil {
		if g.waiters == nil {
			g.waiters = map[partKey][]chan struct{}{}
		}
		for _, r := range reads {
			k := partKey{r.Ref.TopicID, r.Ref.Partition}
			g.waiters[k] = append(g.waiters[k], wake)
		}
	}
	return out
}

// wake signals the fetches waiting on a share partition that it changed
// (records released, the start offset moved) and forgets them: each
// registration is for one wait.
func (m *machine) wake(g *groupState, k partKey) {
	for _, ch := range g.waiters[k] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	delete(g.waiters, k)
}

// unwatch forgets a wait that ended without a wake.
func (m *machine) unwatch(group string, refs []PartitionRef, wake chan struct{}) {
	g := m.groups[group]
	if g == nil {
		return
	}
	for _, r := range refs {
		k := partKey{r.TopicID, r.Partition}
		g.waiters[k] = slices.DeleteFunc(g.waiters[k], func(ch chan struct{}) bool { return ch == wake })
		if len(g.waiters[k]) == 0 {
			delete(g.waiters, k)
		}
	}
}

// AckStart is a ShareAcknowledge.
type AckStart struct {
	Group, Member string
	Epoch         int32
	Acks          []Ack
	Renew         bool
	// Readable is FetchStart's: acknowledgements of topics the principal
	// may not READ answer TOPIC_AUTHORIZATION_FAILED.
	Readable func(topic string) bool
}

// acknowledge runs a ShareAcknowledge on the shard: the session step and
// the acknowledgements; reply gets the top-level code and the partition
// codes once the result is durable.
func (m *machine) acknowledge(req AckStart, reply func(int16, map[PartitionRef]int16)) {
	codes := map[PartitionRef]int16{}
	if req.Member == "" || req.Group == "" {
		reply(errInvalidRequest, codes)
		return
	}
	g := m.groups[req.Group]
	if g == nil || req.Epoch == 0 {
		reply(errInvalidShareSessionEpoch, codes)
		return
	}
	sess := g.sessions[req.Member]
	switch {
	case sess == nil:
		reply(errShareSessionNotFound, codes)
		return
	case req.Epoch == -1:
		delete(g.sessions, req.Member)
	case req.Epoch != sess.epoch:
		reply(errInvalidShareSessionEpoch, codes)
		return
	default:
		sess.epoch = nextEpoch(sess.epoch)
	}
	changed, undo := m.applyAcks(g, req.Member, req.Acks, req.Renew, req.Readable, codes)
	if req.Epoch == -1 {
		m.releaseMember(g, req.Member)
	}
	if len(changed) == 0 {
		reply(0, codes)
		return
	}
	m.persist(g, changed, func(code int16) {
		if code == 0 {
			m.written(g, undo)
		} else {
			m.rollback(g, undo)
			for ref := range codes {
				if codes[ref] == 0 {
					codes[ref] = code
				}
			}
		}
		reply(0, codes)
	})
}

// planReads says where to read each partition from: its first AVAILABLE
// record or its end. ensureParts read the share partitions before;
// codes are the ones it could not serve here. A share partition whose
// records below the log start offset were deleted moves past them;
// planReads returns those it moved, to be written. A partition of a
// topic readable says the principal may not READ answers
// TOPIC_AUTHORIZATION_FAILED and is not read: Kafka initializes share
// partitions only for the authorized.
func (m *machine) planReads(g *groupState, refs []PartitionRef, readable func(string) bool, codes map[partKey]int16) ([]PartitionRead, []partKey) {
	var moved []partKey
	out := make([]PartitionRead, 0, len(refs))
	for _, ref := range refs {
		k := partKey{ref.TopicID, ref.Partition}
		rd := PartitionRead{Ref: ref}
		switch {
		case ref.Topic == "":
			rd.ErrorCode = errUnknownTopicID
		case readable != nil && !readable(ref.Topic):
			rd.ErrorCode = errTopicAuthorizationFailed
		case codes[k] != 0:
			rd.ErrorCode = codes[k]
		case g.parts[k] == nil:
			rd.ErrorCode = errNotLeader
		default:
			ps := g.parts[k]
			if m.cfg.Offsets != nil && m.skipDeleted(ps, ref) {
				moved = append(moved, k)
				m.wake(g, k)
			}
			rd.Offset = ps.readFrom()
		}
		out = append(out, rd)
	}
	return out, moved
}

// connectionClosed ends the share sessions a connection opened and
// releases what their members hold, as Kafka does when a share
// consumer's connection goes away.
func (m *machine) connectionClosed(conn uint64) {
	for _, g := range m.groups {
		for member, sess := range g.sessions {
			if sess.conn == conn {
				delete(g.sessions, member)
				m.releaseMember(g, member)
			}
		}
	}
}

// skipDeleted moves a share partition past records deleted from its log
// (see skipTo).
func (m *machine) skipDeleted(ps *partitionState, ref PartitionRef) bool {
	logStart, _, ok := m.cfg.Offsets(ref.Topic, ref.Partition)
	return ok && ps.skipTo(logStart)
}
