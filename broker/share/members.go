package share

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gregorbroker/gregor/broker/coord"
)

// The membership records of a share group, in the schemas of Kafka's
// group coordinator (ShareGroupMemberMetadata, ShareGroupMetadata,
// ShareGroupTargetAssignmentMember, ShareGroupTargetAssignmentMetadata,
// ShareGroupCurrentMemberAssignment): the key's version is the record
// type, as in every coordinator record of Kafka, and every value is
// version 0 in the flexible encoding. Kafka writes them to
// __consumer_offsets; Gregor keeps a share group's membership with the
// leader of its __share_group_state partition, so it writes them there,
// next to the group's ShareSnapshot records, and replays both in one load.
const (
	recMemberMetadata    int16 = 10
	recGroupMetadata     int16 = 11
	recTargetMetadata    int16 = 12
	recTargetMember      int16 = 13
	recCurrentAssignment int16 = 14

	// memberStateStable is MemberState.STABLE: share members have
	// nothing to revoke, so they are always stable.
	memberStateStable int8 = 0
)

// groupRecordKey is the key of a record of one group (types 11 and 12).
func groupRecordKey(typ int16, group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typ))
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	return append(b, group...)
}

// memberRecordKey is the key of a record of one member (types 10, 13, 14).
func memberRecordKey(typ int16, group, member string) []byte {
	b := groupRecordKey(typ, group)
	b = binary.BigEndian.AppendUint16(b, uint16(len(member)))
	return append(b, member...)
}

func appendCompactString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)+1))
	return append(b, s...)
}

func appendCompactNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendCompactString(b, *s)
}

// appendAssignment writes an assignment as the compact array of
// (TopicId, Partitions) of ShareGroupTargetAssignmentMemberValue and
// ShareGroupCurrentMemberAssignmentValue, topics in id order.
func appendAssignment(b []byte, a assignment) []byte {
	ids := sortedIDs(a)
	b = binary.AppendUvarint(b, uint64(len(ids)+1))
	for _, id := range ids {
		b = append(b, id[:]...)
		b = binary.AppendUvarint(b, uint64(len(a[id])+1))
		for _, p := range a[id] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		b = append(b, 0) // no tagged fields
	}
	return b
}

func valueHeader() []byte { return binary.BigEndian.AppendUint16(nil, 0) }

// memberMetadataRecord is ShareGroupMemberMetadata: what the member said
// about itself.
func memberMetadataRecord(group string, mem *member) Record {
	v := appendCompactNullableString(valueHeader(), mem.rack)
	v = appendCompactString(v, mem.clientID)
	v = appendCompactString(v, mem.clientHost)
	v = binary.AppendUvarint(v, uint64(len(mem.subscribed)+1))
	for _, t := range mem.subscribed {
		v = appendCompactString(v, t)
	}
	return Record{Key: memberRecordKey(recMemberMetadata, group, mem.id), Value: append(v, 0)}
}

// groupMetadataRecord is ShareGroupMetadata: the group epoch. Gregor
// recomputes the assignment from the topics at every heartbeat, so it
// keeps no metadata hash (Kafka's, of the subscribed topics, lets it see
// at load that they changed) and writes 0.
func groupMetadataRecord(group string, epoch int32) Record {
	v := binary.BigEndian.AppendUint32(valueHeader(), uint32(epoch))
	v = binary.BigEndian.AppendUint64(v, 0)
	return Record{Key: groupRecordKey(recGroupMetadata, group), Value: append(v, 0)}
}

// targetMetadataRecord is ShareGroupTargetAssignmentMetadata: the epoch of
// the target assignment and, as tagged field 0 (AssignmentTimestamp,
// KIP-1263), when it was computed; 0, the field's default, is not written.
func targetMetadataRecord(group string, epoch int32, timestampMs int64) Record {
	v := binary.BigEndian.AppendUint32(valueHeader(), uint32(epoch))
	if timestampMs == 0 {
		return Record{Key: groupRecordKey(recTargetMetadata, group), Value: append(v, 0)}
	}
	v = append(v, 1, 0, 8) // one tagged field: tag 0, 8 bytes
	v = binary.BigEndian.AppendUint64(v, uint64(timestampMs))
	return Record{Key: groupRecordKey(recTargetMetadata, group), Value: v}
}

