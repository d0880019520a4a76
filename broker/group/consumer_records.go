package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// This file is the KIP-848 consumer group records of __consumer_offsets,
// written from Kafka 4's schemas in group-coordinator's
// common/message/ConsumerGroup*.json. kmsg does not have them. Keys are not
// flexible (int16 string lengths); values are flexible (compact lengths and
// tagged fields), each prefixed by its version, which is 0 for all of them.
// The key version is the record type, as for the classic records.

// Record types (key versions) of consumer groups.
const (
	cgMetadataKeyVersion          = 3  // ConsumerGroupMetadataKey: the group epoch
	cgPartitionMetadataKeyVersion = 4  // ConsumerGroupPartitionMetadataKey: subscribed topics' metadata
	cgMemberMetadataKeyVersion    = 5  // ConsumerGroupMemberMetadataKey: a member's subscription
	cgTargetMetadataKeyVersion    = 6  // ConsumerGroupTargetAssignmentMetadataKey: the assignment epoch
	cgTargetMemberKeyVersion      = 7  // ConsumerGroupTargetAssignmentMemberKey: a member's target
	cgCurrentAssignmentKeyVersion = 8  // ConsumerGroupCurrentMemberAssignmentKey: a member's epoch and partitions
	cgRegexKeyVersion             = 16 // ConsumerGroupRegularExpressionKey: a resolved regex
)

// topicID is a Kafka topic UUID.
type topicID [16]byte

// tpSet maps topics to sorted, distinct partitions. Nil and empty sets are
// equal; topics with no partitions are never stored.
type tpSet map[topicID][]int32

// --- encoding ---

type encoder struct{ b []byte }

func (e *encoder) i8(v int8)   { e.b = append(e.b, byte(v)) }
func (e *encoder) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) uuid(v topicID) {
	e.b = append(e.b, v[:]...)
}
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

// str is a non-flexible string: int16 length and bytes.
func (e *encoder) str(s string) {
	e.i16(int16(len(s)))
	e.b = append(e.b, s...)
}

// cstr is a compact string: uvarint length+1 and bytes.
func (e *encoder) cstr(s string) {
	e.uvarint(uint64(len(s)) + 1)
	e.b = append(e.b, s...)
}

// cnstr is a compact nullable string; nil is length 0.
func (e *encoder) cnstr(s *string) {
	if s == nil {
		e.uvarint(0)
		return
	}
	e.cstr(*s)
}

func (e *encoder) carray(n int) { e.uvarint(uint64(n) + 1) }
func (e *encoder) noTags()      { e.uvarint(0) }

func (e *encoder) cstrings(ss []string) {
	e.carray(len(ss))
	for _, s := range ss {
		e.cstr(s)
	}
}

// tps writes a []TopicPartitions of {TopicId, Partitions}, sorted by topic
// id so that equal sets encode equally.
func (e *encoder) tps(s tpSet) {
	ids := s.topics()
	e.carray(len(ids))
	for _, id := range ids {
		e.uuid(id)
		ps := s[id]
		e.carray(len(ps))
		for _, p := range ps {
			e.i32(p)
		}
		e.noTags()
	}
}

func key(version int16, fields ...string) []byte {
	e := encoder{b: make([]byte, 0, 16)}
	e.i16(version)
	for _, f := range fields {
		e.str(f)
	}
	return e.b
}

// valueEncoder starts a value of version 0.
func valueEncoder() *encoder {
	e := &encoder{b: make([]byte, 0, 64)}
	e.i16(0)
	return e
}

// --- decoding ---

