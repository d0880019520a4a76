package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

func txnCommitRequest(version int16, group string, pid int64, offsets map[tp]int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID = "tx"
	req.Group = group
	req.ProducerID = pid
	for _, k := range sortedTPs(toValues(offsets)) {
		i := slices.IndexFunc(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return t.Topic == k.topic })
		if i < 0 {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = k.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = k.partition, offsets[k]
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

func toValues(m map[tp]int64) map[tp]offsetValue {
	out := make(map[tp]offsetValue, len(m))
	for k, v := range m {
		out[k] = offsetValue{offset: v}
	}
	return out
}

func txnCodes(r *kmsg.TxnOffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// TestTxnOffsetCommitWhileLoading: v0-v1 clients get COORDINATOR_NOT_AVAILABLE
// for a loading coordinator, later ones COORDINATOR_LOAD_IN_PROGRESS; a
// marker for a loading partition answers NOT_LEADER_OR_FOLLOWER so that the
// transaction coordinator retries.
func TestTxnOffsetCommitWhileLoading(t *testing.T) {
	c, err := New(testConfig(), newMemStore(), coordtest.NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const p = 2 // the partition of "g1"
	started, release := make(chan struct{}), make(chan struct{})
	loaded := make(chan error)
	go func() {
		loaded <- c.Load(ctx, p, func(yield func(Record, error) bool) {
			close(started)
			<-release
		})
	}()
	<-started
	for _, tc := range []struct {
		version int16
		want    int16
	}{
		{0, errCoordinatorNotAvailable},
		{1, errCoordinatorNotAvailable},
		{2, errCoordinatorLoadInProgress},
		{4, errCoordinatorLoadInProgress},
	} {
		r := c.TxnOffsetCommit(ctx, txnCommitRequest(tc.version, "g1", 1, map[tp]int64{{"t", 0}: 1}))()
		if got := txnCodes(r); !slices.Equal(got, []int16{tc.want}) || r.Version != tc.version {
			t.Errorf("v%d while loading = %v (version %d), want [%d]", tc.version, got, r.Version, tc.want)
		}
	}
	err = c.CompleteTransaction(ctx, p, TxnMarker{ProducerID: 1, Commit: true})
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("marker while loading = %v, want NOT_LEADER_FOR_PARTITION", err)
	}
	close(release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteTransaction(ctx, p, TxnMarker{ProducerID: 1, Commit: true}); err != nil {
		t.Errorf("marker after load = %v", err)
	}
	for _, bad := range []int32{-1, testConfig().OffsetsTopicPartitions} {
		if err := c.CompleteTransaction(ctx, bad, TxnMarker{ProducerID: 1}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("marker for partition %d = %v", bad, err)
		}
	}
}

// TestTxnOffsetCommitPlainStore: a Store without TxnStore fails
// transactional commits and markers with UNSUPPORTED_VERSION and keeps
// serving plain commits.
func TestTxnOffsetCommitPlainStore(t *testing.T) {
	cfg := testConfig()
	c, err := New(cfg, &nopPlainStore{}, coordtest.NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for p := range cfg.OffsetsTopicPartitions {
		if err := c.Load(ctx, p, coordtest.SeqOf(nil)); err != nil {
			t.Fatal(err)
		}
	}
	r := c.TxnOffsetCommit(ctx, txnCommitRequest(3, "g1", 1, map[tp]int64{{"t", 0}: 1, {"t", 1}: 2}))()
	if got := txnCodes(r); !slices.Equal(got, []int16{errUnsupportedVersion, errUnsupportedVersion}) {
		t.Errorf("txn commit = %v", got)
	}
	if err := c.CompleteTransaction(ctx, c.PartitionFor("g1"), TxnMarker{ProducerID: 1, Commit: true}); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Errorf("marker = %v", err)
	}
	if got := commitCodes(c.OffsetCommit(ctx, commitRequest("g1", 1))()); !slices.Equal(got, []int16{0}) {
		t.Errorf("plain commit = %v", got)
	}
	// The failed commit created no group.
	l := c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest())()
	if len(l.Groups) != 1 {
		t.Errorf("groups = %+v", l.Groups)
	}
}

func commitCodes(r *kmsg.OffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// txnSnapshot is what a partition's state says about offsets: committed
// offsets by group and the open transactions with their pending offsets.
// Record orders are left out: they differ between a live coordinator and a
// replay, only the outcomes they decide must not.
type txnSnapshot struct {
	committed map[string]map[tp]int64
	pending   map[int64]map[string]map[tp]int64
}

func snapshotOf(classic map[string]*classicGroup, consumers map[string]*consumerGroup, txns *txnOffsets) txnSnapshot {
	s := txnSnapshot{committed: map[string]map[tp]int64{}, pending: map[int64]map[string]map[tp]int64{}}
	add := func(id string, offsets map[tp]offsetValue) {
		if len(offsets) == 0 {
			return
		}
		m := map[tp]int64{}
		for k, v := range offsets {
			m[k] = v.offset
		}
		s.committed[id] = m
	}
	for id, g := range classic {
		add(id, g.offsets)
	}
	for id, g := range consumers {
		add(id, g.offsets)
	}
	for pid, groups := range txns.pending {
		s.pending[pid] = map[string]map[tp]int64{}
		for id, offsets := range groups {
			m := map[tp]int64{}
			for k, v := range offsets {
				m[k] = v.offset
			}
			s.pending[pid][id] = m
		}
	}
	return s
}

func (s txnSnapshot) String() string {
	var b strings.Builder
	for _, id := range sortedKeys(s.committed) {
		fmt.Fprintf(&b, "%s=%v ", id, s.committed[id])
	}
	pids := slices.Sorted(maps.Keys(s.pending))
	for _, pid := range pids {
		fmt.Fprintf(&b, "pid%d=%v ", pid, s.pending[pid])
	}
	return b.String()
}

func equalSnapshots(a, b txnSnapshot) bool {
	return maps.EqualFunc(a.committed, b.committed, maps.Equal) &&
		maps.EqualFunc(a.pending, b.pending, func(x, y map[string]map[tp]int64) bool { return maps.EqualFunc(x, y, maps.Equal) })
}

// TestTxnReplayMatchesLive drives random mixes of plain and transactional
// commits, markers, offset deletions and group deletions, and checks after
// each step that replaying the partition's log rebuilds exactly the state
// the live coordinator holds: the same committed offsets, the same pending
// ones, the same open transactions.
func TestTxnReplayMatchesLive(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			h := newHarness(t, testConfig())
			rng := rand.New(rand.NewPCG(seed, 1))
			ctx := context.Background()
			groups := []string{"g1", "simple", "other"} // g1 and simple share partition 2
			partition := h.c.PartitionFor("g1")
			if h.c.PartitionFor("simple") != partition {
				t.Fatal("test groups must share a partition")
			}
			for step := range 60 {
				g := groups[rng.IntN(2)]
				k := tp{"t", int32(rng.IntN(3))}
				pid := int64(1 + rng.IntN(3))
				var op string
				switch rng.IntN(10) {
				case 0, 1, 2:
					op = fmt.Sprintf("txn-commit %s pid=%d %v", g, pid, k)
					h.c.TxnOffsetCommit(ctx, txnCommitRequest(4, g, pid, map[tp]int64{k: int64(step)}))()
				case 3, 4:
					op = fmt.Sprintf("commit %s %v", g, k)
					req := commitRequest(g, 0)
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = k.partition, int64(step)
					req.Topics[0].Topic = k.topic
					req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
					h.c.OffsetCommit(ctx, req)()
				case 5, 6, 7:
					commit := rng.IntN(3) > 0
					op = fmt.Sprintf("end pid=%d commit=%v", pid, commit)
					if err := h.c.CompleteTransaction(ctx, partition, TxnMarker{ProducerID: pid, Commit: commit}); err != nil {
						t.Fatal(err)
					}
				case 8:
					op = fmt.Sprintf("offset-delete %s %v", g, k)
					req := kmsg.NewPtrOffsetDeleteRequest()
					req.Group = g
					req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: k.topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: k.partition}}}}
					h.c.OffsetDelete(ctx, req)()
				case 9:
					op = "delete " + g
					req := kmsg.NewPtrDeleteGroupsRequest()
					req.Groups = []string{g}
					h.c.DeleteGroups(ctx, req)()
				}
				h.quiesce()
				live := make(chan txnSnapshot, 1)
				sh := h.c.rt.ShardOf(partition)
				sh.Post(ctx, func() {
					p := sh.Machine.partitions[partition]
					live <- snapshotOf(p.groups, p.consumers, p.txns)
				})
				got := <-live
				lp, err := replay(partition, coordtest.SeqOf(h.store.Records(partition)), h.clock.Now().UnixMilli(), h.cfg.Logger)
				if err != nil {
					t.Fatal(err)
				}
				want := snapshotOf(lp.classic, lp.consumers, lp.txns)
				if !equalSnapshots(got, want) {
					t.Fatalf("step %d (%s): live %v\nreplay %v", step, op, got, want)
				}
			}
		})
	}
}

