package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

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
