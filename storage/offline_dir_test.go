package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestOfflineDir: a dir taken offline gets no new logs, no checkpoints
// and no clean-shutdown marker, while the healthy dir keeps all three; a
// manager whose every dir is offline refuses new logs.
func TestOfflineDir(t *testing.T) {
	mem := vfs.NewMem()
	var d1Touched atomic.Int64
	var failing atomic.Bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if failing.Load() && strings.HasPrefix(path, "/d1") {
			d1Touched.Add(1)
			return vfs.ErrInjected
		}
		return nil
	})
	dirs := []string{"/d1", "/d2"}
	m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: dirs, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	l0, err := m.GetOrCreateLog("t", 0, [16]byte{}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Dir(l0.Dir()); got != "/d1" {
		t.Fatalf("first log in %s, want /d1 (both empty, first dir first)", got)
	}
	mustAppend(t, l0, batchOf(1, 1, 10), 0)

	failing.Store(true)
	m.SetDirOffline("/d1/") // as the broker names it: a log's parent
	if !m.DirOffline("/d1") || m.DirOffline("/d2") {
		t.Fatal("DirOffline does not follow SetDirOffline")
	}
	// /d1 holds fewer logs than /d2 would after these, but is offline.
	for p := int32(1); p <= 3; p++ {
		l, err := m.GetOrCreateLog("t", p, [16]byte{}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		if got := filepath.Dir(l.Dir()); got != "/d2" {
			t.Fatalf("partition %d placed in %s while /d1 is offline", p, got)
		}
		mustAppend(t, l, batchOf(1, 1, 10), 0)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatalf("checkpoint with an offline dir: %v", err)
	}
	if n := d1Touched.Load(); n != 0 {
		t.Fatalf("checkpoint touched the offline dir %d times", n)
	}
	// Closing fails for the log in the offline dir; the healthy dir is
	// still marked clean, the offline one is not.
	if err := m.Close(); err == nil {
		t.Fatal("close reported no error for a log in an offline dir")
	}
	failing.Store(false)
	if _, err := mem.Stat(filepath.Join("/d2", cleanShutdownFile)); err != nil {
		t.Fatalf("healthy dir not marked clean: %v", err)
	}
	if _, err := mem.Stat(filepath.Join("/d1", cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("offline dir marked clean: %v", err)
	}

	m2, err := OpenManager(ManagerConfig{FS: mem, Dirs: dirs, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	for p := int32(0); p <= 3; p++ {
		l, ok := m2.Log("t", p)
		if !ok || l.LogEndOffset() != 1 {
			t.Fatalf("partition %d after restart: %v", p, ok)
		}
	}
	m2.SetDirOffline("/d1")
	m2.SetDirOffline("/d2")
	if _, err := m2.GetOrCreateLog("t", 9, [16]byte{}, DefaultLogConfig()); !errors.Is(err, ErrNoOnlineLogDir) {
		t.Fatalf("create with every dir offline: %v", err)
	}
}
