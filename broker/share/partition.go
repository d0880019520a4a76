package share

import (
	"slices"
	"time"
)

// Record states, numbered as Kafka's RecordState (and as the DeliveryState
// of ShareSnapshot records).
const (
	stateAvailable    int8 = 0
	stateAcquired     int8 = 1
	stateAcknowledged int8 = 2
	stateArchived     int8 = 4
)

// Acknowledge types of ShareFetch and ShareAcknowledge.
const (
	ackGap     int8 = 0
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
	ackRenew   int8 = 4
)

// inflight is one record of a share partition between its start offset and
// its end.
type inflight struct {
	state      int8
	deliveries int16
	member     string    // the holder while ACQUIRED
	deadline   time.Time // when an ACQUIRED record's lock expires
	// writing marks a record an acknowledgement released while its
	// write is in flight: no one acquires it until the write is done,
	// so that a failed write can give it back to its member (Kafka's
	// SharePartition does not acquire a record with a state transition
	// in progress).
	writing bool
}

// Batch describes one record batch read from the partition's log, in
// offset order: what an acquisition may hand out.
type Batch struct {
	First, Last int64
	// Skip is set for batches no consumer sees: control batches
	// (transaction markers) and, under read_committed, aborted
	// transactional batches. Their offsets are archived as they pass.
	Skip bool
}

// Acquired is a range of offsets acquired by one member with one
// delivery count (AcquiredRecords of ShareFetch).
type Acquired struct {
	First, Last int64
	Deliveries  int16
}

// partitionState is a share partition: the records of one topic partition
// as one share group consumes them (SharePartition in Kafka). Offsets
// below start are done (acknowledged or archived); offsets in [start, end)
// are in flight and in recs unless the log has no record there (a gap);
// offsets from end on were never acquired.
type partitionState struct {
	topic      string
	start      int64
	end        int64
	recs       map[int64]*inflight
	created    int64 // ms, for the snapshot record
	stateEpoch int32
	snapshots  int32 // snapshot epoch: one more per snapshot written
	// leaderEpoch is the data partition's leader epoch at the last
	// snapshot (-1 when unknown).
	leaderEpoch int32
	// floor is the highest log start offset skipTo moved to: records
	// below it are gone from the log and never come back in a rollback.
	floor int64
}

// undoRec is one record an acknowledgement changed, kept until the
// acknowledgement's write is done so that a failed write can be rolled
// back (Kafka's SharePartition rolls back the state transitions of a
// failed persister write).
type undoRec struct {
	off   int64
	cur   *inflight // the record as the acknowledgement left it
	after inflight  // its value then
	prev  *inflight // a copy of the record before; nil when there was none
}

func newPartitionState(topic string, start int64, nowMs int64) *partitionState {
	return &partitionState{topic: topic, start: start, end: start, recs: make(map[int64]*inflight), created: nowMs, leaderEpoch: -1}
}

// readFrom is the offset a fetch should read the log from: the first
// AVAILABLE record in flight, or the end.
func (ps *partitionState) readFrom() int64 {
	first := ps.end
	for off, r := range ps.recs {
		if r.state == stateAvailable && off < first {
			first = off
		}
	}
	return first
}

// acquire hands the AVAILABLE and new records of batches to member, at
// most maxRecords of them (finishing the batch it is in unless
// exactRecords, KIP-1206's record-limit mode) and never more than
// maxLocks offsets in flight. It returns the ranges acquired, each with
// the delivery count the member is told. An AVAILABLE record already
// delivered limit times is archived instead: it comes back so from a
// snapshot that wrote it while it was acquired for its last delivery
// (ACQUIRED is written as AVAILABLE), whose holder never acknowledged it
// before a restart or a change of leader. archived reports whether it
// did, a change to keep.
func (ps *partitionState) acquire(batches []Batch, member string, maxRecords int, exactRecords bool, maxLocks int64, limit int16, deadline time.Time) (out []Acquired, archived bool) {
	n := 0
	add := func(off int64, d int16) {
		n++
		if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].Deliveries == d {
			out[k].Last = off
			return
		}
		out = append(out, Acquired{First: off, Last: off, Deliveries: d})
	}
	for _, b := range batches {
		if n >= maxRecords {
			break
		}
		for off := max(b.First, ps.start); off <= b.Last; off++ {
			if exactRecords && n >= maxRecords {
				break
			}
			if off < ps.end {
				r := ps.recs[off]
				if r == nil || r.state != stateAvailable || r.writing {
					continue
				}
				if r.deliveries >= limit {
					r.state, archived = stateArchived, true
					continue
				}
				r.state, r.member, r.deadline = stateAcquired, member, deadline
				r.deliveries++
				add(off, r.deliveries)
				continue
			}
			if off-ps.start >= maxLocks {
				ps.advance()
				return out, archived
			}
			// A hole between the end and this batch holds no record
			// (compaction, or a batch that ended early): nothing to
			// deliver there.
			ps.end = off + 1
			if b.Skip {
				ps.recs[off] = &inflight{state: stateArchived}
				continue
			}
			ps.recs[off] = &inflight{state: stateAcquired, deliveries: 1, member: member, deadline: deadline}
			add(off, 1)
		}
	}
	ps.advance()
	return out, archived
}

