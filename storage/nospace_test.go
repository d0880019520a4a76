package storage

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// fullDisk is a file system that, while full is set, refuses writes to
// segment and index files with ENOSPC after storing half of them (as a disk
// that fills mid-write does) and refuses to create files; syncFails makes
// fsyncs fail with ENOSPC too.
type fullDisk struct {
	full, syncFails atomic.Bool
	fs              vfs.FS
	mem             *vfs.MemFS
}

func newFullDisk() *fullDisk {
	d := &fullDisk{mem: vfs.NewMem()}
	d.fs = vfs.NewFaulty(d.mem, func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpSync && d.syncFails.Load():
			return syscall.ENOSPC
		case !d.full.Load():
			return nil
		case op == vfs.OpWrite:
			return &vfs.ShortWriteError{Err: syscall.ENOSPC}
		case op == vfs.OpCreate, op == vfs.OpOpenFile && !strings.HasSuffix(path, ".log"):
			return syscall.ENOSPC
		}
		return nil
	})
	return d
}

func fileSize(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	st, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestNoSpaceAppendIsNotSticky: an append that meets a full disk fails
// with an error IsNoSpace recognises, leaves no partial batch in the file
// and no sticky error; a roll that cannot create its segment leaves no
// files behind; once space returns the log takes appends at the next
// offset and every batch reads back in order, before and after a restart.
func TestNoSpaceAppendIsNotSticky(t *testing.T) {
	d := newFullDisk()
	cfg := smallConfig(4096, 0)
	m := openTestManager(t, d.fs, cfg)
	l := createTestLog(t, m, cfg)
	var want []byte
	for i := 0; i < 3; i++ {
		a := mustAppend(t, l, batchOf(2, 1, 100), 0)
		want = append(want, a.data...)
	}
	seg := l.active()
	sizeBefore := fileSize(t, d.fs, seg.path(logSuffix))
	leo := l.LogEndOffset()

	d.full.Store(true)
	_, err := l.Append(batchOf(2, 1, 100), 7, 0)
	if !IsNoSpace(err) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if l.Err() != nil {
		t.Fatalf("a full disk left a sticky error: %v", l.Err())
	}
	if got := fileSize(t, d.fs, seg.path(logSuffix)); got != sizeBefore {
		t.Fatalf("segment is %d bytes after the failed append, was %d: partial batch left", got, sizeBefore)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end %d after a failed append, want %d", l.LogEndOffset(), leo)
	}
	// A batch that needs a roll: the new segment cannot be created.
	_, err = l.Append(batchOf(30, 1, 100), 7, 0)
	if !IsNoSpace(err) || l.Err() != nil {
		t.Fatalf("roll on a full disk: %v (sticky %v), want a non-sticky ENOSPC", err, l.Err())
	}
	if len(l.segments()) != 1 {
		t.Fatalf("%d segments after a failed roll, want 1", len(l.segments()))
	}
	if _, err := d.mem.Stat(segmentPath(l.dir, leo, logSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("failed roll left its segment file: %v", err)
	}

	d.full.Store(false)
	for i := 0; i < 3; i++ {
		a := mustAppend(t, l, batchOf(30, 1, 100), 0)
		if i == 0 && a.base != leo {
			t.Fatalf("first append after space returned at %d, want %d", a.base, leo)
		}
		want = append(want, a.data...)
	}
	if len(l.segments()) < 2 {
		t.Fatal("no roll after space returned")
	}
	checkSameBatches(t, readAll(t, l), want)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, d.fs, cfg)
	defer m.Close()
	l, _ = m.Log("orders", 0)
	checkSameBatches(t, readAll(t, l), want)
}

// TestNoSpaceFsyncIsSticky: an fsync that fails, even with ENOSPC, may
// have lost written pages; the log keeps the error, as for any disk error.
func TestNoSpaceFsyncIsSticky(t *testing.T) {
	d := newFullDisk()
	m := openTestManager(t, d.fs)
	defer m.Close()
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(2, 1, 100), 0)
	d.syncFails.Store(true)
	if err := l.Flush(); err == nil {
		t.Fatal("flush with a failing fsync succeeded")
	}
	d.syncFails.Store(false)
	if l.Err() == nil {
		t.Fatal("a failed fsync left no sticky error")
	}
	if _, err := l.Append(batchOf(2, 1, 100), 7, 0); err == nil {
		t.Fatal("append after a failed fsync succeeded")
	}
}

// TestNoSpaceRecovery: a log dir that needs recovery (no clean shutdown)
// opens on a full disk, where the rebuilt indexes cannot be written, and
// serves every batch; the indexes are written once space returns.
func TestNoSpaceRecovery(t *testing.T) {
	d := newFullDisk()
	cfg := smallConfig(2048, 100)
	m := openTestManager(t, d.fs, cfg)
	l := createTestLog(t, m, cfg)
	var want []byte
	for i := 0; i < 10; i++ {
		want = append(want, mustAppend(t, l, batchOf(3, int64(i+1), 100), 0).data...)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// No Close: the next open recovers from the recovery point, and the
	// index files of the active segment are rewritten.
	d.full.Store(true)
	m2 := openTestManager(t, d.fs, cfg)
	l2, _ := m2.Log("orders", 0)
	checkSameBatches(t, readAll(t, l2), want)
	if _, err := l2.Append(batchOf(1, 1, 100), 7, 0); !IsNoSpace(err) {
		t.Fatalf("append on the full disk after recovery: %v, want ENOSPC", err)
	}
	d.full.Store(false)
	want = append(want, mustAppend(t, l2, batchOf(1, 99, 100), 0).data...)
	if err := m2.Close(); err != nil {
		t.Fatalf("close once space returned: %v", err)
	}
	m3 := openTestManager(t, d.fs, cfg)
	defer m3.Close()
	l3, _ := m3.Log("orders", 0)
	checkSameBatches(t, readAll(t, l3), want)
	off, _, found, err := l3.FindOffsetByTimestamp(99)
	if err != nil || !found || off != l3.LogEndOffset()-1 {
		t.Fatalf("time index after recovery on a full disk: offset %d found %v err %v, want offset %d", off, found, err, l3.LogEndOffset()-1)
	}
}

// checkSameBatches compares read batches with the appended ones by base
// offset, record count and CRC.
func checkSameBatches(t *testing.T, got, want []byte) {
	t.Helper()
	g, w := parseAll(t, got), parseAll(t, want)
	if len(g) != len(w) {
		t.Fatalf("read %d batches, appended %d", len(g), len(w))
	}
	for i := range g {
		if g[i].BaseOffset != w[i].BaseOffset || g[i].CRC != w[i].CRC || g[i].NumRecords != w[i].NumRecords {
			t.Fatalf("batch %d: read %+v, appended %+v", i, g[i], w[i])
		}
	}
}
