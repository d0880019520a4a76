package storage

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// benchBatch is a 16 KiB batch of 1 KiB records.
func benchBatch() []byte {
	tss := make([]int64, 15)
	for i := range tss {
		tss[i] = 1_700_000_000_000 + int64(i)
	}
	return testBatch{timestamps: tss, valueSize: 1024}.build()
}

func benchFS(b *testing.B, kind string) vfs.FS {
	if kind == "os" {
		return vfs.Default
	}
	return vfs.NewMem()
}

func openBenchManager(b *testing.B, fsys vfs.FS, dir string) *Manager {
	m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: []string{dir}, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkAppend(b *testing.B) {
	for _, kind := range []string{"mem", "os"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			m := openBenchManager(b, benchFS(b, kind), dir)
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = 16 << 20
			batch := benchBatch()
			newLog := func() *Log {
				l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				return l
			}
			l := newLog()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// Bound the disk and memory a long run uses.
				if i > 0 && i%4096 == 0 {
					b.StopTimer()
					if err := m.DeleteLog("bench", 0); err != nil {
						b.Fatal(err)
					}
					l = newLog()
					b.StartTimer()
				}
				if _, err := l.Append(batch, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, kind := range []string{"mem", "os"} {
		for _, size := range []struct {
			name     string
			maxBytes int32
		}{{"one-batch", 1}, {"1MiB", 1 << 20}} {
			b.Run(kind+"/"+size.name, func(b *testing.B) {
				dir := b.TempDir()
				m := openBenchManager(b, benchFS(b, kind), dir)
				defer m.Close()
				cfg := DefaultLogConfig()
				cfg.SegmentBytes = 8 << 20
				l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				for range 2048 { // 32 MiB in 4 segments
					if _, err := l.Append(benchBatch(), 1, 0); err != nil {
						b.Fatal(err)
					}
				}
				leo := l.LogEndOffset()
				rng := rand.New(rand.NewPCG(1, 1))
				var n int64
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					r, err := l.Read(rng.Int64N(leo), size.maxBytes, leo, true)
					if err != nil {
						b.Fatal(err)
					}
					n += int64(len(r.Data))
				}
				b.SetBytes(n / int64(b.N))
			})
		}
	}
}

// BenchmarkClean cleans a 64 MiB compacted log whose keys are 10% unique
// (every key written about ten times), reporting the cleaner's throughput
// in log bytes per second. The lz4 case recompresses every batch.
func BenchmarkClean(b *testing.B) {
	const logBytes, valueSize, perBatch = 64 << 20, 256, 16
	const records = logBytes / (valueSize + 30)
	for _, tc := range []struct {
		name  string
		fs    string
		codec protocol.Codec
	}{{"mem/none", "mem", protocol.CodecNone}, {"mem/lz4", "mem", protocol.CodecLZ4}, {"os/none", "os", protocol.CodecNone}} {
		b.Run(tc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(9, 9))
			value := make([]byte, valueSize)
			var batches [][]byte
			for n := 0; n < records; n += perBatch {
				var recs []kv
				for range perBatch {
					for i := range value {
						value[i] = byte('a' + rng.IntN(4))
					}
					recs = append(recs, kv{key: fmt.Appendf(nil, "key-%07d", rng.IntN(records/10)), value: string(value)})
				}
				batches = append(batches, kbatch{recs: recs, ts: 1, codec: tc.codec}.build(b))
			}
			var size int64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fsys := benchFS(b, tc.fs)
				m := openCleanerManager(b, fsys, &testClock{}, compactConfig())
				if tc.fs == "os" {
					m.Close()
					m, _ = OpenManager(ManagerConfig{FS: fsys, Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: testCluster,
						Logger: quietLogger(), Compress: protocol.Compress,
						Decompress: func(c protocol.Codec, d []byte) ([]byte, error) { return protocol.Decompress(c, d, 64<<20) }})
				}
				cfg := compactConfig()
				cfg.SegmentBytes = 16 << 20
				l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				for _, batch := range batches {
					if _, err := l.Append(slices.Clone(batch), 1, 0); err != nil {
						b.Fatal(err)
					}
				}
				forceRoll(b, l)
				size = l.Size()
				c := NewCleaner(m, DefaultCleanerConfig())
				b.StartTimer()
				res, err := c.CleanLog(l)
				if err != nil || res == nil || res.RecordsWritten >= res.RecordsRead/5 {
					b.Fatalf("clean: %+v %v", res, err)
				}
				b.StopTimer()
				m.Close()
				b.StartTimer()
			}
			b.SetBytes(size)
		})
	}
}

// kibBatch is a batch of n records of 1 KiB each.
func kibBatch(n int) []byte {
	tss := make([]int64, n)
	for i := range tss {
		tss[i] = 1_700_000_000_000 + int64(i)
	}
	return testBatch{timestamps: tss, valueSize: 1024}.build()
}