// ackCheck reports whether member may acknowledge [first, last] with
// types: every record there it holds, except gaps and offsets below the
// start offset, which are done already and ignored as Kafka ignores them.
// It answers the error code Kafka gives (INVALID_REQUEST for a malformed
// batch, INVALID_RECORD_STATE for a record not acquired by member).
func (ps *partitionState) ackCheck(member string, first, last int64, types []int8, renewOK bool) int16 {
	if last < first || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1) {
		return errInvalidRequest
	}
	for i := first; i <= last; i++ {
		t := ackType(types, first, i)
		if t < ackGap || t > ackRenew || (t == ackRenew && !renewOK) {
			return errInvalidRequest
		}
		if t == ackGap || i < ps.start {
			continue
		}
		r := ps.recs[i]
		if i >= ps.end || r == nil || r.state != stateAcquired || r.member != member {
			return errInvalidRecordState
		}
	}
	return 0
}

func ackType(types []int8, first, off int64) int8 {
	if len(types) == 1 {
		return types[0]
	}
	return types[off-first]
}

// acknowledge applies an acknowledgement ackCheck accepted. A released
// record that reached the delivery limit is archived instead; a renewed
// one keeps its lock for another lock duration from now. It returns what
// it changed, for rollback.
func (ps *partitionState) acknowledge(first, last int64, types []int8, limit int16, renewDeadline time.Time) []undoRec {
	var undo []undoRec
	for i := first; i <= last; i++ {
		t := ackType(types, first, i)
		r := ps.recs[i]
		if i >= ps.start && i < ps.end && (r != nil || t == ackGap) {
			u := undoRec{off: i}
			if r != nil {
				c := *r
				u.prev = &c
			}
			undo = append(undo, u)
		}
		switch {
		case i < ps.start:
		case t == ackGap:
			if i < ps.end {
				ps.recs[i] = &inflight{state: stateArchived}
			}
		case r == nil:
		case t == ackAccept:
			r.state, r.member = stateAcknowledged, ""
		case t == ackRelease:
			ps.releaseOne(r, limit)
			r.writing = r.state == stateAvailable
		case t == ackReject:
			r.state, r.member = stateArchived, ""
		case t == ackRenew:
			r.deadline = renewDeadline
		}
	}
	for j := range undo {
		if r := ps.recs[undo[j].off]; r != nil {
			undo[j].cur, undo[j].after = r, *r
		}
	}
	ps.advance()
	return undo
}

// rollback undoes an acknowledgement whose write failed: each record it
// changed gets its value from before, and the start offset moves back
// below it if it had moved past. A record changed since by something
// else (a released record acquired again meanwhile) keeps its new value,
// and one below the log start offset stays gone. It reports whether
// anything was rolled back.
func (ps *partitionState) rollback(undo []undoRec) bool {
	changed, start := false, ps.start
	for _, u := range undo {
		if u.off < ps.floor || u.cur == nil {
			continue
		}
		now := ps.recs[u.off]
		switch {
		case now == nil && u.off < start: // the start offset moved past it
		case now != nil && now == u.cur && *now == u.after:
		default:
			if now != nil && now == u.cur {
				now.writing = false
			}
			continue
		}
		if u.prev == nil {
			delete(ps.recs, u.off)
		} else {
			c := *u.prev
			ps.recs[u.off] = &c
		}
		ps.start = min(ps.start, u.off)
		changed = true
	}
	if changed {
		ps.advance()
	}
	return changed
}

