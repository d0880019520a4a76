package share

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// stateRecordTypes lists the key types of the share-state records of a
// partition (0 snapshot, 1 update), in log order.
func stateRecordTypes(recs []coord.Record) []int16 {
	var out []int16
	for _, r := range recs {
		if t := int16(binary.BigEndian.Uint16(r.Key)); t <= updateKeyVersion {
			out = append(out, t)
		}
	}
	return out
}

// acceptOneByOne accepts offsets [from, to) in acknowledgements of one
// record each, the member's session at epoch.
func (e *env) acceptOneByOne(member string, epoch int32, from, to int64) int32 {
	e.t.Helper()
	for o := from; o < to; o++ {
		if top, code := e.ackNow(member, epoch, e.ack(o, o, ackAccept)); top != 0 || code != 0 {
			e.t.Fatalf("accept %d: %d %d", o, top, code)
		}
		epoch++
	}
	return epoch
}

// TestShareUpdateRecords: with three updates per snapshot, the writes of
// a share partition are a snapshot, three ShareUpdate records carrying
// what changed at the snapshot's epoch, a snapshot, and so on; a reload
// replays snapshot and updates to the same state, and so does a reload
// of the log as compaction leaves it (the newest snapshot and the newest
// update of the share partition).
func TestShareUpdateRecords(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.UpdatesPerSnapshot = 3; c.DeliveryCountLimit = 5 })
	e.join("a")
	if _, got := e.fetch("a", 0, 12, 12); !slices.Equal(got, []Acquired{{0, 11, 1}}) {
		t.Fatalf("a: %v", got)
	}
	epoch := e.acceptOneByOne("a", 1, 2, 9) // 0-1 stay acquired: the start offset stays 0
	if top, code := e.ackNow("a", epoch, e.ack(10, 11, ackRelease)); top != 0 || code != 0 {
		t.Fatalf("release: %d %d", top, code)
	}
	types := stateRecordTypes(e.store.Records(0))
	// The first write (the share partition's initialization when a
	// joins) is a snapshot, then (the leader's read with its leader
	// epoch, seven accepts, a release) 3 updates and a snapshot, over
	// and again.
	want := []int16{0, 1, 1, 1, 0, 1, 1, 1, 0, 1}
	if !slices.Equal(types, want) {
		t.Fatalf("record types %v, want %v", types, want)
	}
	var snapEpoch int32
	withBatches := 0
	for _, r := range e.store.Records(0) {
		switch int16(binary.BigEndian.Uint16(r.Key)) {
		case snapshotKeyVersion:
			v, err := parseSnapshotValue(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			snapEpoch = v.SnapshotEpoch
		case updateKeyVersion:
			u, err := parseUpdateValue(r.Value)
			if err != nil || u.SnapshotEpoch != snapEpoch {
				t.Fatalf("update %+v (%v) after snapshot epoch %d", u, err, snapEpoch)
			}
			if len(u.Batches) > 0 {
				withBatches++
			}
		}
	}
	if withBatches != 5 { // the leader's read changes no batch
		t.Fatalf("%d updates carry batches, want 5", withBatches)
	}
	before := e.state()
	if before.Start != 0 || before.InFlight["ACKNOWLEDGED"] != 7 || before.InFlight["ACQUIRED"] != 3 || before.InFlight["AVAILABLE"] != 2 {
		t.Fatalf("before reload: %+v", before)
	}
	e.reopen()
	after := e.state()
	// Acquired records come back AVAILABLE.
	if after.Start != 0 || after.InFlight["ACKNOWLEDGED"] != 7 || after.InFlight["AVAILABLE"] != 5 {
		t.Fatalf("after reload: %+v", after)
	}
	// The writes after the reload continue the count of updates since
	// the last snapshot (one): the leader's read and an accept are
	// updates, the next accept a snapshot.
	e.join("a")
	if _, got := e.fetch("a", 0, 12, 12); len(got) == 0 {
		t.Fatal("nothing acquired after the reload")
	}
	epoch = e.acceptOneByOne("a", 1, 0, 2)
	// Two updates after that snapshot: 11, then 10. The second carries
	// 11 too, so that it alone, over the snapshot, gives the state.
	epoch = e.acceptOneByOne("a", epoch, 11, 12)
	e.acceptOneByOne("a", epoch, 10, 11)
	if types := stateRecordTypes(e.store.Records(0)); !slices.Equal(types[len(want):], []int16{1, 1, 0, 1, 1}) {
		t.Fatalf("records after the reload: %v", types[len(want):])
	}
	full := e.state()
	if full.Start != 9 || full.InFlight["ACQUIRED"] != 1 || full.InFlight["ACKNOWLEDGED"] != 2 {
		t.Fatalf("after accepting 0-1, 11, 10: %+v", full)
	}

	// Compaction keeps the newest record of each key.
	recs := e.store.Records(0)
	newest := map[string]int{}
	for i, r := range recs {
		newest[string(r.Key)] = i
	}
	var compacted []coord.Record
	for i, r := range recs {
		if newest[string(r.Key)] == i {
			compacted = append(compacted, r)
		}
	}
	e.store = coordtest.NewMemStore()
	e.store.Inject(0, compacted...)
	e.reopen()
	if n := len(stateRecordTypes(compacted)); n != 2 {
		t.Fatalf("%d share-state records after compaction, want a snapshot and an update", n)
	}
	if got := e.state(); got.Start != 9 || got.InFlight["AVAILABLE"] != 1 || got.InFlight["ACKNOWLEDGED"] != 2 || len(got.InFlight) != 2 {
		t.Fatalf("after the compacted reload: %+v", got)
	}
}

