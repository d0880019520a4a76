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

// TestCreateLogsSyncsLogDirOnce: CreateLogs makes a batch of logs with one
// fsync of the log dir for all of them (each partition's own directory is
// still synced once, with its partition.metadata), the logs are all there
// after a restart, a log named twice in the batch is made once, and two
// calls that race for the same logs get the same ones.
func TestCreateLogsSyncsLogDirOnce(t *testing.T) {
	var fileSyncs, logDirSyncs, partDirSyncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpSync:
			fileSyncs.Add(1)
		case op == vfs.OpSyncDir && filepath.Clean(path) == filepath.Clean(testDir):
			logDirSyncs.Add(1)
		case op == vfs.OpSyncDir:
			partDirSyncs.Add(1)
		}
		return nil
	})
	m := openTestManager(t, fsys)
	defer m.Close()
	fileSyncs.Store(0)
	logDirSyncs.Store(0)
	partDirSyncs.Store(0)
	const n = 20
	var specs []LogSpec
	for p := range int32(n) {
		specs = append(specs, LogSpec{Topic: "batch", Partition: p, TopicID: [16]byte{9}, Config: DefaultLogConfig()})
	}
	specs = append(specs, specs[3]) // named twice
	logs, errs := m.CreateLogs(specs)
	for i, err := range errs {
		if err != nil || logs[i] == nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if logs[n] != logs[3] {
		t.Error("a log named twice was made twice")
	}
	if f, d, pd := fileSyncs.Load(), logDirSyncs.Load(), partDirSyncs.Load(); f != n || d != 1 || pd != n {
		t.Errorf("creating %d logs: %d file, %d log dir and %d partition dir fsyncs, want %d, 1 and %d", n, f, d, pd, n, n)
	}

	// Two calls at once for the same new logs: each log is made once.
	var racing []LogSpec
	for p := range int32(8) {
		racing = append(racing, LogSpec{Topic: "race", Partition: p, Config: DefaultLogConfig()})
	}
	got := make([][]*Log, 2)
	done := make(chan struct{})
	for k := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			ls, es := m.CreateLogs(racing)
			for _, err := range es {
				if err != nil {
					t.Error(err)
				}
			}
			got[k] = ls
		}()
	}
	<-done
	<-done
	for p := range got[0] {
		if got[0][p] == nil || got[0][p] != got[1][p] {
			t.Fatalf("partition %d: the racing calls got %p and %p", p, got[0][p], got[1][p])
		}
	}

	m.Close()
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	for p := range int32(n) {
		l, ok := m2.Log("batch", p)
		if !ok {
			t.Fatalf("batch-%d is not loaded after a restart", p)
		}
		if l.TopicID() != ([16]byte{9}) {
			t.Errorf("batch-%d: topic id %v", p, l.TopicID())
		}
	}
}
