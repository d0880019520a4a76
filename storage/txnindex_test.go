package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// TestAbortedTxnGolden checks the .txnindex entry layout against bytes
// written out from Kafka's AbortedTxn format: version int16 0, producer id,
// first offset, last offset, last stable offset, each int64 big-endian,
// 34 bytes in all.
func TestAbortedTxnGolden(t *testing.T) {
	entries := []AbortedTxn{
		{ProducerID: 0x0102030405060708, FirstOffset: 5, LastOffset: 9, LastStableOffset: 7},
		{ProducerID: 42, FirstOffset: 10, LastOffset: 0x1_0000_0000, LastStableOffset: 0x1_0000_0001},
	}
	want := "0000" + "0102030405060708" + "0000000000000005" + "0000000000000009" + "0000000000000007" +
		"0000" + "000000000000002a" + "000000000000000a" + "0000000100000000" + "0000000100000001"
	got := appendAbortedTxns(nil, entries)
	if hex.EncodeToString(got) != want {
		t.Fatalf("encoded\n%x\nwant\n%s", got, want)
	}
	if len(got) != 2*abortedTxnSize || abortedTxnSize != 34 {
		t.Fatalf("%d bytes for two entries", len(got))
	}
	back, err := decodeTxnIndex(got, 0)
	if err != nil || !slices.Equal(back, entries) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	// A torn last entry is ignored, as Kafka's reader ignores it.
	if back, err := decodeTxnIndex(got[:len(got)-3], 0); err != nil || !slices.Equal(back, entries[:1]) {
		t.Fatalf("torn tail: %+v, %v", back, err)
	}
	bad := map[string][]byte{
		"version 1":            append([]byte{0, 1}, got[2:abortedTxnSize]...),
		"marker below segment": got[:abortedTxnSize], // decoded for a segment at 100
		"markers out of order": append(appendAbortedTxns(nil, entries[1:]), got[:abortedTxnSize]...),
		"first after last":     appendAbortedTxns(nil, []AbortedTxn{{ProducerID: 1, FirstOffset: 9, LastOffset: 8}}),
	}
	for name, b := range bad {
		base := int64(0)
		if name == "marker below segment" {
			base = 100
		}
		if _, err := decodeTxnIndex(b, base); !errors.Is(err, errBadTxnIndex) {
			t.Errorf("%s: err = %v, want errBadTxnIndex", name, err)
		}
	}
}

// Producers of the transaction scenario below.
const (
	txnP1 = 101
	txnP2 = 102
	txnP3 = 103
)

func txnData(pid int64, seq int32, n int) kbatch {
	var recs []kv
	for i := range n {
		recs = append(recs, k(fmt.Sprintf("k%d-%d", pid, int(seq)+i), "v"))
	}
	return kbatch{recs: recs, pid: pid, seq: seq, txn: true}
}

func txnMarker(pid int64, typ int16) kbatch {
	return kbatch{marker: true, control: typ, pid: pid}
}

// appendTxnScenario writes two segments of interleaved transactions and
// returns the index entries they must produce:
//
//	segment 0: 0-1 P1 data, 2 P2 data, 3 P1 ABORT, 4 P2 data, 5 plain
//	segment 6: 6 P3 data, 7 P2 ABORT, 8 P3 COMMIT, 9 P1 data, 10 P1 ABORT
func appendTxnScenario(t *testing.T, l *Log, between func()) []AbortedTxn {
	t.Helper()
	for _, b := range []kbatch{
		txnData(txnP1, 0, 2), txnData(txnP2, 0, 1), txnMarker(txnP1, controlAbort),
		txnData(txnP2, 1, 1), {recs: []kv{k("plain", "v")}},
	} {
		mustAppend(t, l, b.build(t), 0)
	}
	forceRoll(t, l)
	if between != nil {
		between()
	}
	for _, b := range []kbatch{
		txnData(txnP3, 0, 1), txnMarker(txnP2, controlAbort), txnMarker(txnP3, controlCommit),
		txnData(txnP1, 2, 1), txnMarker(txnP1, controlAbort),
	} {
		mustAppend(t, l, b.build(t), 0)
	}
	if l.LogEndOffset() != 11 {
		t.Fatalf("log end %d, want 11", l.LogEndOffset())
	}
	return []AbortedTxn{
		// P2 is still open from 2 when P1 aborts.
		{ProducerID: txnP1, FirstOffset: 0, LastOffset: 3, LastStableOffset: 2},
		// P3 is open from 6 when P2 aborts.
		{ProducerID: txnP2, FirstOffset: 2, LastOffset: 7, LastStableOffset: 6},
		{ProducerID: txnP1, FirstOffset: 9, LastOffset: 10, LastStableOffset: 11},
	}
}