// targetMemberRecord is ShareGroupTargetAssignmentMember: a member's
// partitions in the target assignment.
func targetMemberRecord(group, memberID string, a assignment) Record {
	v := appendAssignment(valueHeader(), a)
	return Record{Key: memberRecordKey(recTargetMember, group, memberID), Value: append(v, 0)}
}

// currentAssignmentRecord is ShareGroupCurrentMemberAssignment: the
// member's epoch and the partitions it was given with it.
func currentAssignmentRecord(group string, mem *member, previousEpoch int32) Record {
	v := binary.BigEndian.AppendUint32(valueHeader(), uint32(mem.epoch))
	v = binary.BigEndian.AppendUint32(v, uint32(previousEpoch))
	v = append(v, byte(memberStateStable))
	v = appendAssignment(v, mem.assigned)
	return Record{Key: memberRecordKey(recCurrentAssignment, group, mem.id), Value: append(v, 0)}
}

// memberTombstones forget a member: its current assignment, its target
// assignment and its metadata, in the order Kafka writes them when a
// member leaves or is fenced.
func memberTombstones(group, memberID string) []Record {
	return []Record{
		{Key: memberRecordKey(recCurrentAssignment, group, memberID)},
		{Key: memberRecordKey(recTargetMember, group, memberID)},
		{Key: memberRecordKey(recMemberMetadata, group, memberID)},
	}
}

// groupTombstones forget an empty group's membership records.
func groupTombstones(group string) []Record {
	return []Record{
		{Key: groupRecordKey(recTargetMetadata, group)},
		{Key: groupRecordKey(recGroupMetadata, group)},
	}
}

// record queues a membership record of g; the operation under way writes
// the queued records with commit (revert.go) before it answers.
func (m *machine) record(g *groupState, recs ...Record) {
	m.pending[g.partition] = append(m.pending[g.partition], recs...)
	g.version++
}

// flushMembership appends the queued membership records and calls done
// with the first error code once they are in the log (at once when none
// is queued).
func (m *machine) flushMembership(done func(code int16)) {
	if len(m.pending) == 0 {
		done(0)
		return
	}
	pending := m.pending
	m.pending = map[int32][]Record{}
	left, first := len(pending), int16(0)
	for p, recs := range pending {
		m.s.Append(p, recs, func(err error) {
			if c := coord.AppendErrorCode(err, nil); c != 0 && first == 0 {
				m.log.Warn("write share group membership", "partition", p, "err", err)
				first = c
			}
			if left--; left == 0 {
				done(first)
			}
		})
	}
}

// recordTarget queues the records of a new target assignment, after the
// group epoch's (updateTarget): each member's target that changed (a
// tombstone for one gone), and the assignment epoch and time, as Kafka's
// heartbeat writes them.
func (m *machine) recordTarget(g *groupState, old map[string]assignment) {
	for _, id := range sortedMembers(g.target) {
		if prev, ok := old[id]; !ok || !equalTargets(map[string]assignment{id: prev}, map[string]assignment{id: g.target[id]}) {
			m.record(g, targetMemberRecord(g.id, id, g.target[id]))
		}
	}
	for _, id := range sortedMembers(old) {
		if _, ok := g.target[id]; !ok {
			m.record(g, Record{Key: memberRecordKey(recTargetMember, g.id, id)})
		}
	}
	m.record(g, targetMetadataRecord(g.id, g.assignmentEpoch, g.assignmentTimestampMs))
}

