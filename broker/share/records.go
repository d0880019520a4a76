package share

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gregorbroker/gregor/broker/coord"
)

// The records of __share_group_state, in Kafka's share coordinator
// schemas: ShareSnapshotKey / ShareSnapshotValue (key type 0), the whole
// state of a share partition, and ShareUpdateKey / ShareUpdateValue (key
// type 1), what changed since: as Kafka's share coordinator, Gregor
// writes updates between snapshots, a snapshot again after
// share.coordinator.snapshot.update.records.per.snapshot updates of a
// share partition, and replays a snapshot and the updates after it.
const (
	snapshotKeyVersion   int16 = 0
	updateKeyVersion     int16 = 1
	snapshotValueVersion int16 = 0
	updateValueVersion   int16 = 0
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

// snapshotValue is ShareSnapshotValue v0, and, in its unexported fields,
// what the share coordinator knows of the records it wrote of the share
// partition: a share partition's durable state.
type snapshotValue struct {
	SnapshotEpoch   int32
	StateEpoch      int32
	LeaderEpoch     int32
	StartOffset     int64
	CreateTimestamp int64
	WriteTimestamp  int64
	Batches         []StateBatch

	// logged says the log holds a snapshot of the share partition, with
	// snapshotBatches, and the updates after it add up to loggedBatches
	// at loggedStateEpoch; updates counts those updates.
	logged           bool
	snapshotBatches  []StateBatch
	loggedBatches    []StateBatch
	loggedStateEpoch int32
	updates          int
	// writes counts the appends issued (see durableUndo).
	writes uint64
}

// updateValue is ShareUpdateValue v0: the batches that changed, and the
// start offset (-1: unchanged) and leader epoch (-1: unchanged).
type updateValue struct {
	SnapshotEpoch int32
	LeaderEpoch   int32
	StartOffset   int64
	Batches       []StateBatch
}

var errShortRecord = errors.New("share record too short")

func snapshotKey(group string, k partKey) []byte {
	return stateKey(snapshotKeyVersion, group, k)
}

func updateKey(group string, k partKey) []byte {
	return stateKey(updateKeyVersion, group, k)
}

// stateKey is a ShareSnapshotKey or ShareUpdateKey: the same fields.
func stateKey(version int16, group string, k partKey) []byte {
	b := make([]byte, 0, 2+2+len(group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
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
	b = appendBatches(b, v.Batches)
	return append(b, 0) // no tagged fields
}

// encode writes ShareUpdateValue v0 in its flexible encoding.
func (u updateValue) encode() []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(updateValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(u.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(u.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(u.StartOffset))
	b = appendBatches(b, u.Batches)
	return append(b, 0) // no tagged fields
}

// appendBatches writes the compact array of StateBatch.
func appendBatches(b []byte, batches []StateBatch) []byte {
	b = binary.AppendUvarint(b, uint64(len(batches)+1))
	for _, sb := range batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.State))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.Deliveries))
		b = append(b, 0) // no tagged fields
	}
	return b
}

func (r *reader) batches() []StateBatch {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n-1 > uint64(len(r.b)/20) {
		r.err = errShortRecord
		return nil
	}
	out := make([]StateBatch, 0, n-1)
	for range n - 1 {
		sb := StateBatch{First: r.i64(), Last: r.i64(), State: r.i8(), Deliveries: r.i16()}
		r.skipTags()
		out = append(out, sb)
	}
	return out
}

func parseUpdateValue(b []byte) (updateValue, error) {
	r := &reader{b: b}
	var u updateValue
	if ver := r.i16(); r.err == nil && ver != updateValueVersion {
		return u, fmt.Errorf("share update value version %d", ver)
	}
	u.SnapshotEpoch, u.LeaderEpoch, u.StartOffset = r.i32(), r.i32(), r.i64()
	u.Batches = r.batches()
	r.skipTags()
	return u, r.err
}

// mergeBatches is the state of old with the batches of delta laid over
// it (each offset delta covers takes delta's state and count), without
// the offsets below start, in offset order with equal neighbours joined,
// as Kafka's PersisterStateBatchCombiner combines them.
func mergeBatches(old, delta []StateBatch, start int64) []StateBatch {
	delta = slices.Clone(delta)
	slices.SortFunc(delta, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	var out []StateBatch
	for _, b := range old {
		first := b.First
		// delta's ranges overlapping b, in order, cut b into pieces.
		k, _ := slices.BinarySearchFunc(delta, first, func(d StateBatch, off int64) int {
			return cmp.Compare(d.Last, off)
		})
		for first <= b.Last {
			if k >= len(delta) || delta[k].First > b.Last {
				out = append(out, StateBatch{First: first, Last: b.Last, State: b.State, Deliveries: b.Deliveries})
				break
			}
			if d := delta[k]; d.First > first {
				out = append(out, StateBatch{First: first, Last: d.First - 1, State: b.State, Deliveries: b.Deliveries})
			}
			first = max(first, delta[k].Last+1)
			k++
		}
	}
	out = append(out, delta...)
	slices.SortFunc(out, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	merged := out[:0]
	for _, b := range out {
		if b.Last < start {
			continue
		}
		b.First = max(b.First, start)
		if n := len(merged) - 1; n >= 0 && merged[n].Last+1 == b.First && merged[n].State == b.State && merged[n].Deliveries == b.Deliveries {
			merged[n].Last = b.Last
			continue
		}
		merged = append(merged, b)
	}
	return merged
}

// updateDelta is next as an update of both the last snapshot (snap) and
// the state the records after it add up to (logged): the batches of
// next, from start on, that snap and logged do not both hold as they are.
// Laid over either it gives next, so the update stays right when
// compaction of __share_group_state keeps only the newest update of a
// share partition after its snapshot (records only move forward: an
// offset changed since the snapshot differs from it in every later
// state, so its batch is in every later update). False when next cannot
// be an update: an offset from start on that snap or logged covers is
// not in next (replaying would keep their state of it).
func updateDelta(snap, logged, next []StateBatch, start int64) ([]StateBatch, bool) {
	if !covers(next, snap, start) || !covers(next, logged, start) {
		return nil, false
	}
	inSnap := make(map[StateBatch]bool, len(snap))
	for _, b := range snap {
		inSnap[b] = true
	}
	inLogged := make(map[StateBatch]bool, len(logged))
	for _, b := range logged {
		inLogged[b] = true
	}
	var delta []StateBatch
	for _, b := range next {
		if b.Last < start || inSnap[b] && inLogged[b] {
			continue
		}
		b.First = max(b.First, start)
		delta = append(delta, b)
	}
	return delta, true
}

// covers reports whether every offset from start on of the batches of
// prev is in a batch of next (both in offset order).
func covers(next, prev []StateBatch, start int64) bool {
	j := 0
	for _, b := range prev {
		for off := max(b.First, start); off <= b.Last; {
			for j < len(next) && next[j].Last < off {
				j++
			}
			if j >= len(next) || next[j].First > off {
				return false
			}
			off = next[j].Last + 1
		}
	}
	return true
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
	v.Batches = r.batches()
	r.skipTags()
	return v, r.err
}
