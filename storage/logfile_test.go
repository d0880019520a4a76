package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// openBoundedManager opens dir on fsys with at most maxOpen segment files
// open and the given idle time.
func openBoundedManager(t testing.TB, fsys vfs.FS, dir string, maxOpen int, idle time.Duration) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerConfig{
		FS: fsys, Dirs: []string{dir}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Decompress: gunzip,
		Now:                 func() time.Time { return time.UnixMilli(0) },
		MaxOpenSegmentFiles: maxOpen, SegmentFileIdle: idle,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fastTempDir is a temporary directory on tmpfs when there is one, where
// an fsync costs nothing: creating 2,000 partitions syncs 6,000 times.
func fastTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "gregor-storage-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// checkBatches checks that data is exactly want, batch by batch.
func checkBatches(t testing.TB, what string, data []byte, want ...appended) {
	t.Helper()
	var all []byte
	for _, a := range want {
		all = append(all, a.data...)
	}
	if !bytes.Equal(data, all) {
		t.Fatalf("%s: read %d bytes that differ from the %d appended", what, len(data), len(all))
	}
}

// TestManyIdlePartitionsFewFiles: 2,000 partitions hold no file open when
// created and after a restart, and at most the cache's bound once each was
// appended to; every partition still reads (copying and as a FileSlice)
// and appends after its .log was closed, before and after the restart.
func TestManyIdlePartitionsFewFiles(t *testing.T) {
	const partitions, bound = 2000, 64
	dir := fastTempDir(t)
	m := openBoundedManager(t, vfs.Default, dir, bound, time.Hour)
	defer func() { m.Close() }()
	cfg := smallConfig(1<<20, 4096)
	logs := make([]*Log, partitions)
	for i := range logs {
		l, err := m.GetOrCreateLog("idle", int32(i), [16]byte{9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	fds := func(max int, what string) {
		t.Helper()
		if got := openFilesUnder(t, dir); len(got) > max {
			t.Fatalf("%s: %d files open under the data dir, want at most %d (%v...)", what, len(got), max, got[:min(len(got), 5)])
		}
	}
	fds(0, "2,000 new partitions")

	first := make([]appended, partitions)
	for i, l := range logs {
		first[i] = mustAppend(t, l, batchOf(2, int64(i), 30), 0)
	}
	// Opens past the bound start a sweep at once; this one waits for the
	// result (a sweep skips nothing here: no read is in flight).
	m.files.sweep(time.Now())
	fds(bound, "after one append to each")

	second := make([]appended, partitions)
	for i, l := range logs {
		r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		checkBatches(t, fmt.Sprintf("partition %d, read", i), r.Data, first[i])
		second[i] = mustAppend(t, l, batchOf(1, int64(i), 20), 0)
		if second[i].base != 2 {
			t.Fatalf("partition %d: second append at %d, want 2", i, second[i].base)
		}
	}
	m.files.sweep(time.Now())
	fds(bound, "after reads and appends")
	for i, l := range logs {
		r, err := l.ReadSlice(0, 1<<20, l.LogEndOffset(), true)
		if err != nil || r.Slice == nil {
			t.Fatalf("partition %d: slice %v, %v", i, r.Slice, err)
		}
		checkBatches(t, fmt.Sprintf("partition %d, slice", i), sliceBytes(t, r.Slice), first[i], second[i])
		r.Slice.Release()
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fds(0, "after Close")
	m = openBoundedManager(t, vfs.Default, dir, bound, time.Hour)
	fds(0, "after a restart")
	for i := range logs {
		l, ok := m.Log("idle", int32(i))
		if !ok {
			t.Fatalf("partition %d not loaded", i)
		}
		checkBatches(t, fmt.Sprintf("partition %d after the restart", i), readAll(t, l), first[i], second[i])
		if a := mustAppend(t, l, batchOf(1, 5, 10), 0); a.base != 3 {
			t.Fatalf("partition %d: append after the restart at %d, want 3", i, a.base)
		}
	}
	m.files.sweep(time.Now())
	fds(bound, "after reads and appends since the restart")
}

// TestFileSlicesRaceTheCloser: fetches that send FileSlices (read through
// the *os.File with pread, as sendfile reads it), copying reads, appends
// and flushes run while the cache closes every file it can, all the time:
// no read fails or sees other bytes than were appended, and the log ends
// with everything appended.
func TestFileSlicesRaceTheCloser(t *testing.T) {
	dir := t.TempDir()
	m := openBoundedManager(t, vfs.Default, dir, 1, time.Millisecond)
	defer m.Close()
	l, err := m.GetOrCreateLog("race", 0, [16]byte{7}, smallConfig(8<<10, 256))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var written []appended // guarded by mu; offsets ascending
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Value
	fail := func(err error) { errs.CompareAndSwap(nil, err) }

	wg.Add(1)
	go func() { // the closer, far more eager than its timer
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.files.sweep(time.Now().Add(time.Hour))
		}
	}()
	wg.Add(1)
	go func() { // the appender, flushing now and then
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			batch := batchOf(1+i%3, int64(i), 50+i%200)
			res, err := l.Append(batch, 7, int64(i))
			if err != nil {
				fail(fmt.Errorf("append: %w", err))
				return
			}
			a := appended{base: res.FirstOffset, last: res.LastOffset, data: batch}
			mu.Lock()
			written = append(written, a)
			mu.Unlock()
			if i%16 == 0 {
				if err := l.Flush(); err != nil {
					fail(fmt.Errorf("flush: %w", err))
					return
				}
			}
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() { // fetchers
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				n := len(written)
				var pick appended
				if n > 0 {
					pick = written[rng.IntN(n)]
				}
				mu.Unlock()
				if n == 0 {
					continue
				}
				res, err := l.ReadSlice(pick.base, 4<<10, l.LogEndOffset(), true)
				if err != nil {
					fail(fmt.Errorf("slice at %d: %w", pick.base, err))
					return
				}
				if res.Slice == nil {
					fail(fmt.Errorf("slice at %d: nothing below the log end %d", pick.base, res.LogEndOffset))
					return
				}
				// Let the closer try while the slice is out.
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				f, pos := res.Slice.File()
				b := make([]byte, res.Slice.Len())
				if _, err := f.ReadAt(b, pos); err != nil {
					fail(fmt.Errorf("pread of a slice at %d: %w", pick.base, err))
					return
				}
				res.Slice.Release()
				h, err := protocol.ParseBatchHeader(b)
				if err != nil || h.BaseOffset != pick.base || !bytes.Equal(b[:h.Size()], pick.data) {
					fail(fmt.Errorf("slice at %d: batch at %d (%v), want the one appended", pick.base, h.BaseOffset, err))
					return
				}
				cr, err := l.Read(pick.base, 4<<10, l.LogEndOffset(), true)
				if err != nil || !bytes.HasPrefix(cr.Data, pick.data) {
					fail(fmt.Errorf("copying read at %d: %v", pick.base, err))
					return
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err, _ := errs.Load().(error); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, "the whole log", readAll(t, l), written...)
	if len(l.segments()) < 3 {
		t.Fatalf("%d segments: the test wants rolls too", len(l.segments()))
	}
}

// TestIdleCloseSyncsFirst: a .log closed by the cache while it held
// unsynced appends was synced first, so the appends survive a crash even
// though the log never flushed them. (The log is flushed once while
// empty: that syncs its creation, which CreateLogs leaves to the first
// flush.)
func TestIdleCloseSyncsFirst(t *testing.T) {
	mem := vfs.NewMem()
	m := openBoundedManager(t, mem, testDir, 100, time.Hour)
	l := createTestLog(t, m, smallConfig(1<<20, 4096))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var want []appended
	for i := range 5 {
		want = append(want, mustAppend(t, l, batchOf(2, int64(i), 40), 0))
	}
	m.files.sweep(time.Now().Add(2 * time.Hour))
	if n := m.files.openCount(); n != 0 {
		t.Fatalf("%d files open after the sweep, want 0", n)
	}
	mem.Crash()
	m2 := openBoundedManager(t, mem, testDir, 100, time.Hour)
	defer m2.Close()
	l2, ok := m2.Log(l.tp.Topic, l.tp.Partition)
	if !ok {
		t.Fatal("the log was not loaded after the crash")
	}
	checkBatches(t, "after the crash", readAll(t, l2), want...)
}

// TestIdleCloseSyncFailureReachesFlush: when the cache's sync before a
// close fails, the file stays open and the log's next flush fails with it
// (a sync through another descriptor might not report it), which makes
// the error sticky as any failed fsync does.
func TestIdleCloseSyncFailureReachesFlush(t *testing.T) {
	var failSync atomic.Bool
	errDisk := errors.New("injected sync failure")
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && failSync.Load() && strings.HasSuffix(path, logSuffix) {
			return errDisk
		}
		return nil
	})
	m := openBoundedManager(t, fsys, testDir, 100, time.Hour)
	defer m.Close()
	l := createTestLog(t, m, smallConfig(1<<20, 4096))
	mustAppend(t, l, batchOf(2, 1, 40), 0)
	failSync.Store(true)
	m.files.sweep(time.Now().Add(2 * time.Hour))
	if n := m.files.openCount(); n != 1 {
		t.Fatalf("%d files open after a failed sync, want the 1 kept", n)
	}
	failSync.Store(false)
	if err := l.Flush(); !errors.Is(err, errDisk) {
		t.Fatalf("flush after the failed sync: %v, want the injected failure", err)
	}
	if _, err := l.Append(batchOf(1, 1, 10), 0, 0); !errors.Is(err, errDisk) {
		t.Fatalf("append after the failed flush: %v, want the sticky failure", err)
	}
}

// TestPartitionLogger: a log's records carry its partition, as
// logger.With would have added it.
func TestPartitionLogger(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil)).With("node", 1)
	l := partitionLogger(base, TopicPartition{Topic: "orders", Partition: 3})
	l.Info("first", "k", "v")
	l.With("x", 2).WithGroup("g").Info("second", "y", 3)
	out := buf.String()
	for _, want := range []string{"node=1 k=v partition=orders-3", "node=1 partition=orders-3 x=2 g.y=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output %q lacks %q", out, want)
		}
	}
}