// checkTxnFiles compares each segment's .txnindex on disk with want.
func checkTxnFiles(t *testing.T, fsys vfs.FS, want map[int64][]AbortedTxn) {
	t.Helper()
	for base, entries := range want {
		b, err := vfs.ReadFile(fsys, segFile(base, txnIndexSuffix))
		if len(entries) == 0 {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("segment %d: txnindex exists (%x, %v), want none", base, b, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("segment %d: %v", base, err)
		}
		if wantB := appendAbortedTxns(nil, entries); string(b) != string(wantB) {
			got, _ := decodeTxnIndex(b, base)
			t.Errorf("segment %d txnindex holds %+v, want %+v", base, got, entries)
		}
	}
}

// checkCollect compares CollectAbortedTxns for every range of the log with
// the entries that overlap it, so the early stop never loses one.
func checkCollect(t *testing.T, l *Log, all []AbortedTxn) {
	t.Helper()
	end := l.LogEndOffset()
	for from := l.LogStartOffset(); from < end; from++ {
		for upper := from + 1; upper <= end+1; upper++ {
			got, err := l.CollectAbortedTxns(from, upper)
			if err != nil {
				t.Fatalf("collect [%d, %d): %v", from, upper, err)
			}
			var want []AbortedTxn
			for _, a := range all {
				if a.LastOffset >= from && a.FirstOffset < upper {
					want = append(want, a)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("collect [%d, %d) = %+v, want %+v", from, upper, got, want)
			}
		}
	}
}

// TestTxnIndexWrittenOnAbort: each ABORT marker that ends a transaction
// adds an entry, with the transaction's first offset and the last stable
// offset of the moment, to the index of the segment holding the marker;
// the files are Kafka's once flushed, and reads of any range find exactly
// the overlapping transactions.
func TestTxnIndexWrittenOnAbort(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	all := appendTxnScenario(t, l, nil)
	checkCollect(t, l, all)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: all[:1], 6: all[1:]})
	// A read past the last entry's stable offset stops in the first
	// segment: the second one's entries cannot overlap [0, 2).
	if got, err := l.CollectAbortedTxns(0, 2); err != nil || !slices.Equal(got, all[:1]) {
		t.Fatalf("collect [0, 2) = %+v, %v", got, err)
	}
}

// snapshotHook decodes the test's stand-in for producer snapshots:
// "pid:first" pairs separated by spaces. storage treats the bytes as
// opaque; the broker passes Kafka's format.
func snapshotHook(data []byte) (map[int64]int64, error) {
	out := map[int64]int64{}
	for _, f := range strings.Fields(string(data)) {
		pid, first, ok := strings.Cut(f, ":")
		p, err1 := strconv.ParseInt(pid, 10, 64)
		o, err2 := strconv.ParseInt(first, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad snapshot entry %q", f)
		}
		out[p] = o
	}
	return out, nil
}

