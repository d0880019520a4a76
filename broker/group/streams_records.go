package group

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// This file is the streams group records of __consumer_offsets, written
// from Kafka 4.4's schemas in group-coordinator's
// common/message/StreamsGroup*.json (kmsg does not have them). As for
// consumer groups, keys are not flexible and values are (version 0), and
// the key version is the record type.

const (
	sgMetadataKeyVersion          = 17 // StreamsGroupMetadataKey: epoch, metadata hash, validated topology epoch
	sgPartitionMetadataKeyVersion = 18 // StreamsGroupPartitionMetadataKey: written by early 4.x only, skipped
	sgMemberMetadataKeyVersion    = 19 // StreamsGroupMemberMetadataKey
	sgTargetMetadataKeyVersion    = 20 // StreamsGroupTargetAssignmentMetadataKey
	sgTargetMemberKeyVersion      = 21 // StreamsGroupTargetAssignmentMemberKey
	sgCurrentAssignmentKeyVersion = 22 // StreamsGroupCurrentMemberAssignmentKey
	sgTopologyKeyVersion          = 23 // StreamsGroupTopologyKey
)

// standbyConfigKey is the key of num.standby.replicas in the metadata
// record's LastAssignmentConfigs, as Kafka writes it.
const standbyConfigKey = "num.standby.replicas"

// rackTagsConfigKey is the key of the rack-aware assignment tags in
// LastAssignmentConfigs, written only when some are set, as Kafka 4.4.
const rackTagsConfigKey = "rack.aware.assignment.tags"

// tag writes one tagged field: its tag, size and body.
func (e *encoder) tag(tag uint64, body []byte) {
	e.uvarint(tag)
	e.uvarint(uint64(len(body)))
	e.b = append(e.b, body...)
}

func sgEpochRecord(g *streamsGroup) Record {
	e := valueEncoder()
	e.i32(g.epoch)
	e.i64(g.metadataHash)
	// Tagged: ValidatedTopologyEpoch (0) unless -1, LastAssignmentConfigs (1).
	var tags [][2]any
	if g.validatedTopologyEpoch != -1 {
		b := &encoder{}
		b.i32(g.validatedTopologyEpoch)
		tags = append(tags, [2]any{uint64(0), b.b})
	}
	// Kafka keeps the assignment configs in a sorted map.
	cfg := &encoder{}
	if g.rackAwareTags == "" {
		cfg.carray(1)
	} else {
		cfg.carray(2)
	}
	cfg.cstr(standbyConfigKey)
	cfg.cstr(strconv.Itoa(int(g.standbyReplicas)))
	cfg.noTags()
	if g.rackAwareTags != "" {
		cfg.cstr(rackTagsConfigKey)
		cfg.cstr(g.rackAwareTags)
		cfg.noTags()
	}
	tags = append(tags, [2]any{uint64(1), cfg.b})
	e.uvarint(uint64(len(tags)))
	for _, t := range tags {
		e.tag(t[0].(uint64), t[1].([]byte))
	}
	return Record{Key: key(sgMetadataKeyVersion, g.id), Value: e.b}
}

type sgEpochValue struct {
	epoch, validated int32
	hash             int64
	standbys         int32
	rackTags         string
}

func decodeSGEpoch(b []byte) (sgEpochValue, error) {
	d := valueDecoder(b)
	v := sgEpochValue{epoch: d.i32(), hash: d.i64(), validated: -1}
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		tag := d.uvarint()
		size := d.uvarint()
		if size > uint64(len(d.b)) {
			d.fail(errShortRecord)
			break
		}
		bd := &decoder{b: d.take(int(size))}
		switch tag {
		case 0:
			v.validated = bd.i32()
		case 1:
			if c := bd.uvarint(); c > 0 {
				for range c - 1 {
					k, val := bd.cstr(), bd.cstr()
					bd.tags()
					switch k {
					case standbyConfigKey:
						if n, err := strconv.Atoi(val); err == nil {
							v.standbys = int32(n)
						}
					case rackTagsConfigKey:
						v.rackTags = val
					}
				}
			}
		}
		if bd.err != nil {
			d.fail(fmt.Errorf("tag %d: %w", tag, bd.err))
		}
	}
	return v, d.done()
}