// TestReopenOutOfDescriptors: an append or read that finds its closed
// .log cannot be reopened (EMFILE) fails without making the log's error
// sticky, as running out of descriptors does elsewhere (nospace.go), and
// both work once descriptors are back.
func TestReopenOutOfDescriptors(t *testing.T) {
	var exhausted atomic.Bool
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpOpenFile && exhausted.Load() && strings.HasSuffix(path, logSuffix) {
			return &os.PathError{Op: "open", Path: path, Err: syscall.EMFILE}
		}
		return nil
	})
	m := openBoundedManager(t, fsys, testDir, 100, time.Hour)
	defer m.Close()
	l := createTestLog(t, m, smallConfig(1<<20, 4096))
	first := mustAppend(t, l, batchOf(2, 1, 40), 0)
	m.files.sweep(time.Now().Add(2 * time.Hour))
	exhausted.Store(true)
	if _, err := l.Append(batchOf(1, 1, 10), 0, 0); !IsExhausted(err) {
		t.Fatalf("append without descriptors: %v, want EMFILE", err)
	}
	if _, err := l.Read(0, 1<<20, l.LogEndOffset(), true); !IsExhausted(err) {
		t.Fatalf("read without descriptors: %v, want EMFILE", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("sticky error after EMFILE: %v", err)
	}
	exhausted.Store(false)
	second := mustAppend(t, l, batchOf(1, 2, 10), 0)
	if second.base != 2 {
		t.Fatalf("append after EMFILE at %d, want 2", second.base)
	}
	checkBatches(t, "after EMFILE", readAll(t, l), first, second)
}