var errShortRecord = errors.New("record too short")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail(errShortRecord)
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) i8() int8 {
	b := d.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (d *decoder) i16() int16 {
	b := d.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (d *decoder) i32() int32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (d *decoder) i64() int64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (d *decoder) uuid() topicID {
	var id topicID
	copy(id[:], d.take(16))
	return id
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.i16()
	if n < 0 {
		d.fail(fmt.Errorf("negative string length %d", n))
		return ""
	}
	return string(d.take(int(n)))
}

// cnstr reads a compact nullable string.
func (d *decoder) cnstr() *string {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return nil
	}
	s := string(d.take(int(n - 1)))
	return &s
}

func (d *decoder) cstr() string {
	s := d.cnstr()
	if s == nil {
		if d.err == nil {
			d.fail(errors.New("null string in a non-nullable field"))
		}
		return ""
	}
	return *s
}

// carray reads a compact array length; each element takes at least min
// bytes, which bounds the length by what is left.
func (d *decoder) carray(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n == 0 {
		d.fail(errors.New("null array in a non-nullable field"))
		return 0
	}
	n--
	if n > uint64(len(d.b)/min) {
		d.fail(errShortRecord)
		return 0
	}
	return int(n)
}

// tags skips a tagged fields section: Gregor writes none and needs none of
// those later Kafka versions add.
func (d *decoder) tags() {
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		d.uvarint() // tag
		size := d.uvarint()
		if size > math.MaxInt32 {
			d.fail(errShortRecord)
			return
		}
		d.take(int(size))
	}
}

func (d *decoder) cstrings() []string {
	n := d.carray(1)
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.cstr())
	}
	return out
}

func (d *decoder) tps() tpSet {
	n := d.carray(18)
	out := make(tpSet, n)
	for range n {
		id := d.uuid()
		ps := d.int32s()
		d.tags()
		out.add(id, ps...)
	}
	return out
}

// value checks a value's version prefix.
func valueDecoder(b []byte) *decoder {
	d := &decoder{b: b}
	if v := d.i16(); d.err == nil && v != 0 {
		d.fail(fmt.Errorf("unknown value version %d", v))
	}
	return d
}

func (d *decoder) done() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return nil
}

// --- the records ---

// cgKey is a decoded consumer group record key.
type cgKey struct {
	group  string
	member string // member records
	regex  string // regex records
}

func decodeCGKey(version int16, b []byte) (cgKey, error) {
	d := &decoder{b: b}
	d.i16()
	k := cgKey{group: d.str()}
	switch version {
	case cgMemberMetadataKeyVersion, cgTargetMemberKeyVersion, cgCurrentAssignmentKeyVersion:
		k.member = d.str()
	case cgRegexKeyVersion:
		k.regex = d.str()
	}
	return k, d.done()
}

func cgEpochRecord(group string, epoch int32) Record {
	e := valueEncoder()
	e.i32(epoch)
	e.noTags()
	return Record{Key: key(cgMetadataKeyVersion, group), Value: e.b}
}

func decodeCGEpoch(b []byte) (int32, error) {
	d := valueDecoder(b)
	epoch := d.i32()
	d.tags()
	return epoch, d.done()
}

// topicMeta is what a group knows of a subscribed topic.
type topicMeta struct {
	id         topicID
	name       string
	partitions int32
}

// cgSubscriptionMetadataRecord writes the subscribed topics' metadata,
// sorted by name. Gregor has no racks, so PartitionMetadata is empty.
func cgSubscriptionMetadataRecord(group string, meta map[string]topicMeta) Record {
	e := valueEncoder()
	names := sortedKeys(meta)
	e.carray(len(names))
	for _, n := range names {
		t := meta[n]
		e.uuid(t.id)
		e.cstr(t.name)
		e.i32(t.partitions)
		e.carray(0)
		e.noTags()
	}
	e.noTags()
	return Record{Key: key(cgPartitionMetadataKeyVersion, group), Value: e.b}
}

func decodeCGSubscriptionMetadata(b []byte) (map[string]topicMeta, error) {
	d := valueDecoder(b)
	n := d.carray(22)
	out := make(map[string]topicMeta, n)
	for range n {
		t := topicMeta{id: d.uuid(), name: d.cstr(), partitions: d.i32()}
		racks := d.carray(5)
		for range racks {
			d.i32()
			d.cstrings()
			d.tags()
		}
		d.tags()
		out[t.name] = t
	}
	d.tags()
	return out, d.done()
}

// memberSubscription is a ConsumerGroupMemberMetadataValue.
type memberSubscription struct {
	instanceID         *string
	rackID             *string
	clientID           string
	clientHost         string
	topicNames         []string
	regex              *string
	rebalanceTimeoutMs int32
	serverAssignor     *string
	classic            *classicMeta
}

