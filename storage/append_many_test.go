package storage

import (
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// manyLogs creates n logs of one topic in dir.
func manyLogs(tb testing.TB, m *Manager, n int) []*Log {
	tb.Helper()
	cfg := DefaultLogConfig()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := m.GetOrCreateLog("many", int32(i), [16]byte{5}, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		logs[i] = l
	}
	return logs
}

// appendAllocBudget is the heap allocations a steady-state Append of one
// batch to one of many partitions may make on average: none (the batch
// headers go to the log's scratch slice, the bytes to the file with one
// pwrite, index entries to memory, amortized); the margin is for the
// index slices' occasional growth.
const appendAllocBudget = 0.05

// TestAppendManyPartitionsAllocs: appending one small batch to each of
// 1,000 partitions, as a 1,000-partition produce request does, allocates
// nothing per partition in steady state, with the .log files opened on
// demand.
func TestAppendManyPartitionsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	m := openBoundedManager(t, vfs.Default, fastTempDir(t), 0, 0)
	defer m.Close()
	logs := manyLogs(t, m, 1000)
	batch := batchOf(1, 1, 100)
	round := func() {
		for _, l := range logs {
			if _, err := l.Append(batch, 1, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	round() // the first append opens each .log
	perRound := testing.AllocsPerRun(20, round)
	per := perRound / float64(len(logs))
	t.Logf("%.4f allocations per append (%.1f per round of %d)", per, perRound, len(logs))
	if per > appendAllocBudget {
		t.Fatalf("%.3f allocations per append to one of %d partitions, budget %.2f", per, len(logs), appendAllocBudget)
	}
}

// BenchmarkAppendManyPartitions appends one 1 KiB-record batch to each of
// 1,000 partitions in turn on the OS filesystem: the storage share of a
// 1,000-partition produce. One op is one partition's append.
func BenchmarkAppendManyPartitions(b *testing.B) {
	m := openBenchManager(b, vfs.Default, b.TempDir())
	defer m.Close()
	logs := manyLogs(b, m, 1000)
	batch := batchOf(1, 1, 1024)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := logs[i%len(logs)].Append(batch, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}
