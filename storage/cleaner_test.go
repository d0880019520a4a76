package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// step is one action of a cleaner scenario.
type step struct {
	batch *kbatch // append it
	roll  bool    // close the active segment
	clean int64   // > 0: CleanLog with the clock at this time
}

func appendB(b kbatch) step { return step{batch: &b} }
func roll() step            { return step{roll: true} }
func cleanAt(ms int64) step { return step{clean: ms} }

const producerP = 7

// TestCleanerRules checks what a cleaning keeps, batch by batch and
// record by record, against Kafka's rules.
func TestCleanerRules(t *testing.T) {
	tests := []struct {
		name      string
		cfg       func(*LogConfig)
		producers map[int64]LastRecord // ActiveProducers; nil: derived from the log
		steps     []step
		want      string // records left, "offset:key=value" joined by spaces
		batches   string // batches left, "base-last/n" joined by spaces
	}{
		{
			name: "latest value per key; the active segment is not cleaned",
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a"), k("k2", "a")}}),
				appendB(kbatch{recs: []kv{k("k1", "b")}}),
				appendB(kbatch{recs: []kv{k("k3", "a"), k("k2", "b")}}),
				roll(),
				appendB(kbatch{recs: []kv{k("k1", "c")}}),
				cleanAt(1),
			},
			want:    "2:k1=b 3:k3=a 4:k2=b 5:k1=c",
			batches: "2-2/1 3-4/2 5-5/1",
		},
		{
			name: "tombstone gets a delete horizon, then goes after delete.retention.ms",
			cfg:  func(c *LogConfig) { c.DeleteRetentionMs = 500 },
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a"), k("k2", "a")}}),
				appendB(kbatch{recs: []kv{tomb("k1")}}),
				appendB(kbatch{recs: []kv{k("k3", "a")}}),
				roll(),
				cleanAt(1000), // keeps the tombstone, horizon 1500
				appendB(kbatch{recs: []kv{k("k4", "a")}}),
				roll(),
				cleanAt(1499), // still before the horizon
				appendB(kbatch{recs: []kv{k("k5", "a")}}),
				roll(),
				cleanAt(1500), // at the horizon: gone
			},
			want:    "1:k2=a 3:k3=a 4:k4=a 5:k5=a",
			batches: "0-1/1 3-3/1 4-4/1 5-5/1",
		},
		{
			name: "records without a key are dropped",
			steps: []step{
				appendB(kbatch{recs: []kv{nullKey("v"), k("k1", "a")}}),
				appendB(kbatch{recs: []kv{k("k2", "a")}}),
				roll(),
				cleanAt(1),
			},
			want:    "1:k1=a 2:k2=a",
			batches: "0-1/1 2-2/1",
		},
		{
			name: "emptied batches are dropped",
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a")}}),
				appendB(kbatch{recs: []kv{k("k1", "b")}}),
				appendB(kbatch{recs: []kv{k("k2", "a")}}),
				appendB(kbatch{recs: []kv{k("k2", "b")}}),
				roll(),
				appendB(kbatch{recs: []kv{k("k2", "c")}}),
				roll(),
				cleanAt(1),
			},
			want:    "1:k1=b 4:k2=c",
			batches: "1-1/1 4-4/1",
		},
		{
			name:      "the last batch before the uncleanable offset stays, emptied",
			producers: map[int64]LastRecord{},
			steps: []step{
				appendB(kbatch{recs: []kv{k("k0", "x")}}),
				appendB(kbatch{recs: []kv{k("k1", "aborted")}, pid: producerP, txn: true}),
				roll(),
				appendB(kbatch{marker: true, control: controlAbort, pid: producerP}),
				cleanAt(1),
			},
			want:    "0:k0=x",
			batches: "0-0/1 1-1/0 2-2/1",
		},
		{
			name: "the last batch of an idempotent producer stays, emptied, with its sequence",
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a"), k("k2", "a")}, pid: producerP, epoch: 2, seq: 10}),
				appendB(kbatch{recs: []kv{k("k1", "b"), k("k2", "b")}}),
				appendB(kbatch{recs: []kv{k("k3", "a")}}),
				roll(),
				cleanAt(1),
			},
			want:    "2:k1=b 3:k2=b 4:k3=a",
			batches: "0-1/0 2-3/2 4-4/1",
		},
		{
			name:      "an expired producer's batches go",
			producers: map[int64]LastRecord{},
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a"), k("k2", "a")}, pid: producerP, epoch: 2, seq: 10}),
				appendB(kbatch{recs: []kv{k("k1", "b"), k("k2", "b")}}),
				appendB(kbatch{recs: []kv{k("k3", "a")}}),
				roll(),
				cleanAt(1),
			},
			want:    "2:k1=b 3:k2=b 4:k3=a",
			batches: "2-3/2 4-4/1",
		},
		{
			name: "aborted transaction: its records go, the marker stays while a batch of it does",
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "x")}}),
				appendB(kbatch{recs: []kv{k("k1", "aborted")}, pid: producerP, txn: true}),
				appendB(kbatch{recs: []kv{k("k2", "aborted")}, pid: producerP, txn: true, seq: 1}),
				appendB(kbatch{marker: true, control: controlAbort, pid: producerP}),
				appendB(kbatch{recs: []kv{k("k3", "a")}}),
				roll(),
				cleanAt(1),
			},
			// The producer's last data batch (offset 2) stays empty, so
			// the ABORT marker stays too.
			want:    "0:k1=x 4:k3=a",
			batches: "0-0/1 2-2/0 3-3/1 4-4/1",
		},
		{
			name:      "aborted transaction of an expired producer: batches, then marker, go",
			producers: map[int64]LastRecord{},
			cfg:       func(c *LogConfig) { c.DeleteRetentionMs = 100 },
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "x")}}),
				appendB(kbatch{recs: []kv{k("k1", "aborted")}, pid: producerP, txn: true}),
				appendB(kbatch{marker: true, control: controlAbort, pid: producerP}),
				appendB(kbatch{recs: []kv{k("k3", "a")}}),
				roll(),
				cleanAt(1), // the batch goes; the marker saw it, so it stays
				appendB(kbatch{recs: []kv{k("k4", "a")}}),
				roll(),
				cleanAt(2), // the marker is alone: it gets a horizon (102)
				appendB(kbatch{recs: []kv{k("k5", "a")}}),
				roll(),
				cleanAt(102), // past the horizon: it goes
			},
			want:    "0:k1=x 3:k3=a 4:k4=a 5:k5=a",
			batches: "0-0/1 3-3/1 4-4/1 5-5/1",
		},
		{
			name:      "committed transaction: records compact as usual, the marker outlives them",
			producers: map[int64]LastRecord{},
			cfg:       func(c *LogConfig) { c.DeleteRetentionMs = 100 },
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a"), k("k2", "a")}, pid: producerP, txn: true}),
				appendB(kbatch{marker: true, control: controlCommit, pid: producerP}),
				appendB(kbatch{recs: []kv{k("k1", "b")}}),
				roll(),
				cleanAt(1), // k1=a goes, k2=a stays: the marker stays
				appendB(kbatch{recs: []kv{k("k2", "b")}}),
				roll(),
				cleanAt(2), // k2=a goes; the marker saw a batch this time still
				appendB(kbatch{recs: []kv{k("k9", "a")}}),
				roll(),
				cleanAt(3), // no batch of it left: horizon 103
				appendB(kbatch{recs: []kv{k("k8", "a")}}),
				roll(),
				cleanAt(103),
			},
			want:    "3:k1=b 4:k2=b 5:k9=a 6:k8=a",
			batches: "3-3/1 4-4/1 5-5/1 6-6/1",
		},
		{
			name: "records of an open transaction are not cleaned",
			steps: []step{
				appendB(kbatch{recs: []kv{k("k1", "a")}}),
				roll(),
				appendB(kbatch{recs: []kv{k("k1", "open")}, pid: producerP, txn: true}),
				roll(),
				appendB(kbatch{recs: []kv{k("k1", "c")}}),
				roll(),
				cleanAt(1),
			},
			want:    "0:k1=a 1:k1=open 2:k1=c",
			batches: "0-0/1 1-1/1 2-2/1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &testClock{}
			cfg := compactConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
			defer m.Close()
			l := createTestLog(t, m, cfg)
			ccfg := DefaultCleanerConfig()
			if tt.producers != nil {
				ccfg.ActiveProducers = func(TopicPartition) map[int64]LastRecord { return tt.producers }
			}
			c := NewCleaner(m, ccfg)
			for _, s := range tt.steps {
				switch {
				case s.batch != nil:
					mustAppend(t, l, s.batch.build(t), 0)
				case s.roll:
					forceRoll(t, l)
				default:
					clock.set(s.clean)
					if _, err := c.CleanLog(l); err != nil {
						t.Fatal(err)
					}
				}
			}
			bs, rs := dumpLog(t, l)
			var recs, batches []string
			for _, r := range rs {
				recs = append(recs, r.String())
			}
			for _, b := range bs {
				batches = append(batches, fmt.Sprintf("%d-%d/%d", b.base, b.last, b.n))
			}
			if got := strings.Join(recs, " "); got != tt.want {
				t.Errorf("records\n got %s\nwant %s", got, tt.want)
			}
			if got := strings.Join(batches, " "); got != tt.batches {
				t.Errorf("batches\n got %s\nwant %s", got, tt.batches)
			}
		})
	}
}