func cgMemberRecord(group string, m *consumerMember) Record {
	e := valueEncoder()
	e.cnstr(m.instanceID)
	e.cnstr(m.rackID)
	e.cstr(m.clientID)
	e.cstr(m.clientHost)
	e.cstrings(m.topicNames)
	e.cnstr(optString(m.regex))
	e.i32(m.rebalanceTimeoutMs)
	e.cnstr(optString(m.serverAssignor))
	if m.classic == nil {
		e.noTags()
	} else {
		// ClassicMemberMetadata is tagged field 0, a nullable struct:
		// its size counts the presence byte (1) in front of it.
		body := &encoder{}
		body.i32(m.classic.sessionTimeoutMs)
		body.carray(len(m.classic.protocols))
		for _, p := range m.classic.protocols {
			body.cstr(p.name)
			body.cbytes(p.metadata)
			body.noTags()
		}
		body.noTags()
		e.uvarint(1) // one tagged field
		e.uvarint(0) // tag 0
		e.uvarint(uint64(len(body.b)) + 1)
		e.uvarint(1) // present
		e.b = append(e.b, body.b...)
	}
	return Record{Key: key(cgMemberMetadataKeyVersion, group, m.id), Value: e.b}
}

// cbytes is compact bytes: uvarint length+1 and the bytes.
func (e *encoder) cbytes(b []byte) {
	e.uvarint(uint64(len(b)) + 1)
	e.b = append(e.b, b...)
}

// cbytes reads compact (non-null) bytes.
func (d *decoder) cbytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.fail(errors.New("null bytes in a non-nullable field"))
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return nil
	}
	return slices.Clone(d.take(int(n - 1)))
}

// memberTags reads a member record's tagged fields, keeping
// ClassicMemberMetadata (tag 0) and skipping the others.
func (d *decoder) memberTags() *classicMeta {
	var out *classicMeta
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		tag := d.uvarint()
		size := d.uvarint()
		if size > uint64(len(d.b)) {
			d.fail(errShortRecord)
			return nil
		}
		body := d.take(int(size))
		if tag != 0 || d.err != nil {
			continue
		}
		bd := &decoder{b: body}
		if present := bd.uvarint(); present == 0 || bd.err != nil {
			continue // null
		}
		c := &classicMeta{sessionTimeoutMs: bd.i32()}
		np := bd.carray(3)
		for range np {
			c.protocols = append(c.protocols, protocol{name: bd.cstr(), metadata: bd.cbytes()})
			bd.tags()
		}
		bd.tags()
		if err := bd.done(); err != nil {
			d.fail(fmt.Errorf("ClassicMemberMetadata: %w", err))
			return nil
		}
		out = c
	}
	return out
}

func decodeCGMember(b []byte) (memberSubscription, error) {
	d := valueDecoder(b)
	s := memberSubscription{
		instanceID: d.cnstr(),
		rackID:     d.cnstr(),
		clientID:   d.cstr(),
		clientHost: d.cstr(),
		topicNames: d.cstrings(),
		regex:      d.cnstr(),
	}
	s.rebalanceTimeoutMs = d.i32()
	s.serverAssignor = d.cnstr()
	s.classic = d.memberTags()
	return s, d.done()
}

func cgTargetEpochRecord(group string, epoch int32, timestampMs int64) Record {
	return Record{Key: key(cgTargetMetadataKeyVersion, group), Value: targetEpochValue(epoch, timestampMs)}
}

// targetEpochValue is the value of ConsumerGroupTargetAssignmentMetadata
// and StreamsGroupTargetAssignmentMetadata: the assignment epoch and, as
// tagged field 0 (AssignmentTimestamp, KIP-1263), when the target was
// computed, which spaces the next one (the *.assignment.interval.ms
// configs). 0 is the field's default, which Kafka does not write.
func targetEpochValue(epoch int32, timestampMs int64) []byte {
	e := valueEncoder()
	e.i32(epoch)
	if timestampMs == 0 {
		e.noTags()
		return e.b
	}
	b := &encoder{}
	b.i64(timestampMs)
	e.uvarint(1)
	e.tag(0, b.b)
	return e.b
}

