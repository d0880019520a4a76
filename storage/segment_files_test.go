package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// TestIdleSegmentHoldsOneFile: a new segment holds only its .log open (an
// idle partition costs one file descriptor, as in Kafka, whose indexes
// are mapped); its index files are open only while flushes write entries
// to them, until the segment is rolled and flushed.
func TestIdleSegmentHoldsOneFile(t *testing.T) {
	m := openOSTestManager(t)
	l := createTestLog(t, m, smallConfig(1<<20, 100))
	want := func(n int, what string) {
		t.Helper()
		if got := openFilesUnder(t, l.Dir()); len(got) != n {
			t.Fatalf("%s: open files %v, want %d", what, got, n)
		}
	}
	want(1, "new log")
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
	want(2, "after a roll and a flush (two .log files)")
}