// TestCleanerKeepsBatchFields: an emptied producer batch keeps its
// producer id, epoch, sequence and last offset; a batch that loses
// records keeps its codec; one that loses none is copied byte for byte.
func TestCleanerKeepsBatchFields(t *testing.T) {
	clock := &testClock{}
	cfg := compactConfig()
	m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	mustAppend(t, l, kbatch{recs: []kv{k("p", "1"), k("q", "1")}, pid: producerP, epoch: 3, seq: 40}.build(t), 0)
	gz := kbatch{recs: []kv{k("a", "1"), k("b", "1"), k("c", "1")}, codec: protocol.CodecGzip}.build(t)
	mustAppend(t, l, gz, 0)
	untouched := kbatch{recs: []kv{k("d", "1"), k("e", "1")}, codec: protocol.CodecGzip, ts: 5}.build(t)
	mustAppend(t, l, untouched, 0)
	mustAppend(t, l, kbatch{recs: []kv{k("p", "2"), k("q", "2"), k("a", "2")}}.build(t), 0)
	forceRoll(t, l)
	if _, err := NewCleaner(m, DefaultCleanerConfig()).CleanLog(l); err != nil {
		t.Fatal(err)
	}
	data := readAll(t, l)
	var hs []protocol.BatchHeader
	var raw [][]byte
	for len(data) > 0 {
		b, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		hs, raw, data = append(hs, h), append(raw, b), rest
	}
	if len(hs) != 4 {
		t.Fatalf("%d batches", len(hs))
	}
	if h := hs[0]; h.NumRecords != 0 || h.ProducerID != producerP || h.ProducerEpoch != 3 || h.BaseSequence != 40 ||
		h.BaseOffset != 0 || h.LastOffset() != 1 || h.Codec() != protocol.CodecNone || h.PartitionLeaderEpoch != 7 {
		t.Errorf("emptied producer batch %+v", h)
	}
	if h := hs[1]; h.NumRecords != 2 || h.Codec() != protocol.CodecGzip || h.BaseOffset != 2 || h.LastOffset() != 4 {
		t.Errorf("cleaned gzip batch %+v", h)
	}
	protocol.SetBaseOffset(untouched, 5)
	protocol.SetPartitionLeaderEpoch(untouched, 7)
	if !bytes.Equal(raw[2], untouched) {
		t.Error("a batch that lost nothing was rewritten")
	}
	_, rs := dumpLog(t, l)
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if want := "3:b=1 4:c=1 5:d=1 6:e=1 7:p=2 8:q=2 9:a=2"; strings.Join(got, " ") != want {
		t.Errorf("records %s, want %s", strings.Join(got, " "), want)
	}
}