// decodeTargetEpoch reads a targetEpochValue; the timestamp is 0 when the
// record has none (written before Kafka 4.3, or by a converted group).
func decodeTargetEpoch(b []byte) (epoch int32, timestampMs int64, err error) {
	d := valueDecoder(b)
	epoch = d.i32()
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		tag := d.uvarint()
		size := d.uvarint()
		if size > math.MaxInt32 {
			d.fail(errShortRecord)
			break
		}
		field := d.take(int(size))
		if tag == 0 && d.err == nil {
			f := &decoder{b: field}
			timestampMs = f.i64()
			if f.err != nil {
				d.fail(f.err)
			}
		}
	}
	return epoch, timestampMs, d.done()
}

func cgTargetMemberRecord(group, member string, target tpSet) Record {
	e := valueEncoder()
	e.tps(target)
	e.noTags()
	return Record{Key: key(cgTargetMemberKeyVersion, group, member), Value: e.b}
}

func decodeCGTargetMember(b []byte) (tpSet, error) {
	d := valueDecoder(b)
	s := d.tps()
	d.tags()
	return s, d.done()
}

// currentAssignment is a ConsumerGroupCurrentMemberAssignmentValue.
type currentAssignment struct {
	epoch, previousEpoch int32
	state                memberState
	assigned, revoking   tpSet
}

func cgCurrentAssignmentRecord(group string, m *consumerMember) Record {
	e := valueEncoder()
	e.i32(m.epoch)
	e.i32(m.previousEpoch)
	e.i8(int8(m.state))
	e.tps(m.assigned)
	e.tps(m.revoking)
	e.noTags()
	return Record{Key: key(cgCurrentAssignmentKeyVersion, group, m.id), Value: e.b}
}

func decodeCGCurrentAssignment(b []byte) (currentAssignment, error) {
	d := valueDecoder(b)
	c := currentAssignment{epoch: d.i32(), previousEpoch: d.i32(), state: memberState(d.i8())}
	c.assigned = d.tps()
	c.revoking = d.tps()
	d.tags()
	return c, d.done()
}

// resolvedRegex is a regex subscription resolved against the topics.
type resolvedRegex struct {
	topics    []string // sorted
	version   int64    // the topics snapshot it was resolved against
	timestamp int64
}

func cgRegexRecord(group, regex string, r resolvedRegex) Record {
	e := valueEncoder()
	e.cstrings(r.topics)
	e.i64(r.version)
	e.i64(r.timestamp)
	e.noTags()
	return Record{Key: key(cgRegexKeyVersion, group, regex), Value: e.b}
}

func decodeCGRegex(b []byte) (resolvedRegex, error) {
	d := valueDecoder(b)
	r := resolvedRegex{topics: d.cstrings(), version: d.i64(), timestamp: d.i64()}
	d.tags()
	slices.Sort(r.topics)
	return r, d.done()
}

func tombstone(version int16, fields ...string) Record {
	return Record{Key: key(version, fields...)}
}

// --- tpSet helpers ---

func (s tpSet) topics() []topicID {
	ids := make([]topicID, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b topicID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// add inserts partitions, keeping the topic's list sorted and distinct.
func (s tpSet) add(id topicID, ps ...int32) {
	if len(ps) == 0 {
		return
	}
	// One partition past the last is the usual case (nextAssignment walks
	// sorted lists): appending it needs no sort. Sorting the whole list
	// for each made a member's reconciliation quadratic in its partitions,
	// 10,000 for the first member of a burst of joins (issue 17).
	if cur := s[id]; len(ps) == 1 && (len(cur) == 0 || ps[0] > cur[len(cur)-1]) {
		s[id] = append(cur, ps[0])
		return
	}
	cur := append(s[id], ps...)
	slices.Sort(cur)
	s[id] = slices.Compact(cur)
}

func (s tpSet) has(id topicID, p int32) bool {
	_, ok := slices.BinarySearch(s[id], p)
	return ok
}

func (s tpSet) size() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s tpSet) clone() tpSet {
	out := make(tpSet, len(s))
	for id, ps := range s {
		out[id] = slices.Clone(ps)
	}
	return out
}

func (s tpSet) equal(o tpSet) bool {
	if len(s) != len(o) {
		return false
	}
	for id, ps := range s {
		if !slices.Equal(ps, o[id]) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