// TestTxnOffsetsReplay checks the replay rules one record sequence at a
// time: pending until the marker, commit and abort, tombstones, record
// order between plain and transactional commits.
func TestTxnOffsetsReplay(t *testing.T) {
	k := tp{"t", 0}
	plain := func(off int64) Record {
		return offsetCommitRecord("g", k, offsetValue{offset: off, leaderEpoch: -1, expireTimestamp: -1})
	}
	txn := func(pid, off int64) Record {
		r := plain(off)
		r.Transactional, r.ProducerID = true, pid
		return r
	}
	marker := func(pid int64, commit bool) Record { return markerRecord(pid, 0, 0, commit) }
	for _, tc := range []struct {
		name      string
		recs      []Record
		committed int64 // -1: none
		pending   bool
	}{
		{"pending without marker", []Record{plain(1), txn(5, 2)}, 1, true},
		{"committed", []Record{plain(1), txn(5, 2), marker(5, true)}, 2, false},
		{"aborted", []Record{plain(1), txn(5, 2), marker(5, false)}, 1, false},
		{"other producer's marker", []Record{txn(5, 2), marker(6, true)}, -1, true},
		{"later plain commit wins", []Record{txn(5, 2), plain(3), marker(5, true)}, 3, false},
		{"later txn commit wins", []Record{plain(3), txn(5, 2), marker(5, true)}, 2, false},
		{"last write in the txn wins", []Record{txn(5, 2), txn(5, 4), marker(5, true)}, 4, false},
		{"tombstone drops pending", []Record{plain(1), txn(5, 2), offsetTombstone("g", k), marker(5, true)}, -1, false},
		{"txn after tombstone", []Record{txn(5, 2), offsetTombstone("g", k), txn(5, 7), marker(5, true)}, 7, false},
		{"second txn of producer", []Record{txn(5, 2), marker(5, true), txn(5, 9)}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp, err := replay(0, coordtest.SeqOf(tc.recs), 0, testConfig().Logger)
			if err != nil {
				t.Fatal(err)
			}
			got := int64(-1)
			if g := lp.classic["g"]; g != nil {
				if o, ok := g.offsets[k]; ok {
					got = o.offset
				}
			}
			if got != tc.committed || lp.txns.hasPending("g", k) != tc.pending {
				t.Errorf("committed %d pending %v, want %d %v", got, lp.txns.hasPending("g", k), tc.committed, tc.pending)
			}
		})
	}
}