// appendRotateBytes is the segment size of BenchmarkAppendThroughput: the
// log rolls (and fsyncs the segment it closes) there, and the dd case
// fsyncs and starts a new file there too.
const appendRotateBytes = 256 << 20

// BenchmarkAppendThroughput appends batches of 1 KiB records (16 KiB,
// 64 KiB and 1 MiB batches) to a log on the real filesystem, with Kafka's
// default flush policy (no fsync but at a roll); the dd case writes the
// same bytes with one write(2) per batch to plain files of the same
// directory, rotated and fsynced at the same size, as `dd bs=<batch>`
// would: the ceiling for the log.
func BenchmarkAppendThroughput(b *testing.B) {
	for _, size := range []struct {
		name    string
		records int
	}{{"16KiB", 16}, {"64KiB", 64}, {"1MiB", 1024}} {
		batch := kibBatch(size.records)
		// Bound the disk a long run uses: start again every 2 GiB.
		restartEvery := max((2<<30)/len(batch), 1)
		b.Run("log/"+size.name, func(b *testing.B) {
			dir := b.TempDir()
			m := openBenchManager(b, vfs.Default, dir)
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = appendRotateBytes
			newLog := func() *Log {
				l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				return l
			}
			l := newLog()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%restartEvery == 0 {
					b.StopTimer()
					if err := m.DeleteLog("bench", 0); err != nil {
						b.Fatal(err)
					}
					l = newLog()
					b.StartTimer()
				}
				if _, err := l.Append(batch, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("dd/"+size.name, func(b *testing.B) {
			dir := b.TempDir()
			var f *os.File
			var written int64
			files := 0
			next := func() {
				if f != nil {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				var err error
				files++
				if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%020d.log", files))); err != nil {
					b.Fatal(err)
				}
				written = 0
			}
			next()
			defer func() { f.Close() }()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%restartEvery == 0 {
					b.StopTimer()
					f.Close()
					f = nil
					if err := os.RemoveAll(dir); err != nil {
						b.Fatal(err)
					}
					os.MkdirAll(dir, 0o755)
					next()
					b.StartTimer()
				}
				if written+int64(len(batch)) > appendRotateBytes {
					next()
				}
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				written += int64(len(batch))
			}
		})
	}
}

var (
	storageFigures = flag.Bool("storage.figures", false,
		"measure the start-up and recovery figures of docs/performance.md (writes -storage.figures.gib of data)")
	storageFiguresGiB = flag.String("storage.figures.gib", "1,10", "comma-separated data sizes in GiB for -storage.figures")
	storageFiguresDir = flag.String("storage.figures.dir", "", "where -storage.figures writes (default: a temporary directory)")
)

// TestStartupFigures writes a log dir of each size (8 partitions, 1 MiB
// batches of 1 KiB records, 1 GiB segments as Kafka's default), then
// measures how long OpenManager takes after a clean stop, after an
// unclean one with the recovery points checkpointed (the active segments
// are scanned), and after an unclean one with no checkpoint (everything
// is scanned: the recovery scan rate), with the data in the page cache (a
// process crash) and evicted from it (a machine restart). Each start must
// find every partition's log end where it was. Without -storage.figures
// it runs once on 16 MiB in 64 KiB batches and 1 MiB segments, to keep
// the code working.
func TestStartupFigures(t *testing.T) {
	sizes := []int64{16 << 20}
	segBytes, batchRecords := int64(1<<20), 64
	if *storageFigures {
		sizes = nil
		for _, f := range strings.Split(*storageFiguresGiB, ",") {
			g, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || g <= 0 {
				t.Fatalf("bad -storage.figures.gib %q", *storageFiguresGiB)
			}
			sizes = append(sizes, int64(g*(1<<30)))
		}
		segBytes, batchRecords = DefaultLogConfig().SegmentBytes, 1024
	}
	for _, size := range sizes {
		dir := *storageFiguresDir
		if dir == "" {
			dir = t.TempDir()
		}
		dir = filepath.Join(dir, fmt.Sprintf("startup-%d", size))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		measureStartup(t, dir, size, segBytes, batchRecords)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func measureStartup(t *testing.T, dir string, size, segBytes int64, batchRecords int) {
	const parts = 8
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = segBytes
	open := func() (*Manager, time.Duration) {
		start := time.Now()
		m, err := OpenManager(ManagerConfig{FS: vfs.Default, Dirs: []string{dir}, NodeID: 1, ClusterID: testCluster,
			Logger: quietLogger(), TopicConfig: func(string) LogConfig { return cfg }})
		if err != nil {
			t.Fatal(err)
		}
		return m, time.Since(start)
	}
	// This manager is never closed: the first unclean stop.
	m, _ := open()
	batch := kibBatch(batchRecords)
	var ends [parts]int64
	for written := int64(0); written < size; {
		for p := range parts {
			l, err := m.GetOrCreateLog("fig", int32(p), [16]byte{1}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.Append(batch, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			ends[p] = res.LastOffset + 1
			written += int64(len(batch))
		}
	}
	check := func(m *Manager, what string) {
		t.Helper()
		logs := m.Logs()
		for p := range parts {
			l := logs[TopicPartition{Topic: "fig", Partition: int32(p)}]
			if l == nil || l.LogEndOffset() != ends[p] {
				t.Fatalf("%s: partition %d lost its log end %d", what, p, ends[p])
			}
		}
	}
	// After a Close, an unclean stop without a checkpoint: what a crash
	// before the first recovery-point checkpoint leaves.
	uncheckpoint := func() {
		for _, name := range []string{cleanShutdownFile, recoveryPointFile} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	report := func(what string, d time.Duration, scanned int64) {
		line := fmt.Sprintf("%.3g GiB, %s: start %v", float64(size)/(1<<30), what, d.Round(time.Millisecond))
		if scanned > 0 {
			line += fmt.Sprintf(", %.2f GB/s of log scanned", float64(scanned)/d.Seconds()/1e9)
		}
		t.Log(line)
	}

	// Unclean stop with the recovery points checkpointed as the broker's
	// periodic checkpoint leaves them: below the active segments.
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var active int64
	for _, l := range m.Logs() {
		active += l.active().size.Load()
	}
	m2, d := open()
	check(m2, "unclean, checkpointed")
	report("unclean stop, recovery points checkpointed", d, active)

	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	m3, d := open()
	check(m3, "clean")
	report("clean stop", d, 0)
	if err := m3.Close(); err != nil {
		t.Fatal(err)
	}

	// No checkpoint: everything is recovered, from the page cache.
	uncheckpoint()
	m4, d := open()
	check(m4, "unclean, no checkpoint")
	report("unclean stop, no checkpoint, data in the page cache", d, size)
	if err := m4.Close(); err != nil {
		t.Fatal(err)
	}

	// The same from the disk.
	uncheckpoint()
	var files []string
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	for _, f := range files {
		if err := evictFromCache(f); err != nil {
			t.Skipf("cannot evict from the page cache: %v", err)
		}
	}
	m5, d := open()
	check(m5, "unclean, no checkpoint, cold")
	report("unclean stop, no checkpoint, data evicted from the page cache", d, size)
	if err := m5.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDurableAppend is one append of a batch of four 1 KiB records
// to a log with flush.messages=1 on the real filesystem: the write, the
// index entries and the fsyncs of the segment's files, the time a
// durable-mode produce spends on the disk per partition.
func BenchmarkDurableAppend(b *testing.B) {
	benchDurableAppend(b, 4)
}

// BenchmarkDurableAppendBatch is BenchmarkDurableAppend with the batches
// of the end-to-end benchmark's durable case: the client sends one
// request at a time and its sticky partitioner fills one partition's
// batch meanwhile, 10 to 40 records of 1 KiB at 10,000 msg/s, so every
// append adds an index entry. It reports the fsyncs per append: 1 when
// only the .log is synced, 3 when its .index and .timeindex are too.
func BenchmarkDurableAppendBatch(b *testing.B) {
	benchDurableAppend(b, 16)
}

// benchDurableAppend appends batches of records of 1 KiB with
// flush.messages=1 on the real disk and reports the fsyncs per append.
func benchDurableAppend(b *testing.B, records int) {
	var syncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			syncs.Add(1)
		}
		return nil
	})
	m := openBenchManager(b, fsys, b.TempDir())
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Rising timestamps, as a producer's: the time index gains entries
	// along with the offset index.
	ts := make([]int64, records)
	next := func() []byte {
		for i := range ts {
			ts[i] += int64(records)
		}
		return testBatch{timestamps: ts, valueSize: 1024}.build()
	}
	for i := range ts {
		ts[i] = int64(i + 1)
	}
	b.SetBytes(int64(len(next())))
	b.ResetTimer()
	syncs.Store(0)
	for range b.N {
		b.StopTimer()
		batch := next()
		b.StartTimer()
		if _, err := l.Append(batch, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
}

// BenchmarkDurableAppendRecord is BenchmarkDurableAppend with the
// end-to-end benchmark's shape: one 1 KiB record per append (a partition's
// share of a produce at 10,000 msg/s over 16 partitions), so most appends
// add no index entry. It reports the fsyncs per append: 1 when only the
// .log is synced, up to 3 when unchanged index files are synced too.
func BenchmarkDurableAppendRecord(b *testing.B) {
	var syncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			syncs.Add(1)
		}
		return nil
	})
	m := openBenchManager(b, fsys, b.TempDir())
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l, err := m.GetOrCreateLog("bench", 0, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := testBatch{timestamps: []int64{1}, valueSize: 1024}.build()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	syncs.Store(0)
	for range b.N {
		if _, err := l.Append(batch, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
}