// TestCompactionHundredThousandUpdates is the compaction test:
// 100,000 updates over 1,000 keys end as exactly the latest value of each
// key, at the offset it was written, in increasing order.
func TestCompactionHundredThousandUpdates(t *testing.T) {
	clock := &testClock{}
	cfg := compactConfig()
	cfg.SegmentBytes = 256 << 10
	m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	rng := rand.New(rand.NewPCG(3, 3))
	latest := map[string]int64{}
	const updates, keys, perBatch = 100_000, 1_000, 100
	for off := 0; off < updates; off += perBatch {
		var recs []kv
		for i := range perBatch {
			key := fmt.Sprintf("key-%04d", rng.IntN(keys))
			recs = append(recs, k(key, fmt.Sprintf("v%d", off+i)))
			latest[key] = int64(off + i)
		}
		mustAppend(t, l, kbatch{recs: recs, ts: int64(off)}.build(t), 0)
	}
	forceRoll(t, l)
	before := l.Size()
	res, err := NewCleaner(m, DefaultCleanerConfig()).CleanOnce()
	if err != nil || res == nil {
		t.Fatalf("clean: %v %v", res, err)
	}
	if res.EndOffset != updates || res.RecordsRead != updates || res.RecordsWritten != int64(len(latest)) {
		t.Fatalf("result %+v", res)
	}
	_, rs := dumpLog(t, l)
	if len(rs) != len(latest) {
		t.Fatalf("%d records left, want %d", len(rs), len(latest))
	}
	for _, r := range rs {
		if latest[r.key] != r.offset || r.value != fmt.Sprintf("v%d", r.offset) {
			t.Fatalf("record %s, latest for the key is at %d", r, latest[r.key])
		}
	}
	if l.Size() >= before/10 {
		t.Fatalf("log of %d bytes is %d after cleaning", before, l.Size())
	}
	if l.LogEndOffset() != updates || l.LogStartOffset() != 0 {
		t.Fatalf("offsets %d..%d", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestCleanerSchedule: min.cleanable.dirty.ratio, min.compaction.lag.ms
// and max.compaction.lag.ms decide whether and how far CleanOnce cleans,
// and the cleaner checkpoint records where the dirty section starts.
func TestCleanerSchedule(t *testing.T) {
	const minute = 60_000
	clock := &testClock{}
	cfg := compactConfig()
	fsys := vfs.NewMem()
	m := openCleanerManager(t, fsys, clock, cfg)
	l := createTestLog(t, m, cfg)
	c := NewCleaner(m, DefaultCleanerConfig())
	write := func(ts int64, keys ...string) {
		var recs []kv
		for _, key := range keys {
			recs = append(recs, k(key, strings.Repeat("v", 100)))
		}
		mustAppend(t, l, kbatch{recs: recs, ts: ts}.build(t), 0)
		forceRoll(t, l)
	}
	// Kafka ignores first-batch timestamps of 0 for max.compaction.lag.ms.
	write(1, "a", "b", "c", "d")
	write(1, "a", "b", "c", "d")
	clock.set(10 * minute)
	res, err := c.CleanOnce()
	if err != nil || res == nil || res.EndOffset != 8 {
		t.Fatalf("first clean: %+v %v", res, err)
	}
	ckpt, _ := vfs.ReadFile(fsys, testDir+"/"+cleanerCheckpointFile)
	if string(ckpt) != "0\n1\norders 0 8\n" {
		t.Fatalf("cleaner checkpoint %q", ckpt)
	}
	// One dirty record against four clean ones: below the 0.5 ratio.
	write(1, "a")
	if res, err := c.CleanOnce(); res != nil || err != nil {
		t.Fatalf("cleaned below the dirty ratio: %+v %v", res, err)
	}
	// max.compaction.lag.ms forces it: the dirty batch is 10 minutes old.
	cfg.MaxCompactionLagMs = 5 * minute
	l.SetConfig(cfg)
	if res, err := c.CleanOnce(); err != nil || res == nil || res.FirstDirtyOffset != 8 || res.EndOffset != 9 {
		t.Fatalf("max.compaction.lag.ms did not force cleaning: %+v %v", res, err)
	}
	// min.compaction.lag.ms holds back segments younger than the lag.
	cfg.MaxCompactionLagMs = DefaultLogConfig().MaxCompactionLagMs
	cfg.MinCompactionLagMs = 5 * minute
	l.SetConfig(cfg)
	write(9*minute, "b", "c", "d", "e", "f") // dirty enough, but young
	write(2*minute, "a")
	if res, err := c.CleanOnce(); res != nil || err != nil {
		t.Fatalf("cleaned a segment younger than min.compaction.lag.ms: %+v %v", res, err)
	}
	clock.set(15 * minute)
	if res, err := c.CleanOnce(); err != nil || res == nil || res.EndOffset != 15 {
		t.Fatalf("clean after the lag: %+v %v", res, err)
	}
	_, rs := dumpLog(t, l)
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%d:%s", r.offset, r.key))
	}
	if want := "9:b 10:c 11:d 12:e 13:f 14:a"; strings.Join(got, " ") != want {
		t.Fatalf("records %s, want %s", strings.Join(got, " "), want)
	}
	// The checkpoint survives a restart: nothing is dirty.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openCleanerManager(t, fsys, clock, cfg)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	if off, ok := m2.cleanerCheckpoint(l2); !ok || off != 15 {
		t.Fatalf("checkpoint after restart %d %v", off, ok)
	}
	if res, err := NewCleaner(m2, DefaultCleanerConfig()).CleanLog(l2); res != nil || err != nil {
		t.Fatalf("cleaned a clean log: %+v %v", res, err)
	}
}

// TestCleanerDedupeBufferBound: a map too small for the dirty keys cleans
// up to the offset it reached; the next cleaning goes on from there.
func TestCleanerDedupeBufferBound(t *testing.T) {
	clock := &testClock{}
	cfg := compactConfig()
	m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	var recs []kv
	for i := range 30 {
		recs = append(recs, k(fmt.Sprintf("k%02d", i), "old"))
	}
	mustAppend(t, l, kbatch{recs: recs[:15]}.build(t), 0)
	mustAppend(t, l, kbatch{recs: recs[15:]}.build(t), 0)
	forceRoll(t, l)
	var upd []kv
	for i := range 10 {
		upd = append(upd, k(fmt.Sprintf("k%02d", i), "new"))
	}
	mustAppend(t, l, kbatch{recs: upd}.build(t), 0)
	forceRoll(t, l)

	ccfg := DefaultCleanerConfig()
	ccfg.DedupeBufferSize = 23 * offsetSlotSize // 23 slots, 20 keys at 0.9
	c := NewCleaner(m, ccfg)
	res, err := c.CleanLog(l)
	if err != nil || res == nil || !res.MapFull || res.EndOffset != 20 || res.RecordsWritten != 30 {
		t.Fatalf("first pass: %+v %v", res, err)
	}
	if len(c.omap.slots) != 23 {
		t.Fatalf("map of %d slots for a 23-slot budget", len(c.omap.slots))
	}
	res, err = c.CleanLog(l)
	if err != nil || res == nil || res.MapFull || res.FirstDirtyOffset != 20 || res.EndOffset != 40 {
		t.Fatalf("second pass: %+v %v", res, err)
	}
	_, rs := dumpLog(t, l)
	if len(rs) != 30 || rs[0].offset != 10 || rs[len(rs)-1].offset != 39 || rs[len(rs)-1].value != "new" {
		t.Fatalf("records %v", rs)
	}
}

// TestCleanerFailureLeavesLogUncleanable: a corrupt batch in a compacted
// log stops its cleaning with an error, leaves the log as it was, and
// CleanOnce skips it afterwards.
func TestCleanerFailureLeavesLogUncleanable(t *testing.T) {
	clock := &testClock{}
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	fsys := vfs.NewMem()
	m := openCleanerManager(t, fsys, clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	mustAppend(t, l, kbatch{recs: []kv{k("a", "1")}}.build(t), 0)
	mustAppend(t, l, kbatch{recs: []kv{k("a", "2")}}.build(t), 0)
	forceRoll(t, l)
	// Flip a byte of the first batch's value: its CRC no longer matches.
	f, err := fsys.OpenFile(segFile(0, logSuffix), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Seek(0, 2)
	b := make([]byte, 1)
	f.ReadAt(b, size/2-2)
	b[0] ^= 0xff
	f.WriteAt(b, size/2-2)
	f.Close()
	c := NewCleaner(m, DefaultCleanerConfig())
	if _, err := c.CleanOnce(); err == nil || !strings.Contains(err.Error(), "crc") && !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("clean of a corrupt log: %v", err)
	}
	if res, err := c.CleanOnce(); res != nil || err != nil {
		t.Fatalf("uncleanable log cleaned again: %+v %v", res, err)
	}
	if got := segmentBases(l); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("segments %v", got)
	}
	ents, _ := fsys.ReadDir(partDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedFileSuffix) || strings.HasSuffix(e.Name(), swapFileSuffix) {
			t.Fatalf("left %s", e.Name())
		}
	}
}