func (e *encoder) topicInfos(ts []streamsTopicInfo) {
	e.carray(len(ts))
	for _, t := range ts {
		e.cstr(t.name)
		e.i32(t.partitions)
		e.i16(t.rf)
		e.carray(len(t.configs))
		for _, kv := range t.configs {
			e.cstr(kv[0])
			e.cstr(kv[1])
			e.noTags()
		}
		e.noTags()
	}
}

func (d *decoder) topicInfos() []streamsTopicInfo {
	n := d.carray(8)
	out := make([]streamsTopicInfo, 0, n)
	for range n {
		t := streamsTopicInfo{name: d.cstr(), partitions: d.i32(), rf: d.i16()}
		c := d.carray(3)
		for range c {
			t.configs = append(t.configs, [2]string{d.cstr(), d.cstr()})
			d.tags()
		}
		d.tags()
		out = append(out, t)
	}
	return out
}

func (e *encoder) int16s(v []int16) {
	e.carray(len(v))
	for _, x := range v {
		e.i16(x)
	}
}

// int32s reads a compact array of int32 (partitions, epochs).
func (d *decoder) int32s() []int32 {
	n := d.carray(4)
	out := make([]int32, 0, n)
	for range n {
		out = append(out, d.i32())
	}
	return out
}

func (d *decoder) int16s() []int16 {
	n := d.carray(2)
	out := make([]int16, 0, n)
	for range n {
		out = append(out, d.i16())
	}
	return out
}

func sgTopologyRecord(group string, t *streamsTopology) Record {
	e := valueEncoder()
	e.i32(t.epoch)
	e.carray(len(t.subtopologies))
	for _, s := range t.subtopologies {
		e.cstr(s.id)
		e.cstrings(s.sourceTopics)
		e.cstrings(s.sourceTopicRegex)
		e.topicInfos(s.changelogTopics)
		e.cstrings(s.repartitionSinkTopics)
		e.topicInfos(s.repartitionSourceTopics)
		e.carray(len(s.copartitionGroups))
		for _, cg := range s.copartitionGroups {
			e.int16s(cg.sourceTopics)
			e.int16s(cg.sourceTopicRegex)
			e.int16s(cg.repartitionSourceTopics)
			e.noTags()
		}
		e.noTags()
	}
	e.noTags()
	return Record{Key: key(sgTopologyKeyVersion, group), Value: e.b}
}

func decodeSGTopology(b []byte) (*streamsTopology, error) {
	d := valueDecoder(b)
	t := &streamsTopology{epoch: d.i32()}
	n := d.carray(8)
	for range n {
		s := streamsSubtopology{id: d.cstr(), sourceTopics: d.cstrings(), sourceTopicRegex: d.cstrings()}
		s.changelogTopics = d.topicInfos()
		s.repartitionSinkTopics = d.cstrings()
		s.repartitionSourceTopics = d.topicInfos()
		c := d.carray(4)
		for range c {
			s.copartitionGroups = append(s.copartitionGroups, copartitionGroup{d.int16s(), d.int16s(), d.int16s()})
			d.tags()
		}
		d.tags()
		t.subtopologies = append(t.subtopologies, s)
	}
	d.tags()
	return t, d.done()
}

