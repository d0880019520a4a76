package group

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is committed offsets: OffsetCommit, OffsetFetch, OffsetDelete
// and retention, after Kafka's OffsetMetadataManager.

// utf16Len is the length Java's String.length() reports, which is what
// offset.metadata.max.bytes is compared with.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

func commitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetCommit handles OffsetCommit v0-v9. The answer waits until the
// records are durable; the offsets become visible to OffsetFetch then.
func (m *machine) offsetCommit(req *kmsg.OffsetCommitRequest, reply func(*kmsg.OffsetCommitResponse)) {
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		reply(commitResponse(req, code))
		return
	}
	if cg := p.consumers[req.Group]; cg != nil {
		if code := validateConsumerOffsetCommit(cg, req); code != 0 {
			reply(commitResponse(req, code))
			return
		}
		m.writeOffsets(p, req.Group, &cg.offsetStore, func() bool { return !cg.dead }, req, reply, nil)
		return
	}
	if sg := p.streams[req.Group]; sg != nil {
		if code := validateStreamsOffsetCommit(sg, req); code != 0 {
			reply(commitResponse(req, code))
			return
		}
		m.writeOffsets(p, req.Group, &sg.offsetStore, func() bool { return !sg.dead }, req, reply, nil)
		return
	}
	g := p.groups[req.Group]
	created := false
	if g == nil {
		if req.Generation >= 0 {
			// v9 introduced GROUP_ID_NOT_FOUND; older clients expect
			// ILLEGAL_GENERATION.
			code := errIllegalGeneration
			if req.Version >= 9 {
				code = errGroupIDNotFound
			}
			reply(commitResponse(req, code))
			return
		}
		// A consumer that manages its own partitions (assign mode, kcat,
		// the admin client) commits into a "simple" group.
		g = newClassicGroup(req.Group, p.id, m.nowMs())
		p.groups[req.Group] = g
		created = true
	}
	if code := m.validateOffsetCommit(g, req); code != 0 {
		reply(commitResponse(req, code))
		return
	}
	if g.is(stateStable) || g.is(statePreparingRebalance) {
		// Commits keep a classic member's session alive.
		if mem := g.members[req.MemberID]; mem != nil {
			m.scheduleHeartbeat(g, mem.id, mem.sessionTimeoutMs)
		}
	}
	m.writeOffsets(p, req.Group, &g.offsetStore, func() bool { return !g.is(stateDead) }, req, reply, func() {
		if created {
			m.dropIfUnused(p, g)
		}
	})
}

// writeOffsets appends a commit's offsets to a group's store and answers
// once they are durable; alive says whether the group still stands then,
// and failed runs after a failed append.
func (m *machine) writeOffsets(p *partitionState, group string, g *offsetStore, alive func() bool, req *kmsg.OffsetCommitRequest, reply func(*kmsg.OffsetCommitResponse), failed func()) {
	now := m.nowMs()
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
		expire = now + req.RetentionTimeMillis
	}
	resp := commitResponse(req, 0)
	var (
		recs    []Record
		tps     []tp
		values  []offsetValue
		pending []*inflightCommit
	)
	for i, t := range req.Topics {
		for j, pt := range t.Partitions {
			md := ""
			if pt.Metadata != nil {
				md = *pt.Metadata
			}
			if utf16Len(md) > int(m.cfg.OffsetMetadataMaxBytes) {
				resp.Topics[i].Partitions[j].ErrorCode = errOffsetMetadataTooLarge
				continue
			}
			leaderEpoch := pt.LeaderEpoch
			if req.Version < 6 {
				leaderEpoch = -1
			}
			k := tp{t.Topic, pt.Partition}
			v := offsetValue{offset: pt.Offset, leaderEpoch: leaderEpoch, metadata: md, commitTimestamp: now, expireTimestamp: expire, order: p.takeOrder()}
			ic := g.inflight[k]
			if ic == nil {
				ic = &inflightCommit{}
				g.inflight[k] = ic
			}
			ic.n++
			recs = append(recs, offsetCommitRecord(group, k, v))
			tps = append(tps, k)
			values = append(values, v)
			pending = append(pending, ic)
		}
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	m.fx.Append(p.id, recs, func(err error) {
		for i, k := range tps {
			ic := pending[i]
			if g.inflight[k] != ic {
				continue // the offset was deleted after this commit
			}
			ic.n--
			if ic.n == 0 {
				delete(g.inflight, k)
			}
			if err == nil && alive() {
				g.offsets[k] = values[i]
			}
		}
		if err != nil {
			if failed != nil {
				failed()
			}
			reply(commitResponse(req, appendErrorCode(err)))
			return
		}
		reply(resp)
	})
}