func openTxnManager(t *testing.T, fsys vfs.FS, hook bool) *Manager {
	t.Helper()
	mc := ManagerConfig{
		FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Decompress: gunzip,
		Now: func() time.Time { return time.UnixMilli(0) },
	}
	if hook {
		mc.ProducerSnapshotTxns = snapshotHook
	}
	m, err := OpenManager(mc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTxnIndexRebuiltByRecovery: after a crash, recovery rebuilds the
// transaction index of the segments it re-reads (here the one after the
// checkpointed recovery point, whose index was lost), starting from the
// transactions open at the producer snapshot at its base, or from a scan
// of the log before it without a snapshot. The index below the recovery
// point is not touched.
func TestTxnIndexRebuiltByRecovery(t *testing.T) {
	for _, withSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", withSnapshot), func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTxnManager(t, fsys, withSnapshot)
			l := createTestLog(t, m, DefaultLogConfig())
			all := appendTxnScenario(t, l, func() {
				// The roll made the first segment durable and moved the
				// recovery point to 6; the checkpoint records it.
				if err := m.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				// What the broker's snapshot at the roll says is open.
				// Its P2 start of 4 (the log says 2) shows which source
				// the rebuild used.
				write(t, fsys, segFile(6, producerSnapshotSuffix), []byte("102:4"))
			})
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(segFile(6, txnIndexSuffix)); err != nil {
				t.Fatal(err)
			}
			if err := fsys.SyncDir(partDir); err != nil {
				t.Fatal(err)
			}
			fsys.Crash()

			m2 := openTxnManager(t, fsys, withSnapshot)
			defer m2.Close()
			if got := m2.recoveredSegments.Load(); got != 1 {
				t.Fatalf("recovered %d segments, want 1", got)
			}
			l2, _ := m2.Log("orders", 0)
			want := slices.Clone(all)
			if withSnapshot {
				want[1].FirstOffset = 4
			}
			checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: want[:1], 6: want[1:]})
			checkCollect(t, l2, want)
			// Recovery followed the transactions to the log end: a new
			// one aborted now gets the right entry.
			mustAppend(t, l2, txnData(txnP3, 1, 1).build(t), 0)
			mustAppend(t, l2, txnMarker(txnP3, controlAbort).build(t), 0)
			got, err := l2.CollectAbortedTxns(11, 13)
			if w := (AbortedTxn{ProducerID: txnP3, FirstOffset: 11, LastOffset: 12, LastStableOffset: 13}); err != nil || len(got) != 1 || got[0] != w {
				t.Fatalf("entry after recovery %+v, %v; want %+v", got, err, w)
			}
		})
	}
}

// TestTxnIndexAfterCleanRestart: after a clean restart nothing is
// recovered; the first marker appended follows the transactions from the
// newest snapshot at or below the log end (or the whole log without one)
// to find the aborted transaction's start.
func TestTxnIndexAfterCleanRestart(t *testing.T) {
	for _, withSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", withSnapshot), func(t *testing.T) {
			fsys := vfs.NewMem()
			m := openTxnManager(t, fsys, withSnapshot)
			l := createTestLog(t, m, DefaultLogConfig())
			appendTxnScenario(t, l, nil)
			mustAppend(t, l, txnData(txnP2, 3, 2).build(t), 0) // 11-12, open at close
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			// A clean shutdown's snapshot at the log end; it says P2
			// opened at 12 where the log says 11.
			write(t, fsys, segFile(13, producerSnapshotSuffix), []byte("102:12"))
			m2 := openTxnManager(t, fsys, withSnapshot)
			defer m2.Close()
			if got := m2.recoveredSegments.Load(); got != 0 {
				t.Fatalf("clean start recovered %d segments", got)
			}
			l2, _ := m2.Log("orders", 0)
			mustAppend(t, l2, txnMarker(txnP2, controlAbort).build(t), 0)
			first := int64(11)
			if withSnapshot {
				first = 12
			}
			got, err := l2.CollectAbortedTxns(13, 14)
			if w := (AbortedTxn{ProducerID: txnP2, FirstOffset: first, LastOffset: 13, LastStableOffset: 14}); err != nil || len(got) != 1 || got[0] != w {
				t.Fatalf("entry %+v, %v; want %+v", got, err, w)
			}
		})
	}
}

