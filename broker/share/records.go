package share

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/broker/coord"
)

// The records of __share_group_state, in Kafka's share coordinator
// schemas (ShareSnapshotKey / ShareSnapshotValue, key type 0). Gregor
// writes a whole snapshot of a share partition on every change it must
// keep, so it needs no ShareUpdate records (key type 1): compaction keeps
// the newest snapshot of each share partition.
const (
	snapshotKeyVersion   int16 = 0
	updateKeyVersion     int16 = 1
	snapshotValueVersion int16 = 0
)

// Record is a record of __share_group_state.
type Record = coord.Record

// partKey names a share partition: a topic partition by topic id, within a
// group.
type partKey struct {
	topic     [16]byte
	partition int32
}

// StateBatch is a StateBatch of a snapshot and of the share-state RPCs:
// a run of offsets with one delivery state and delivery count.
type StateBatch struct {
	First, Last int64
	State       int8
	Deliveries  int16
}

// snapshotValue is ShareSnapshotValue v0.
type snapshotValue struct {
	SnapshotEpoch   int32
	StateEpoch      int32
	LeaderEpoch     int32
	StartOffset     int64
	CreateTimestamp int64
	WriteTimestamp  int64
	Batches         []StateBatch
}

var errShortRecord = errors.New("share record too short")

func snapshotKey(group string, k partKey) []byte {
	b := make([]byte, 0, 2+2+len(group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(snapshotKeyVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	b = append(b, group...)
	b = append(b, k.topic[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.partition))
}

// parseKey reads a ShareSnapshotKey or ShareUpdateKey (same fields).
func parseKey(b []byte) (group string, k partKey, version int16, err error) {
	if len(b) < 4 {
		return "", k, 0, errShortRecord
	}
	version = int16(binary.BigEndian.Uint16(b))
	n := int(int16(binary.BigEndian.Uint16(b[2:])))
	b = b[4:]
	if n < 0 || len(b) < n+20 {
		return "", k, 0, errShortRecord
	}
	group = string(b[:n])
	copy(k.topic[:], b[n:n+16])
	k.partition = int32(binary.BigEndian.Uint32(b[n+16:]))
	return group, k, version, nil
}

// encode writes the value in the flexible (compact) encoding of v0, with no
// tagged fields: DeliveryCompleteCount (tag 0) keeps its default.
func (v snapshotValue) encode() []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(snapshotValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(v.CreateTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(v.WriteTimestamp))
	b = binary.AppendUvarint(b, uint64(len(v.Batches)+1))
	for _, sb := range v.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.State))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.Deliveries))
		b = append(b, 0) // no tagged fields
	}
	return append(b, 0) // no tagged fields
}

// reader reads a value's fields in order; the first short read sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = errShortRecord
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) i8() int8   { return int8(r.take(1)[0]) }
func (r *reader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *reader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *reader) i64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

// skipTags skips a tagged-field section.
func (r *reader) skipTags() {
	for range r.uvarint() {
		r.uvarint() // tag
		r.take(int(r.uvarint()))
	}
}

func parseSnapshotValue(b []byte) (snapshotValue, error) {
	r := &reader{b: b}
	var v snapshotValue
	if ver := r.i16(); r.err == nil && ver != snapshotValueVersion {
		return v, fmt.Errorf("share snapshot value version %d", ver)
	}
	v.SnapshotEpoch, v.StateEpoch, v.LeaderEpoch = r.i32(), r.i32(), r.i32()
	v.StartOffset, v.CreateTimestamp, v.WriteTimestamp = r.i64(), r.i64(), r.i64()
	n := r.uvarint()
	if n > 0 && r.err == nil {
		if n-1 > uint64(len(r.b)/20) {
			return v, errShortRecord
		}
		for range n - 1 {
			sb := StateBatch{First: r.i64(), Last: r.i64(), State: r.i8(), Deliveries: r.i16()}
			r.skipTags()
			v.Batches = append(v.Batches, sb)
		}
	}
	r.skipTags()
	return v, r.err
}
