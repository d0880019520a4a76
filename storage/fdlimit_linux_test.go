package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

func TestSegmentFileBound(t *testing.T) {
	for _, tt := range []struct {
		nofile uint64
		want   int
	}{
		{0, 2000},        // unknown: the fixed default
		{1 << 20, 50000}, // a large limit: the cap bounds
		{100001, 50000},
		{20000, 10000}, // this machine's limit: 10,000 partitions written at once keep their files
		{3999, 1999},
		{1024, 512}, // a container's limit: half for the segments
		{20, 16},    // the floor
	} {
		if got := segmentFileBound(tt.nofile); got != tt.want {
			t.Errorf("segmentFileBound(%d) = %d, want %d", tt.nofile, got, tt.want)
		}
	}
}

// TestSegmentFileBoundFromRlimit: a Manager opened without
// MaxOpenSegmentFiles under a descriptor limit of 400 bounds its open
// segment files at 200, says so in its log, and keeps 300 partitions, each
// appended to, within it, every one readable after its file was closed.
func TestSegmentFileBoundFromRlimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	const nofile, partitions = 400, 300
	if lim.Cur < nofile || len(openFilesUnder(t, "/")) > nofile/4 {
		t.Skipf("descriptor limit %d or descriptors open leave no room for the test", lim.Cur)
	}
	low := lim
	low.Cur = nofile
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Errorf("restore RLIMIT_NOFILE: %v", err)
		}
	})

	var logBuf bytes.Buffer
	dir := fastTempDir(t)
	m, err := OpenManager(ManagerConfig{
		FS: vfs.Default, Dirs: []string{dir}, NodeID: 1, ClusterID: testCluster,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil)), Decompress: gunzip,
		Now:             func() time.Time { return time.UnixMilli(0) },
		SegmentFileIdle: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.files.max != nofile/2 {
		t.Fatalf("bound %d under a limit of %d, want %d", m.files.max, nofile, nofile/2)
	}
	if line := logBuf.String(); !strings.Contains(line, `msg="segment files open at most" max=200 configured=0 nofile_limit=400`) {
		t.Errorf("start-up log does not give the bound:\n%s", line)
	}

	cfg := smallConfig(1<<20, 4096)
	logs := make([]*Log, partitions)
	appends := make([]appended, partitions)
	for i := range logs {
		l, err := m.GetOrCreateLog("rl", int32(i), [16]byte{7}, cfg)
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		logs[i] = l
		appends[i] = mustAppend(t, l, batchOf(1, int64(i), 20), 0)
	}
	m.files.sweep(time.Now())
	if n := len(openFilesUnder(t, dir)); n > nofile/2 {
		t.Fatalf("%d files open under the data dir after %d appends, want at most %d", n, partitions, nofile/2)
	}
	for i, l := range logs {
		r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		checkBatches(t, fmt.Sprintf("partition %d", i), r.Data, appends[i])
	}
}