// TestTxnIndexFollower: batches a follower appends with the leader's
// offsets build the same index.
func TestTxnIndexFollower(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	defer m.Close()
	leader := createTestLog(t, m, DefaultLogConfig())
	all := appendTxnScenario(t, leader, nil)
	follower, err := m.GetOrCreateLog("orders", 1, [16]byte{1, 2, 3}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < leader.LogEndOffset(); {
		r, err := leader.Read(off, 1<<20, leader.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		res, err := follower.AppendAsFollower(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		off = res.LastOffset + 1
	}
	checkCollect(t, follower, all)
}

// TestTxnIndexTruncation: truncation drops the entries of markers at or
// above the new end (from the file too), the later segments' indexes go
// with them, and producer snapshots past the new end are removed; markers
// appended afterwards follow the transactions of the truncated log.
func TestTxnIndexTruncation(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTxnManager(t, fsys, true)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FileDeleteDelayMs = 0
	l := createTestLog(t, m, cfg)
	all := appendTxnScenario(t, l, nil)
	forceRoll(t, l) // a third, empty segment at 11
	for _, off := range []int64{6, 9, 11} {
		write(t, fsys, segFile(off, producerSnapshotSuffix), nil)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: all[:1], 6: all[1:]})

	// Cut at 10, the second P1 abort: its entry goes, P2's stays.
	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunFileDeletions(time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: all[:1], 6: all[1:2], 11: nil})
	snaps, err := listProducerSnapshots(fsys, partDir)
	if err != nil || !slices.Equal(snaps, []int64{6, 9}) {
		t.Fatalf("snapshots after truncation %v, %v; want [6 9]", snaps, err)
	}
	checkCollect(t, l, all[:2])
	// P1's transaction from 9 is open again: a new ABORT ends it.
	mustAppend(t, l, txnMarker(txnP1, controlAbort).build(t), 0)
	want := append(slices.Clone(all[:2]), AbortedTxn{ProducerID: txnP1, FirstOffset: 9, LastOffset: 10, LastStableOffset: 11})
	checkCollect(t, l, want)

	// Truncating below the first segment starts over with nothing.
	if err := l.TruncateFullyAndStartAt(20); err != nil {
		t.Fatal(err)
	}
	if snaps, err := listProducerSnapshots(fsys, partDir); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots after full truncation %v, %v", snaps, err)
	}
	if got, err := l.CollectAbortedTxns(20, 21); err != nil || len(got) != 0 {
		t.Fatalf("collect after full truncation %+v, %v", got, err)
	}
}

// TestTxnIndexDeletedWithSegment: retention renames a deleted segment's
// .txnindex .deleted with its other files and removes it after
// file.delete.delay.ms; the producer snapshots below the new first
// segment go at once.
func TestTxnIndexDeletedWithSegment(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FileDeleteDelayMs = 1000
	l := createTestLog(t, m, cfg)
	all := appendTxnScenario(t, l, nil)
	write(t, fsys, segFile(0, producerSnapshotSuffix), nil)
	write(t, fsys, segFile(6, producerSnapshotSuffix), nil)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.IncrementLogStartOffset(6); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(0)); err != nil || n != 1 {
		t.Fatalf("deleted %d segments, %v", n, err)
	}
	if _, err := fsys.Stat(segFile(0, txnIndexSuffix+deletedFileSuffix)); err != nil {
		t.Fatalf("txnindex not renamed .deleted: %v", err)
	}
	if snaps, err := listProducerSnapshots(fsys, partDir); err != nil || !slices.Equal(snaps, []int64{6}) {
		t.Fatalf("snapshots %v, %v; want [6]", snaps, err)
	}
	if _, err := m.RunFileDeletions(time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(segFile(0, txnIndexSuffix+deletedFileSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted txnindex still there: %v", err)
	}
	checkCollect(t, l, all[1:])
}

// TestTxnIndexCorruptRebuilt: an index that fails its sanity check is
// rebuilt from the log when a read needs it.
func TestTxnIndexCorruptRebuilt(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, DefaultLogConfig())
	all := appendTxnScenario(t, l, nil)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, fsys, segFile(6, txnIndexSuffix), []byte(strings.Repeat("\xff", 2*abortedTxnSize)))
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	checkCollect(t, l2, all)
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: all[:1], 6: all[1:]})
}

