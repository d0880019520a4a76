package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openFilesUnder lists this process's open files under dir.
func openFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, filepath.Base(target))
		}
	}
	return out
}

// TestIdleSegmentHoldsNoFile: a new segment holds no file open (an idle
// partition costs no file descriptor); its .log opens on the first write,
// its index files only while flushes write entries to them, until the
// segment is rolled and flushed; and the Manager's cache closes an idle
// .log, synced.
func TestIdleSegmentHoldsNoFile(t *testing.T) {
	m := openOSTestManager(t)
	l := createTestLog(t, m, smallConfig(1<<20, 100))
	want := func(n int, what string) {
		t.Helper()
		if got := openFilesUnder(t, l.Dir()); len(got) != n {
			t.Fatalf("%s: open files %v, want %d", what, got, n)
		}
	}
	want(0, "new log")
	for range 10 {
		mustAppend(t, l, batchOf(3, 1, 40), 0)
	}
	want(1, "after appends")
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want(3, "after a flush wrote index entries")
	forceRoll(t, l)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want(1, "after a roll and a flush (the old .log, the new one unused)")
	m.files.sweep(time.Now().Add(time.Hour))
	want(0, "after the idle .log was closed")
	if got := len(parseAll(t, readAll(t, l))); got != 10 {
		t.Fatalf("read back %d batches after the close, want 10", got)
	}
	want(1, "after a read reopened the old .log")
}
