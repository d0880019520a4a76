package storage

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// syncCounter counts the file and directory fsyncs of a vfs.NewFaulty.
type syncCounter struct {
	files, dirs atomic.Int64
	mu          sync.Mutex
	dirNames    []string
}

func (c *syncCounter) inject(op vfs.Op, path string) error {
	switch op {
	case vfs.OpSync:
		c.files.Add(1)
	case vfs.OpSyncDir:
		c.dirs.Add(1)
		c.mu.Lock()
		c.dirNames = append(c.dirNames, filepath.Base(path))
		c.mu.Unlock()
	}
	return nil
}

func (c *syncCounter) reset() {
	c.files.Store(0)
	c.dirs.Store(0)
	c.mu.Lock()
	c.dirNames = nil
	c.mu.Unlock()
}

// TestCreateLogSyncs: creating a partition's log costs no fsync (it cost
// 3 until 2026-12-02 session 9: partition.metadata, the partition's
// directory and the log dir, which every CreateTopics paid). The log's
// first flush pays them instead, before its recovery point moves, and
// only that once; after it a power loss keeps the log and its topic id.
func TestCreateLogSyncs(t *testing.T) {
	mem := vfs.NewMem()
	var c syncCounter
	fsys := vfs.NewFaulty(mem, c.inject)
	m := openTestManager(t, fsys)
	c.reset()
	l, err := m.GetOrCreateLog("synced", 0, [16]byte{1, 2, 3}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if f, d := c.files.Load(), c.dirs.Load(); f != 0 || d != 0 {
		t.Errorf("creating a log: %d file and %d directory fsyncs (%v), want none", f, d, c.dirNames)
	}
	if id := l.TopicID(); id != ([16]byte{1, 2, 3}) {
		t.Errorf("topic id %v", id)
	}
	a := mustAppend(t, l, batchOf(2, 1, 20), 0)
	c.reset()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// The .log, partition.metadata; the partition's directory, the log dir.
	if f, d := c.files.Load(), c.dirs.Load(); f != 2 || d != 2 {
		t.Errorf("first flush: %d file and %d directory fsyncs (%v), want 2 and 2", f, d, c.dirNames)
	}
	mustAppend(t, l, batchOf(1, 2, 20), 0)
	c.reset()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if f, d := c.files.Load(), c.dirs.Load(); f != 1 || d != 0 {
		t.Errorf("second flush: %d file and %d directory fsyncs (%v), want 1 and 0", f, d, c.dirNames)
	}
	// A power loss keeps what was flushed, with the topic id.
	mem.Crash()
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l2, ok := m2.Log("synced", 0)
	if !ok {
		t.Fatal("a flushed log is not loaded after a power loss")
	}
	if id := l2.TopicID(); id != ([16]byte{1, 2, 3}) {
		t.Errorf("topic id after a power loss %v", id)
	}
	if l2.LogEndOffset() < a.last+1 {
		t.Errorf("log end offset %d after a power loss, want at least %d", l2.LogEndOffset(), a.last+1)
	}
}

// TestCreateLogsSyncNothing: CreateLogs makes a batch of logs without an
// fsync, the logs are all there after a clean restart (Close flushes
// each, which syncs its creation), a log named twice in the batch is made
// once, and two calls that race for the same logs get the same ones.
func TestCreateLogsSyncNothing(t *testing.T) {
	var c syncCounter
	fsys := vfs.NewFaulty(vfs.NewMem(), c.inject)
	m := openTestManager(t, fsys)
	defer m.Close()
	c.reset()
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
	if f, d := c.files.Load(), c.dirs.Load(); f != 0 || d != 0 {
		t.Errorf("creating %d logs: %d file and %d directory fsyncs (%v), want none", n, f, d, c.dirNames)
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

// TestCreatedLogsPowerLoss: after a power loss the logs that were flushed
// are back with their records and topic ids; those never flushed (nothing
// of them was acknowledged as durable) may be gone, and are made again by
// CreateLogs, as the broker does from the metadata when it starts.
func TestCreatedLogsPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	m := openTestManager(t, mem)
	const n = 6
	var specs []LogSpec
	for p := range int32(n) {
		specs = append(specs, LogSpec{Topic: "lazy", Partition: p, TopicID: [16]byte{7}, Config: DefaultLogConfig()})
	}
	logs, errs := m.CreateLogs(specs)
	want := map[int32]appended{}
	for p, l := range logs {
		if errs[p] != nil {
			t.Fatal(errs[p])
		}
		if p%2 == 0 {
			want[int32(p)] = mustAppend(t, l, batchOf(3, int64(p), 30), 0)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mem.Crash() // m is abandoned: the machine lost power

	m2 := openTestManager(t, mem)
	defer m2.Close()
	for p := range int32(n) {
		l, ok := m2.Log("lazy", p)
		a, flushed := want[p]
		if !flushed {
			continue
		}
		if !ok {
			t.Fatalf("lazy-%d was flushed but is gone after a power loss", p)
		}
		if l.TopicID() != ([16]byte{7}) {
			t.Errorf("lazy-%d: topic id %v", p, l.TopicID())
		}
		checkBatches(t, l.tp.String(), readAll(t, l), a)
	}
	logs, errs = m2.CreateLogs(specs)
	for p, l := range logs {
		if errs[p] != nil {
			t.Fatalf("lazy-%d made again: %v", p, errs[p])
		}
		if l.TopicID() != ([16]byte{7}) {
			t.Errorf("lazy-%d made again: topic id %v", p, l.TopicID())
		}
		if _, flushed := want[int32(p)]; !flushed && l.LogEndOffset() != 0 {
			t.Errorf("lazy-%d made again: log end offset %d", p, l.LogEndOffset())
		}
	}
}

// TestCreatedLogEmptyPartitionMetadata: a power loss that kept a new
// log's directory entries but not partition.metadata's contents (written
// without an fsync at creation) leaves an empty file, which loads as no
// topic id, and the id is recorded again when the log is asked for.
func TestCreatedLogEmptyPartitionMetadata(t *testing.T) {
	mem := vfs.NewMem()
	m := openTestManager(t, mem)
	if _, err := m.GetOrCreateLog("torn", 0, [16]byte{5}, DefaultLogConfig()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testDir, "torn-0")
	for _, d := range []string{dir, testDir} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	mem.Crash()
	data, err := vfs.ReadFile(mem, filepath.Join(dir, partitionMetadataFile))
	if err != nil || len(data) != 0 {
		t.Fatalf("partition.metadata after the power loss: %q, %v; the test wants it empty", data, err)
	}
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l, ok := m2.Log("torn", 0)
	if !ok {
		t.Fatal("the log whose entries were synced is not loaded")
	}
	if l.TopicID() != ([16]byte{}) {
		t.Fatalf("topic id %v from an empty partition.metadata", l.TopicID())
	}
	l2, err := m2.GetOrCreateLog("torn", 0, [16]byte{5}, DefaultLogConfig())
	if err != nil || l2 != l || l2.TopicID() != ([16]byte{5}) {
		t.Fatalf("asked again: %p (loaded %p), id %v, %v", l2, l, l2.TopicID(), err)
	}
	data, err = vfs.ReadFile(mem, filepath.Join(dir, partitionMetadataFile))
	if id, derr := decodePartitionMetadata(data); err != nil || derr != nil || id != ([16]byte{5}) {
		t.Fatalf("partition.metadata recorded again: %q, %v, %v", data, err, derr)
	}
}

// TestCloseLeavesNeverWrittenLogsUnsynced: a clean shutdown syncs
// nothing of a log created and never written to (a power loss may take
// it; the broker makes it again from the metadata), and syncs the
// creation of one that was written, so that what Close synced is found
// after a power loss.
func TestCloseLeavesNeverWrittenLogsUnsynced(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	synced := map[string]int{}
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			mu.Lock()
			synced[path]++
			mu.Unlock()
		}
		return nil
	})
	m := openTestManager(t, fsys)
	for p := range int32(4) {
		if _, err := m.GetOrCreateLog("empty", p, [16]byte{3}, DefaultLogConfig()); err != nil {
			t.Fatal(err)
		}
	}
	w, err := m.GetOrCreateLog("written", 0, [16]byte{4}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	a := mustAppend(t, w, batchOf(2, 1, 20), 0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for path, n := range synced {
		if strings.Contains(path, "empty-") {
			t.Errorf("Close synced %s of a never-written log %d times", path, n)
		}
	}
	mu.Unlock()
	mem.Crash()
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l, ok := m2.Log("written", 0)
	if !ok {
		t.Fatal("the written log is gone after Close and a power loss")
	}
	if l.TopicID() != ([16]byte{4}) {
		t.Errorf("topic id %v", l.TopicID())
	}
	checkBatches(t, "written-0", readAll(t, l), a)
}

// TestCreateLogFiles: the files a LogSpec names are written into a log the
// call makes, with no fsync; the log's first flush syncs them with
// partition.metadata, before its recovery point moves, so a power loss
// after it keeps them; an existing log is not given them; a name that is
// not a plain file name, or a segment's, is refused; and a file its owner
// removed before the first flush does not fail that flush.
func TestCreateLogFiles(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	synced := map[string]int{}
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			mu.Lock()
			synced[filepath.Base(path)]++
			mu.Unlock()
		}
		return nil
	})
	m := openTestManager(t, fsys)
	mu.Lock()
	clear(synced)
	mu.Unlock()
	files := []LogFile{{Name: "owner-checkpoint", Data: []byte("0\n1\n0 0\n")}}
	specs := []LogSpec{
		{Topic: "withfiles", Partition: 0, TopicID: [16]byte{4}, Config: DefaultLogConfig(), Files: files},
		{Topic: "withfiles", Partition: 1, TopicID: [16]byte{4}, Config: DefaultLogConfig(), Files: files},
	}
	logs, errs := m.CreateLogs(specs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	for _, l := range logs {
		if data, err := vfs.ReadFile(mem, filepath.Join(l.Dir(), "owner-checkpoint")); err != nil || string(data) != "0\n1\n0 0\n" {
			t.Fatalf("%s: owner-checkpoint %q %v", l.Dir(), data, err)
		}
	}
	mu.Lock()
	if len(synced) != 0 {
		t.Errorf("creating the logs synced %v, want nothing", synced)
	}
	mu.Unlock()

	mustAppend(t, logs[0], batchOf(1, 1, 10), 0)
	if err := logs[0].Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if synced["owner-checkpoint"] != 1 || synced[partitionMetadataFile] != 1 {
		t.Errorf("the first flush synced %v, want owner-checkpoint and partition.metadata once each", synced)
	}
	mu.Unlock()
	// Removed by its owner before the first flush: not an error.
	if err := mem.Remove(filepath.Join(logs[1].Dir(), "owner-checkpoint")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, logs[1], batchOf(1, 1, 10), 0)
	if err := logs[1].Flush(); err != nil {
		t.Fatalf("first flush after the file was removed: %v", err)
	}

	// An existing log keeps its directory as it is.
	again := []LogSpec{{Topic: "withfiles", Partition: 1, TopicID: [16]byte{4}, Config: DefaultLogConfig(), Files: files}}
	if _, errs := m.CreateLogs(again); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, err := mem.Stat(filepath.Join(logs[1].Dir(), "owner-checkpoint")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an existing log was given the file again: %v", err)
	}
	for _, name := range []string{"", ".", "..", "a/b", "../escape", partitionMetadataFile, segmentName(0) + indexSuffix} {
		bad := []LogSpec{{Topic: "badfile", Partition: 0, Config: DefaultLogConfig(), Files: []LogFile{{Name: name, Data: []byte("x")}}}}
		if _, errs := m.CreateLogs(bad); errs[0] == nil {
			t.Errorf("a file named %q was accepted", name)
		}
	}
	if _, err := mem.Stat(filepath.Join(testDir, "badfile-0")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused log left its directory: %v", err)
	}

	// A power loss after the first flush keeps the file.
	mem.Crash()
	m2 := openTestManager(t, mem)
	defer m2.Close()
	l2, ok := m2.Log("withfiles", 0)
	if !ok {
		t.Fatal("log lost")
	}
	if data, err := vfs.ReadFile(mem, filepath.Join(l2.Dir(), "owner-checkpoint")); err != nil || string(data) != "0\n1\n0 0\n" {
		t.Fatalf("after a power loss: owner-checkpoint %q %v", data, err)
	}
}