// validateOffsetCommit is ClassicGroup.validateOffsetCommit.
func (m *machine) validateOffsetCommit(g *classicGroup, req *kmsg.OffsetCommitRequest) int16 {
	if g.is(stateDead) {
		return errCoordinatorNotAvailable
	}
	if req.Generation < 0 && g.is(stateEmpty) {
		// Commits from outside group management are fine while nobody is
		// a member.
		return 0
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return errIllegalGeneration
		}
	} else if !g.is(stateEmpty) {
		return errUnknownMemberID
	}
	if g.is(stateCompletingRebalance) {
		// The member has the new generation but not its assignment yet.
		return errRebalanceInProgress
	}
	return 0
}

// fetchTopic is one topic of an OffsetFetch, in any version's shape.
type fetchTopic struct {
	topic      string
	partitions []int32
}

// fetchResult is one group's OffsetFetch answer.
type fetchResult struct {
	code   int16
	topics []kmsg.OffsetFetchResponseGroupTopic
}

// offsetFetch answers one group of an OffsetFetch; nil topics means all
// committed partitions. With requireStable the answer waits for the commits
// in flight on the partition, as Kafka's write-path fetch does, and
// partitions with offsets pending in an open transaction answer
// UNSTABLE_OFFSET_COMMIT; without it they show their last committed offset.
func (m *machine) offsetFetch(group string, topics []fetchTopic, member *fetchMember, requireStable bool, reply func(fetchResult)) {
	p, code := m.partitionOf(group)
	if code != 0 {
		reply(fetchResult{code: code})
		return
	}
	if !requireStable {
		reply(m.readOffsets(group, topics, member, false))
		return
	}
	m.fx.Append(p.id, nil, func(error) { reply(m.readOffsets(group, topics, member, true)) })
}

// fetchMember is the member an OffsetFetch v9+ comes from.
type fetchMember struct {
	id    *string
	epoch int32
}

// validateConsumerOffsetCommit is ConsumerGroup.validateOffsetCommit: with
// members, only a member at its current epoch commits; without, anyone
// outside the group (member epoch -1) may.
func validateConsumerOffsetCommit(g *consumerGroup, req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && len(g.members) == 0 {
		return 0
	}
	mem := g.members[req.MemberID]
	switch {
	case mem == nil:
		return errUnknownMemberID
	case mem.usesClassicProtocol():
		// A classic member commits with its generation, which is its
		// member epoch.
		if req.Generation != mem.epoch {
			return errIllegalGeneration
		}
	case req.Version < 9:
		// Consumer protocol members must commit with member epochs.
		return errUnsupportedVersion
	case req.Generation != mem.epoch:
		return errStaleMemberEpoch
	}
	return 0
}

