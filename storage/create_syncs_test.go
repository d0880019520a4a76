package storage

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestCreateLogSyncs: creating a partition's log costs three fsyncs, each
// of which a CreateTopics answer waits for: partition.metadata, the
// partition's directory (its rename and the segment's files, in one), and
// the log dir that holds the new directory. It was four (the partition's
// directory synced twice) before 2026-12-02.
func TestCreateLogSyncs(t *testing.T) {
	var fileSyncs, dirSyncs atomic.Int64
	var dirs []string
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpSync:
			fileSyncs.Add(1)
		case vfs.OpSyncDir:
			dirSyncs.Add(1)
			dirs = append(dirs, filepath.Base(path))
		}
		return nil
	})
	m := openTestManager(t, fsys)
	defer m.Close()
	fileSyncs.Store(0)
	dirSyncs.Store(0)
	dirs = nil
	l, err := m.GetOrCreateLog("synced", 0, [16]byte{1, 2, 3}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if f, d := fileSyncs.Load(), dirSyncs.Load(); f != 1 || d != 2 {
		t.Errorf("creating a log: %d file and %d directory fsyncs (%v), want 1 and 2", f, d, dirs)
	}
	if id := l.TopicID(); id != ([16]byte{1, 2, 3}) {
		t.Errorf("topic id %v", id)
	}
	// The files are all there: a restart loads the log with its id.
	m.Close()
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	l2, ok := m2.Log("synced", 0)
	if !ok {
		t.Fatal("the log is not loaded after a restart")
	}
	if id := l2.TopicID(); id != ([16]byte{1, 2, 3}) {
		t.Errorf("topic id after a restart %v", id)
	}
}