// written ends the hold on the records an acknowledgement released, its
// write done; it reports whether any was held.
func (ps *partitionState) written(undo []undoRec) bool {
	released := false
	for _, u := range undo {
		if r := ps.recs[u.off]; r != nil && r == u.cur && r.writing {
			r.writing = false
			released = true
		}
	}
	return released
}

// releaseOne makes an acquired record available again, or archives it once
// it was delivered limit times.
func (ps *partitionState) releaseOne(r *inflight, limit int16) {
	r.member = ""
	if r.deliveries >= limit {
		r.state = stateArchived
		return
	}
	r.state = stateAvailable
}

// releaseMember releases every record member holds (it left the group or
// closed its share session); it reports whether any was.
func (ps *partitionState) releaseMember(member string, limit int16) bool {
	changed := false
	for _, r := range ps.recs {
		if r.state == stateAcquired && r.member == member {
			ps.releaseOne(r, limit)
			changed = true
		}
	}
	if changed {
		ps.advance()
	}
	return changed
}

// expire releases the records whose acquisition lock ended by now; it
// reports whether any did.
func (ps *partitionState) expire(now time.Time, limit int16) bool {
	changed := false
	for _, r := range ps.recs {
		if r.state == stateAcquired && !r.deadline.After(now) {
			ps.releaseOne(r, limit)
			changed = true
		}
	}
	if changed {
		ps.advance()
	}
	return changed
}

// nextDeadline is the earliest lock expiry, if any record is acquired.
func (ps *partitionState) nextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	for _, r := range ps.recs {
		if r.state == stateAcquired && (!found || r.deadline.Before(next)) {
			next, found = r.deadline, true
		}
	}
	return next, found
}

// advance moves the start offset past the records that are done
// (acknowledged, archived, or no record at all) and forgets them.
func (ps *partitionState) advance() {
	for ps.start < ps.end {
		r := ps.recs[ps.start]
		if r != nil && (r.state == stateAvailable || r.state == stateAcquired) {
			return
		}
		delete(ps.recs, ps.start)
		ps.start++
	}
}

// skipTo moves the start offset up to logStart, the partition's log start
// offset, when retention or DeleteRecords removed records the group had
// not finished: they can no longer be delivered, so they leave the state
// (Kafka moves the share-partition start offset the same way). It
// reports whether anything changed.
func (ps *partitionState) skipTo(logStart int64) bool {
	ps.floor = max(ps.floor, logStart)
	if logStart <= ps.start {
		return false
	}
	for off := range ps.recs {
		if off < logStart {
			delete(ps.recs, off)
		}
	}
	ps.start = logStart
	ps.end = max(ps.end, logStart)
	ps.advance()
	return true
}

// stateBatches is the in-flight state as ShareSnapshot state batches:
// runs of offsets with one state and delivery count. An ACQUIRED record is
// written as AVAILABLE, as Kafka persists it, so that after a restart it
// is delivered again; its delivery count stays.
func (ps *partitionState) stateBatches() []StateBatch {
	offs := make([]int64, 0, len(ps.recs))
	for off := range ps.recs {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	var out []StateBatch
	for _, off := range offs {
		r := ps.recs[off]
		st := r.state
		if st == stateAcquired {
			st = stateAvailable
		}
		if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].State == st && out[k].Deliveries == r.deliveries {
			out[k].Last = off
			continue
		}
		out = append(out, StateBatch{First: off, Last: off, State: st, Deliveries: r.deliveries})
	}
	return out
}

// restore rebuilds a share partition from a snapshot: offsets the
// batches cover are in flight with their state, and the end is past the
// last of them.
func restore(topic string, v snapshotValue) *partitionState {
	ps := newPartitionState(topic, v.StartOffset, v.CreateTimestamp)
	ps.stateEpoch, ps.snapshots, ps.leaderEpoch = v.StateEpoch, v.SnapshotEpoch, v.LeaderEpoch
	for _, b := range v.Batches {
		for off := max(b.First, v.StartOffset); off <= b.Last; off++ {
			st := b.State
			if st == stateAcquired {
				st = stateAvailable
			}
			ps.recs[off] = &inflight{state: st, deliveries: b.Deliveries}
			ps.end = max(ps.end, off+1)
		}
	}
	ps.advance()
	return ps
}

// counts returns how many records are in flight by state, for tests and
// describe calls.
func (ps *partitionState) counts() map[int8]int {
	out := map[int8]int{}
	for _, r := range ps.recs {
		out[r.state]++
	}
	return out
}