func sgMemberRecord(group string, m *streamsMember) Record {
	e := valueEncoder()
	e.cnstr(m.instanceID)
	e.cnstr(m.rackID)
	e.cstr(m.clientID)
	e.cstr(m.clientHost)
	e.i32(m.rebalanceTimeoutMs)
	e.i32(m.topologyEpoch)
	e.cstr(m.processID)
	if m.endpoint == nil {
		e.i8(-1)
	} else {
		e.i8(1)
		e.cstr(m.endpoint.host)
		e.i16(int16(m.endpoint.port))
		e.noTags()
	}
	keys := slices.Sorted(maps.Keys(m.clientTags))
	e.carray(len(keys))
	for _, k := range keys {
		e.cstr(k)
		e.cstr(m.clientTags[k])
		e.noTags()
	}
	e.noTags()
	return Record{Key: key(sgMemberMetadataKeyVersion, group, m.id), Value: e.b}
}

// decodeSGMember fills the metadata fields of m from a member record.
func decodeSGMember(b []byte, m *streamsMember) error {
	d := valueDecoder(b)
	m.instanceID = d.cnstr()
	m.rackID = d.cnstr()
	m.clientID = d.cstr()
	m.clientHost = d.cstr()
	m.rebalanceTimeoutMs = d.i32()
	m.topologyEpoch = d.i32()
	m.processID = d.cstr()
	m.endpoint = nil
	if d.i8() >= 0 {
		m.endpoint = &streamsEndpoint{host: d.cstr(), port: uint16(d.i16())}
		d.tags()
	}
	n := d.carray(3)
	m.clientTags = nil
	for range n {
		if m.clientTags == nil {
			m.clientTags = map[string]string{}
		}
		k, v := d.cstr(), d.cstr()
		m.clientTags[k] = v
		d.tags()
	}
	d.tags()
	return d.done()
}

func (e *encoder) taskIDs(s taskSet) {
	subs := sortedKeys(s)
	e.carray(len(subs))
	for _, sub := range subs {
		e.cstr(sub)
		e.carray(len(s[sub]))
		for _, p := range s[sub] {
			e.i32(p)
		}
		e.noTags()
	}
}

// activeTaskIDs writes active tasks with their AssignmentEpochs (tag 0,
// one per partition), as Kafka 4.4 writes the current assignment's
// active and pending-revocation active tasks.
func (e *encoder) activeTaskIDs(s taskSet, epochs map[streamsTask]int32, fallback int32) {
	subs := sortedKeys(s)
	e.carray(len(subs))
	for _, sub := range subs {
		e.cstr(sub)
		e.carray(len(s[sub]))
		for _, p := range s[sub] {
			e.i32(p)
		}
		b := &encoder{}
		b.carray(len(s[sub]))
		for _, p := range s[sub] {
			ep, ok := epochs[streamsTask{sub, p}]
			if !ok {
				ep = fallback
			}
			b.i32(ep)
		}
		e.uvarint(1)
		e.tag(0, b.b)
	}
}

// activeTaskIDs reads active tasks and their AssignmentEpochs into
// epochs. A task without one (a record of Kafka 4.2-4.3, or of an older
// Gregor) was assigned at fallback, the member epoch, as Kafka 4.4 reads
// such records.
func (d *decoder) activeTaskIDs(epochs map[streamsTask]int32, fallback int32) taskSet {
	n := d.carray(3)
	out := make(taskSet, n)
	for range n {
		sub := d.cstr()
		ps := d.int32s()
		var eps []int32
		tags := d.uvarint()
		for i := uint64(0); i < tags && d.err == nil; i++ {
			tag, size := d.uvarint(), d.uvarint()
			if size > uint64(len(d.b)) {
				d.fail(errShortRecord)
				break
			}
			body := d.take(int(size))
			if tag != 0 {
				continue
			}
			if len(body) > 0 && body[0] == 0 {
				continue // null: no epochs
			}
			bd := &decoder{b: body}
			eps = bd.int32s()
			if bd.err != nil {
				d.fail(fmt.Errorf("assignment epochs of subtopology %s: %w", sub, bd.err))
			}
		}
		for i, p := range ps {
			ep := fallback
			if len(eps) == len(ps) {
				ep = eps[i]
			}
			epochs[streamsTask{sub, p}] = ep
		}
		out.add(sub, ps...)
	}
	return out
}