// TestCleanerConcurrentWithAppendsAndReads runs cleaning and file
// deletion (with no delay) while a writer appends and readers read the
// whole log over and over: reads never fail nor go backwards, and at the
// end every key's latest value is there.
func TestCleanerConcurrentWithAppendsAndReads(t *testing.T) {
	clock := &testClock{}
	cfg := compactConfig()
	cfg.SegmentBytes = 2048
	cfg.MinCleanableDirtyRatio = 0
	m := openCleanerManager(t, vfs.NewMem(), clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	c := NewCleaner(m, DefaultCleanerConfig())
	latest := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	readLoop := func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			off, last := l.LogStartOffset(), int64(-1)
			for end := l.LogEndOffset(); off < end; {
				r, err := l.Read(off, 1<<16, end, true)
				if errors.Is(err, ErrOffsetOutOfRange) {
					break // retention or a restart moved the start
				}
				if err != nil {
					errs <- err
					return
				}
				for data := r.Data; len(data) > 0; {
					batch, rest, h, err := protocol.NextBatch(data)
					if err == nil {
						err = protocol.VerifyCRC(batch)
					}
					if err == nil && h.BaseOffset <= last {
						err = fmt.Errorf("batch %d after %d", h.BaseOffset, last)
					}
					if err != nil {
						errs <- err
						return
					}
					last, off, data = h.LastOffset(), h.LastOffset()+1, rest
				}
			}
		}
	}
	wg.Add(3)
	go readLoop()
	go readLoop()
	var cleanings atomic.Int64
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := c.CleanLog(l)
			if err != nil {
				errs <- err
				return
			}
			if res != nil {
				cleanings.Add(1)
			}
			if _, err := m.RunFileDeletions(clock.now()); err != nil {
				errs <- err
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(5, 5))
	for b := range 300 {
		var recs []kv
		for i := range 5 {
			key := fmt.Sprintf("k%d", rng.IntN(20))
			val := fmt.Sprintf("%d-%d", b, i)
			recs = append(recs, k(key, val))
			latest[key] = val
		}
		mustAppend(t, l, kbatch{recs: recs}.build(t), 0)
		if b == 150 {
			// Make sure cleanings overlap the appends.
			for deadline := time.Now().Add(10 * time.Second); cleanings.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if cleanings.Load() == 0 {
		t.Fatal("no cleaning ran during the appends")
	}
	forceRoll(t, l)
	if _, err := c.CleanLog(l); err != nil {
		t.Fatal(err)
	}
	_, rs := dumpLog(t, l)
	got := map[string]string{}
	for _, r := range rs {
		got[r.key] = r.value
	}
	if len(rs) != len(latest) || fmt.Sprint(got) != fmt.Sprint(latest) {
		t.Fatalf("%d records: %v, want %v", len(rs), got, latest)
	}
}

// TestCleanedSegmentKeepsAge: a segment the cleaning empties keeps the
// modification time of the segment it replaces, so that time retention
// of a compact,delete log still deletes it (Kafka's setLastModified).
func TestCleanedSegmentKeepsAge(t *testing.T) {
	const hour = 3600_000
	clock := &testClock{}
	clock.set(10 * hour)
	cfg := compactConfig()
	cfg.Delete, cfg.RetentionMs, cfg.SegmentBytes = true, 2*hour, 100
	cfg.MinCleanableDirtyRatio = 0
	fsys := vfs.NewMem()
	m := openCleanerManager(t, fsys, clock, cfg)
	defer m.Close()
	l := createTestLog(t, m, cfg)
	mustAppend(t, l, kbatch{recs: []kv{k("k1", "a")}, ts: 9 * hour}.build(t), 0)
	mustAppend(t, l, kbatch{recs: []kv{k("k1", "b")}, ts: 9*hour + hour/2}.build(t), 0)
	mustAppend(t, l, kbatch{recs: []kv{k("k2", "x")}, ts: 9*hour + hour/2}.build(t), 0)
	if got := segmentBases(l); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("setup: segments %v", got)
	}
	old := time.UnixMilli(hour)
	if err := fsys.Chtimes(segFile(0, logSuffix), old, old); err != nil {
		t.Fatal(err)
	}
	res, err := NewCleaner(m, DefaultCleanerConfig()).CleanOnce()
	if err != nil || res == nil || res.SegmentsAfter != 2 {
		t.Fatalf("clean: %+v %v", res, err)
	}
	// The emptied segment 0 had no timestamp left: its file's age, an
	// hour, put it past retention.ms; segment 1's record is younger.
	if got := segmentBases(l); !slices.Equal(got, []int64{1, 2}) || l.LogStartOffset() != 1 {
		t.Fatalf("segments %v, start %d", got, l.LogStartOffset())
	}
}