func sortedMembers(t map[string]assignment) []string {
	ids := make([]string, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// loadedMembership is what a replay found of one group's membership.
type loadedMembership struct {
	epoch   int32
	hasMeta bool
	// assignmentEpoch and assignmentTimestampMs are the target's
	// (ShareGroupTargetAssignmentMetadata).
	assignmentEpoch       int32
	assignmentTimestampMs int64
	members               map[string]*member
	target                map[string]assignment
	current               map[string]*member // epoch and assigned, by member id
}

func (l *loadedMembership) ensure() {
	if l.members == nil {
		l.members, l.target, l.current = map[string]*member{}, map[string]assignment{}, map[string]*member{}
	}
}

// keyReader reads a membership record key: its strings have int16
// lengths (the keys are not flexible).
func keyStrings(b []byte, n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, errShortRecord
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		b = b[2:]
		if l < 0 || len(b) < l {
			return nil, errShortRecord
		}
		out = append(out, string(b[:l]))
		b = b[l:]
	}
	return out, nil
}

func (r *reader) compactString() string {
	n := r.uvarint()
	if n == 0 {
		return ""
	}
	return string(r.take(int(n - 1)))
}

func (r *reader) compactNullableString() *string {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	s := string(r.take(int(n - 1)))
	return &s
}

func (r *reader) assignment() assignment {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n-1 > uint64(len(r.b)/17) {
		r.err = errShortRecord
		return nil
	}
	a := assignment{}
	for range n - 1 {
		var id [16]byte
		copy(id[:], r.take(16))
		np := r.uvarint()
		if np > 0 && np-1 > uint64(len(r.b)/4) {
			r.err = errShortRecord
			return nil
		}
		var parts []int32
		for range max(np, 1) - 1 {
			parts = append(parts, r.i32())
		}
		r.skipTags()
		a[id] = parts
	}
	return a
}

// replayMembership applies one membership record (key type typ) to the
// groups being loaded.
func replayMembership(groups map[string]*loadedMembership, typ int16, key, value []byte) error {
	nkeys := 2
	if typ == recGroupMetadata || typ == recTargetMetadata {
		nkeys = 1
	}
	ks, err := keyStrings(key[2:], nkeys)
	if err != nil {
		return fmt.Errorf("key of record type %d: %w", typ, err)
	}
	l := groups[ks[0]]
	if l == nil {
		l = &loadedMembership{}
		groups[ks[0]] = l
	}
	l.ensure()
	if value == nil {
		switch typ {
		case recMemberMetadata:
			delete(l.members, ks[1])
		case recTargetMember:
			delete(l.target, ks[1])
		case recCurrentAssignment:
			delete(l.current, ks[1])
		case recGroupMetadata:
			delete(groups, ks[0])
		}
		return nil
	}
	r := &reader{b: value}
	if ver := r.i16(); r.err == nil && ver != 0 {
		return fmt.Errorf("record type %d value version %d", typ, ver)
	}
	switch typ {
	case recMemberMetadata:
		mem := &member{id: ks[1]}
		mem.rack = r.compactNullableString()
		mem.clientID, mem.clientHost = r.compactString(), r.compactString()
		n := r.uvarint()
		if n > 0 && n-1 > uint64(len(r.b)) {
			return fmt.Errorf("member metadata of %s: %w", ks[1], errShortRecord)
		}
		for range max(n, 1) - 1 {
			mem.subscribed = append(mem.subscribed, r.compactString())
		}
		l.members[ks[1]] = mem
	case recGroupMetadata:
		l.epoch, l.hasMeta = r.i32(), true
		r.i64() // metadata hash
	case recTargetMetadata:
		l.assignmentEpoch = r.i32()
		for range r.uvarint() {
			tag, size := r.uvarint(), r.uvarint()
			field := r.take(int(size))
			if tag == 0 && r.err == nil {
				f := &reader{b: field}
				l.assignmentTimestampMs = f.i64()
				r.err = f.err
			}
		}
		if r.err != nil {
			return fmt.Errorf("value of record type %d: %w", typ, r.err)
		}
		return nil
	case recTargetMember:
		l.target[ks[1]] = r.assignment()
	case recCurrentAssignment:
		cur := &member{id: ks[1], epoch: r.i32()}
		r.i32() // previous epoch
		r.i8()  // state: always stable
		cur.assigned = r.assignment()
		l.current[ks[1]] = cur
	}
	r.skipTags()
	if r.err != nil {
		return fmt.Errorf("value of record type %d: %w", typ, r.err)
	}
	return nil
}

// restoreMembership gives a replayed group its members, epochs and
// assignments.
func restoreMembership(g *groupState, l *loadedMembership) {
	g.epoch, g.exists = l.epoch, true
	g.assignmentEpoch, g.assignmentTimestampMs = l.assignmentEpoch, l.assignmentTimestampMs
	g.members = map[string]*member{}
	g.target = map[string]assignment{}
	for id, mem := range l.members {
		if cur := l.current[id]; cur != nil {
			mem.epoch, mem.assigned = cur.epoch, cur.assigned
		}
		g.members[id] = mem
		if a, ok := l.target[id]; ok {
			if a == nil {
				a = assignment{}
			}
			g.target[id] = a
		}
	}
}