func (d *decoder) taskIDs() taskSet {
	n := d.carray(3)
	out := make(taskSet, n)
	for range n {
		sub := d.cstr()
		ps := d.int32s()
		d.tags() // AssignmentEpochs (tag 0), which Gregor does not use
		out.add(sub, ps...)
	}
	return out
}

func sgTargetEpochRecord(g *streamsGroup, nowMs int64) Record {
	return Record{Key: key(sgTargetMetadataKeyVersion, g.id), Value: targetEpochValue(g.assignmentEpoch, nowMs)}
}

func sgTargetMemberRecord(group, member string, t tasksTuple) Record {
	e := valueEncoder()
	e.taskIDs(t.active)
	e.taskIDs(t.standby)
	e.taskIDs(t.warmup)
	e.noTags()
	return Record{Key: key(sgTargetMemberKeyVersion, group, member), Value: e.b}
}

func decodeSGTargetMember(b []byte) (tasksTuple, error) {
	d := valueDecoder(b)
	t := tasksTuple{active: d.taskIDs(), standby: d.taskIDs(), warmup: d.taskIDs()}
	d.tags()
	return t, d.done()
}

func sgCurrentAssignmentRecord(group string, m *streamsMember) Record {
	e := valueEncoder()
	e.i32(m.epoch)
	e.i32(m.previousEpoch)
	e.i8(int8(m.state))
	e.activeTaskIDs(m.assigned.active, m.activeEpochs, m.epoch)
	e.taskIDs(m.assigned.standby)
	e.taskIDs(m.assigned.warmup)
	e.activeTaskIDs(m.revoking.active, m.activeEpochs, m.epoch)
	e.taskIDs(m.revoking.standby)
	e.taskIDs(m.revoking.warmup)
	e.noTags()
	return Record{Key: key(sgCurrentAssignmentKeyVersion, group, m.id), Value: e.b}
}

// decodeSGCurrentAssignment fills the assignment fields of m.
func decodeSGCurrentAssignment(b []byte, m *streamsMember) error {
	d := valueDecoder(b)
	m.epoch = d.i32()
	m.previousEpoch = d.i32()
	m.state = memberState(d.i8())
	m.activeEpochs = map[streamsTask]int32{}
	m.assigned = tasksTuple{active: d.activeTaskIDs(m.activeEpochs, m.epoch), standby: d.taskIDs(), warmup: d.taskIDs()}
	m.revoking = tasksTuple{active: d.activeTaskIDs(m.activeEpochs, m.epoch), standby: d.taskIDs(), warmup: d.taskIDs()}
	d.tags()
	return d.done()
}

// sgMemberTombstones deletes a member's records, current assignment
// first, as Kafka's removeMember.
func sgMemberTombstones(group, member string) []Record {
	return []Record{
		tombstone(sgCurrentAssignmentKeyVersion, group, member),
		tombstone(sgTargetMemberKeyVersion, group, member),
		tombstone(sgMemberMetadataKeyVersion, group, member),
	}
}

// streamsTombstones deletes a whole streams group, as StreamsGroup.
// createGroupTombstoneRecords.
func streamsTombstones(g *streamsGroup) []Record {
	ids := sortedKeys(g.members)
	var recs []Record
	for _, id := range ids {
		recs = append(recs, tombstone(sgCurrentAssignmentKeyVersion, g.id, id))
	}
	for _, id := range ids {
		recs = append(recs, tombstone(sgTargetMemberKeyVersion, g.id, id))
	}
	recs = append(recs, tombstone(sgTargetMetadataKeyVersion, g.id))
	for _, id := range ids {
		recs = append(recs, tombstone(sgMemberMetadataKeyVersion, g.id, id))
	}
	recs = append(recs, tombstone(sgMetadataKeyVersion, g.id), tombstone(sgTopologyKeyVersion, g.id))
	return recs
}