// TestSnapshotOnlyLogLoads: a log of snapshots only (as Gregor wrote it
// before ShareUpdate records, and as it writes it with no updates per
// snapshot) loads, and the writes after it are updates of its last
// snapshot.
func TestSnapshotOnlyLogLoads(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.UpdatesPerSnapshot = 0 })
	e.join("a")
	e.fetch("a", 0, 6, 6)
	e.acceptOneByOne("a", 1, 0, 3)
	types := stateRecordTypes(e.store.Records(0))
	if slices.Contains(types, updateKeyVersion) || len(types) != 5 {
		t.Fatalf("record types %v, want snapshots only", types)
	}
	cfg := e.c.cfg
	cfg.UpdatesPerSnapshot = 500
	e.c.Close()
	c2, err := New(cfg, e.store, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	e.c = c2
	e.load()
	if got := e.state(); got.Start != 3 || got.InFlight["AVAILABLE"] != 3 {
		t.Fatalf("after loading snapshots: %+v", got)
	}
	e.join("a")
	e.fetch("a", 0, 6, 6)
	e.acceptOneByOne("a", 1, 3, 5)
	if types := stateRecordTypes(e.store.Records(0)); !slices.Equal(types[5:], []int16{1, 1, 1}) {
		t.Fatalf("records after the load: %v", types[5:])
	}
	e.reopen()
	if got := e.state(); got.Start != 5 || got.InFlight["AVAILABLE"] != 1 {
		t.Fatalf("after the second load: %+v", got)
	}
}

// TestMergeBatches: an update laid over a state, as Kafka's combiner.
func TestMergeBatches(t *testing.T) {
	old := []StateBatch{{0, 9, stateAvailable, 1}, {10, 19, stateAcknowledged, 1}}
	delta := []StateBatch{{5, 12, stateArchived, 2}}
	got := mergeBatches(old, delta, 3)
	want := []StateBatch{{3, 4, stateAvailable, 1}, {5, 12, stateArchived, 2}, {13, 19, stateAcknowledged, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("merge: %v, want %v", got, want)
	}
	if d, ok := updateDelta(old, old, want, 3); !ok || !slices.Equal(d, []StateBatch{{3, 4, stateAvailable, 1}, {5, 12, stateArchived, 2}, {13, 19, stateAcknowledged, 1}}) {
		t.Fatalf("delta: %v %v", d, ok)
	}
	if _, ok := updateDelta(old, old, []StateBatch{{0, 9, stateAvailable, 1}}, 0); ok {
		t.Fatal("a state dropping offsets 10-19 became an update")
	}
	if d, ok := updateDelta(old, old, []StateBatch{{0, 9, stateAvailable, 1}, {10, 19, stateArchived, 1}}, 0); !ok || !slices.Equal(d, []StateBatch{{10, 19, stateArchived, 1}}) {
		t.Fatalf("delta of one batch: %v %v", d, ok)
	}
}
