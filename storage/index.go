package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Index entry sizes, as Kafka's OffsetIndex and TimeIndex.
const (
	offsetEntrySize = 8  // int32 relative offset, int32 position
	timeEntrySize   = 12 // int64 timestamp, int32 relative offset
)

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP.
const noTimestamp = -1

// errBadIndex reports an index file that does not agree with itself or its
// segment; the index is then rebuilt from the log.
var errBadIndex = errors.New("inconsistent index")

// offsetEntry maps the last offset of a batch (relative to the segment's
// base offset) to the byte position where that batch starts.
type offsetEntry struct {
	rel int32
	pos int32
}

// timeEntry says that every record with a timestamp above ts lies after
// the offset base+rel.
type timeEntry struct {
	ts  int64
	rel int32
}

// offsetLookup returns the position to start scanning from for target: the
// entry with the largest offset <= target, or position 0.
func offsetLookup(entries []offsetEntry, base, target int64) int64 {
	rel := target - base
	i := sort.Search(len(entries), func(i int) bool { return int64(entries[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(entries[i-1].pos)
}

// timeLookup returns the entry with the largest timestamp <= ts, or
// (noTimestamp, base) when there is none, as Kafka's TimeIndex.lookup.
func timeLookup(entries []timeEntry, base, ts int64) (int64, int64) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].ts > ts })
	if i == 0 {
		return noTimestamp, base
	}
	return entries[i-1].ts, base + int64(entries[i-1].rel)
}

// lastTimeEntry returns the last entry, or (noTimestamp, base).
func lastTimeEntry(entries []timeEntry, base int64) (int64, int64) {
	if len(entries) == 0 {
		return noTimestamp, base
	}
	e := entries[len(entries)-1]
	return e.ts, base + int64(e.rel)
}

func appendOffsetEntries(dst []byte, entries []offsetEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.rel))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.pos))
	}
	return dst
}

func appendTimeEntries(dst []byte, entries []timeEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.rel))
	}
	return dst
}

// allZero reports whether b holds only zero bytes: the unused tail of an
// index file preallocated as Kafka does for its active segment.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeOffsetIndex parses a .index file and checks it against the segment:
// offsets and positions must rise and stay inside the log. A zero entry
// ends the index when everything after it is zero too (Kafka preallocates
// the active segment's index); anything else is errBadIndex.
func decodeOffsetIndex(b []byte, logSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a multiple of %d", errBadIndex, len(b), offsetEntrySize)
	}
	entries := make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{
			rel: int32(binary.BigEndian.Uint32(b[i:])),
			pos: int32(binary.BigEndian.Uint32(b[i+4:])),
		}
		if e.rel == 0 && e.pos == 0 {
			// No real entry points at position 0: an entry is written
			// only after index.interval.bytes have gone by.
			if !allZero(b[i:]) {
				return nil, fmt.Errorf("%w: zero entry %d followed by data", errBadIndex, i/offsetEntrySize)
			}
			break
		}
		if e.rel < 0 || e.pos < 0 || int64(e.pos) >= logSize {
			return nil, fmt.Errorf("%w: entry %d (%d, %d) outside a %d-byte log", errBadIndex, i/offsetEntrySize, e.rel, e.pos, logSize)
		}
		if n := len(entries); n > 0 && (e.rel <= entries[n-1].rel || e.pos <= entries[n-1].pos) {
			return nil, fmt.Errorf("%w: entry %d (%d, %d) does not follow (%d, %d)", errBadIndex, i/offsetEntrySize, e.rel, e.pos, entries[n-1].rel, entries[n-1].pos)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// decodeTimeIndex parses a .timeindex file: timestamps must rise strictly
// and offsets must not fall, as TimeIndex.maybeAppend guarantees. Zero
// padding at the end is dropped.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a multiple of %d", errBadIndex, len(b), timeEntrySize)
	}
	entries := make([]timeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		if allZero(b[i:]) {
			break
		}
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i:])),
			rel: int32(binary.BigEndian.Uint32(b[i+8:])),
		}
		if e.rel < 0 {
			return nil, fmt.Errorf("%w: time entry %d has offset %d", errBadIndex, i/timeEntrySize, e.rel)
		}
		if n := len(entries); n > 0 && (e.ts <= entries[n-1].ts || e.rel < entries[n-1].rel) {
			return nil, fmt.Errorf("%w: time entry %d (%d, %d) does not follow (%d, %d)", errBadIndex, i/timeEntrySize, e.ts, e.rel, entries[n-1].ts, entries[n-1].rel)
		}
		entries = append(entries, e)
	}
	return entries, nil
}