// TestTxnIndexKeptByCleaner: a cleaning removes an aborted transaction's
// records; while its ABORT marker stays (the cleaning saw batches of the
// transaction) the cleaned segment keeps its index entry, as Kafka's
// cleaner writes it to the cleaned index. A later cleaning that finds no
// batch of it drops the entry.
func TestTxnIndexKeptByCleaner(t *testing.T) {
	clock := &testClock{}
	fsys := vfs.NewMem()
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.01 // the second cleaning has little to do
	m := openCleanerManager(t, fsys, clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	for _, b := range []kbatch{
		{recs: []kv{k("a", "1")}},
		{recs: []kv{k("b", "aborted")}, pid: producerP, txn: true},
		txnMarker(producerP, controlAbort),
		{recs: []kv{k("a", "2")}},
		{recs: []kv{k("c", "committed")}, pid: producerP, seq: 1, txn: true},
		txnMarker(producerP, controlCommit),
	} {
		mustAppend(t, l, b.build(t), 0)
	}
	forceRoll(t, l)
	entry := AbortedTxn{ProducerID: producerP, FirstOffset: 1, LastOffset: 2, LastStableOffset: 3}
	checkCollect(t, l, []AbortedTxn{entry})
	clock.set(1)
	if res, err := NewCleaner(m, DefaultCleanerConfig()).CleanOnce(); err != nil || res == nil {
		t.Fatalf("clean: %v %v", res, err)
	}
	_, rs := dumpLog(t, l)
	if got := fmt.Sprint(rs); got != "[3:a=2 4:c=committed]" {
		t.Fatalf("records after cleaning %s", got)
	}
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: {entry}})
	checkCollect(t, l, []AbortedTxn{entry})

	// The next cleaning sees no batch of the transaction: the entry goes
	// (the marker stays until its delete horizon).
	mustAppend(t, l, kbatch{recs: []kv{k("a", "3")}}.build(t), 0)
	forceRoll(t, l)
	clock.set(2)
	if res, err := NewCleaner(m, DefaultCleanerConfig()).CleanOnce(); err != nil || res == nil {
		t.Fatalf("second clean: %v %v", res, err)
	}
	if _, rs := dumpLog(t, l); fmt.Sprint(rs) != "[4:c=committed 6:a=3]" {
		t.Fatalf("records after the second cleaning %v", rs)
	}
	checkTxnFiles(t, fsys, map[int64][]AbortedTxn{0: nil})
	checkCollect(t, l, nil)
}

// TestRollHook: the hook hears of a roll inside an append with the new
// base offset, and of retention's roll before it deletes every segment.
func TestRollHook(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	defer m.Close()
	cfg := smallConfig(200, 100)
	cfg.RetentionMs = 10
	l := createTestLog(t, m, cfg)
	var events []RollEvent
	l.OnRoll(func(e RollEvent) {
		if e.BaseOffset != l.LogEndOffset() {
			t.Errorf("roll to %d with log end %d", e.BaseOffset, l.LogEndOffset())
		}
		events = append(events, e)
	})
	for range 3 {
		mustAppend(t, l, batchOf(2, 5, 60), 0)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(1000)); err != nil || n == 0 {
		t.Fatalf("retention deleted %d, %v", n, err)
	}
	want := []RollEvent{{BaseOffset: 2, InAppend: true}, {BaseOffset: 4, InAppend: true}, {BaseOffset: 6, InAppend: false}}
	if !slices.Equal(events, want) {
		t.Fatalf("roll events %+v, want %+v", events, want)
	}
}