// validateConsumerOffsetFetch is ConsumerGroup.validateOffsetFetch: a fetch
// naming a member must come from it at its current epoch.
func validateConsumerOffsetFetch(g *consumerGroup, f *fetchMember) int16 {
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

func (m *machine) readOffsets(group string, topics []fetchTopic, member *fetchMember, requireStable bool) fetchResult {
	p, code := m.partitionOf(group)
	if code != 0 {
		return fetchResult{code: code}
	}
	var offsets map[tp]offsetValue
	if cg := p.consumers[group]; cg != nil {
		if code := validateConsumerOffsetFetch(cg, member); code != 0 {
			return fetchResult{code: code}
		}
		offsets = cg.offsets
	} else if sg := p.streams[group]; sg != nil {
		if code := validateStreamsOffsetFetch(sg, member); code != 0 {
			return fetchResult{code: code}
		}
		offsets = sg.offsets
	} else if g := p.groups[group]; g != nil {
		offsets = g.offsets
	}
	unstable := func(k tp) bool { return requireStable && p.txns.hasPending(group, k) }
	if topics == nil {
		return fetchResult{topics: allOffsets(offsets, unstable)}
	}
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.topic
		for _, part := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition = part
			rp.Offset = -1
			rp.LeaderEpoch = -1
			md := ""
			if unstable(tp{t.topic, part}) {
				rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			} else if o, ok := offsets[tp{t.topic, part}]; ok {
				rp.Offset = o.offset
				rp.LeaderEpoch = o.leaderEpoch
				md = o.metadata
			}
			rp.Metadata = &md
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return fetchResult{topics: out}
}

// allOffsets lists a group's committed offsets sorted by topic and
// partition; unstable ones (pending in a transaction, for a stable fetch)
// show UNSTABLE_OFFSET_COMMIT instead.
func allOffsets(offsets map[tp]offsetValue, unstable func(tp) bool) []kmsg.OffsetFetchResponseGroupTopic {
	out := []kmsg.OffsetFetchResponseGroupTopic{}
	for _, k := range sortedTPs(offsets) {
		o := offsets[k]
		if len(out) == 0 || out[len(out)-1].Topic != k.topic {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = k.topic
			out = append(out, rt)
		}
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition = k.partition
		rp.Offset = o.offset
		rp.LeaderEpoch = o.leaderEpoch
		md := o.metadata
		if unstable(k) {
			rp.Offset, rp.LeaderEpoch, md = -1, -1, ""
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
		}
		rp.Metadata = &md
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, rp)
	}
	return out
}

func sortedTPs(offsets map[tp]offsetValue) []tp {
	keys := make([]tp, 0, len(offsets))
	for k := range offsets {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return keys
}

// offsetDelete handles OffsetDelete v0. Offsets of topics the group
// consumes stay; the others are removed at once and the answer waits for
// their tombstones.
func (m *machine) offsetDelete(req *kmsg.OffsetDeleteRequest, reply func(*kmsg.OffsetDeleteResponse)) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	if req.Group == "" {
		// Kafka keeps commits and fetches of the empty group id for old
		// clients, but refuses to delete its offsets.
		resp.ErrorCode = errInvalidGroupID
		reply(resp)
		return
	}
	p, code := m.partitionOf(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	var (
		store        *offsetStore
		isSubscribed func(string) bool
	)
	if cg := p.consumers[req.Group]; cg != nil {
		store, isSubscribed = &cg.offsetStore, cg.isSubscribedToTopic
	} else if sg := p.streams[req.Group]; sg != nil {
		store, isSubscribed = &sg.offsetStore, sg.isSubscribedToTopic
	} else {
		g := p.groups[req.Group]
		switch {
		case g == nil || g.is(stateDead):
			resp.ErrorCode = errGroupIDNotFound
			reply(resp)
			return
		case !g.is(stateEmpty) && !g.usesConsumerProtocol():
			resp.ErrorCode = errNonEmptyGroup
			reply(resp)
			return
		}
		store, isSubscribed = &g.offsetStore, g.isSubscribedToTopic
	}
	g := store
	var recs []Record
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		subscribed := isSubscribed(t.Topic)
		for _, pt := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = pt.Partition
			rt.Partitions = append(rt.Partitions, rp)
			if subscribed {
				rt.Partitions[len(rt.Partitions)-1].ErrorCode = errGroupSubscribedToTopic
				continue
			}
			k := tp{t.Topic, pt.Partition}
			_, committed := g.offsets[k]
			if committed || g.inflight[k] != nil || p.txns.hasPending(req.Group, k) {
				recs = append(recs, offsetTombstone(req.Group, k))
				delete(g.offsets, k)
				delete(g.inflight, k)
				p.txns.remove(req.Group, k)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	m.fx.Append(p.id, recs, func(err error) {
		if err != nil {
			failed := kmsg.NewPtrOffsetDeleteResponse()
			failed.ErrorCode = appendErrorCode(err)
			reply(failed)
			return
		}
		reply(resp)
	})
}

// expireOffsets removes a group's offsets past retention, appending their
// tombstones to recs, and reports whether no offsets are left. It follows
// ClassicGroup.offsetExpirationCondition: an empty group's offsets expire
// retention after the group became empty; a stable consumer group's offsets
// of topics it no longer reads expire retention after their commit; a simple
// group's, retention after their commit.
func (m *machine) expireOffsets(g *classicGroup, txns *txnOffsets, nowMs int64, recs *[]Record) bool {
	if len(g.offsets) == 0 {
		return len(g.inflight) == 0 && !txns.hasOpen(g.id)
	}
	var base func(o offsetValue) int64
	switch {
	case g.protocolType == "":
		base = func(o offsetValue) int64 { return o.commitTimestamp }
	case g.is(stateEmpty):
		base = func(o offsetValue) int64 {
			if g.stateTimestamp >= 0 {
				return g.stateTimestamp
			}
			return o.commitTimestamp
		}
	case g.usesConsumerProtocol() && g.subscribedKnown && g.is(stateStable):
		base = func(o offsetValue) int64 { return o.commitTimestamp }
	default:
		return false
	}
	// A group with an open transaction stays, and so does an offset the
	// transaction may replace.
	all := len(g.inflight) == 0 && !txns.hasOpen(g.id)
	for _, k := range sortedTPs(g.offsets) {
		if g.isSubscribedToTopic(k.topic) {
			all = false
			continue
		}
		o := g.offsets[k]
		expired := nowMs-base(o) >= m.cfg.OffsetsRetentionMs
		if o.expireTimestamp >= 0 {
			expired = nowMs >= o.expireTimestamp
		}
		if !expired || g.inflight[k] != nil || txns.hasPending(g.id, k) {
			all = false
			continue
		}
		*recs = append(*recs, offsetTombstone(g.id, k))
		delete(g.offsets, k)
	}
	return all
}

// sweepExpired is the periodic retention job: expired offsets get
// tombstones, and empty groups left without offsets are deleted.
func (m *machine) sweepExpired() {
	now := m.nowMs()
	for _, p := range m.partitions {
		if p.loading {
			continue
		}
		var recs []Record
		ids := make([]string, 0, len(p.groups))
		for id := range p.groups {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			g := p.groups[id]
			if m.expireOffsets(g, p.txns, now, &recs) && g.is(stateEmpty) {
				recs = append(recs, groupTombstone(g.id))
				m.deleteGroup(p, g)
			}
		}
		for _, id := range sortedKeys(p.consumers) {
			g := p.consumers[id]
			if m.expireConsumerOffsets(g, p.txns, now, &recs) && g.state() == cgEmpty {
				recs = append(recs, consumerTombstones(g)...)
				m.deleteConsumerGroup(p, g)
			}
		}
		for _, id := range sortedKeys(p.streams) {
			g := p.streams[id]
			if m.expireStoreOffsets(g.id, &g.offsetStore, g.isSubscribedToTopic, p.txns, now, &recs) && g.state() == sgEmpty {
				recs = append(recs, streamsTombstones(g)...)
				m.deleteStreamsGroup(p, g)
			}
		}
		if len(recs) == 0 {
			continue
		}
		partition := p.id
		m.fx.Append(partition, recs, func(err error) {
			if err != nil {
				m.log.Warn("write expired offsets", "partition", partition, "records", len(recs), "err", err)
			}
		})
	}
}

// expireConsumerOffsets is expireOffsets for a consumer group, whose
// offsets expire retention after their commit unless a member subscribes
// to their topic (ConsumerGroup.offsetExpirationCondition).
func (m *machine) expireConsumerOffsets(g *consumerGroup, txns *txnOffsets, nowMs int64, recs *[]Record) bool {
	return m.expireStoreOffsets(g.id, &g.offsetStore, g.isSubscribedToTopic, txns, nowMs, recs)
}

// expireStoreOffsets expires the offsets of a consumer or streams group:
// retention after their commit unless a member reads their topic. It
// reports whether the group has no offsets left.
func (m *machine) expireStoreOffsets(group string, g *offsetStore, isSubscribed func(string) bool, txns *txnOffsets, nowMs int64, recs *[]Record) bool {
	all := len(g.inflight) == 0 && !txns.hasOpen(group)
	for _, k := range sortedTPs(g.offsets) {
		if isSubscribed(k.topic) {
			all = false
			continue
		}
		o := g.offsets[k]
		expired := nowMs-o.commitTimestamp >= m.cfg.OffsetsRetentionMs
		if o.expireTimestamp >= 0 {
			expired = nowMs >= o.expireTimestamp
		}
		if !expired || g.inflight[k] != nil || txns.hasPending(group, k) {
			all = false
			continue
		}
		*recs = append(*recs, offsetTombstone(group, k))
		delete(g.offsets, k)
	}
	return all
}
