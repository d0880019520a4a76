package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

func TestCheckpointGolden(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	cfg := smallConfig(1000, 100)
	logs := map[TopicPartition]int{ // batches of 2 records to append
		{"orders", 1}: 3, {"orders", 0}: 5, {"audit-log.v2", 12}: 1, {"empty", 0}: 0,
	}
	for tp, n := range logs {
		l, err := m.GetOrCreateLog(tp.Topic, tp.Partition, [16]byte{9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			mustAppend(t, l, batchOf(2, int64(i), 10), 0)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := m.Log("orders", 0)
	if err := l.IncrementLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(2, 9, 10), 0) // not flushed: recovery point stays 10
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	golden := map[string]string{
		recoveryPointFile:  "0\n4\naudit-log.v2 12 2\nempty 0 0\norders 0 10\norders 1 6\n",
		logStartOffsetFile: "0\n1\norders 0 3\n",
	}
	for name, want := range golden {
		got, err := vfs.ReadFile(fsys, filepath.Join(testDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s:\n%q\nwant\n%q", name, got, want)
		}
		parsed, err := decodeCheckpoint(got)
		if err != nil || len(parsed) != strings.Count(want, "\n")-2 {
			t.Errorf("%s does not parse back: %v %v", name, parsed, err)
		}
	}
	// The log start offset survives a restart.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	l2, _ := m2.Log("orders", 0)
	if l2.LogStartOffset() != 3 || l2.LogEndOffset() != 12 {
		t.Fatalf("after restart start %d end %d", l2.LogStartOffset(), l2.LogEndOffset())
	}
	if len(m2.Logs()) != len(logs) {
		t.Fatalf("%d logs loaded", len(m2.Logs()))
	}
}

func TestDecodeCheckpointRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"1\n0\n",
		"0\n2\nt 0 1\n",
		"0\n1\nt 0\n",
		"0\n1\nt x 1\n",
		"0\n1\nt -1 1\n",
		"0\n-1\n",
		"0\n0\nt 0 1\n",
	} {
		if _, err := decodeCheckpoint([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestMetaProperties(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := vfs.ReadFile(fsys, filepath.Join(testDir, metaPropertiesFile))
	if err != nil {
		t.Fatal(err)
	}
	props := parseProperties(data)
	dirID := encodeUUID(m.DirectoryIDs()[testDir])
	want := map[string]string{"version": "1", "cluster.id": testCluster, "node.id": "1", "directory.id": dirID}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s=%q, want %q", k, props[k], v)
		}
	}
	if len(props) != len(want) || !strings.HasPrefix(string(data), "#\n#") {
		t.Errorf("meta.properties:\n%s", data)
	}

	tests := []struct {
		name    string
		cluster string
		node    int32
		wantErr string
	}{
		{"same identity", testCluster, 1, ""},
		{"other cluster", "other", 1, "belongs to cluster"},
		{"other node", testCluster, 2, "belongs to node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: []string{testDir}, NodeID: tt.node, ClusterID: tt.cluster, Logger: quietLogger()})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if m.DirectoryIDs()[testDir] != [16]byte(mustUUID(t, dirID)) {
					t.Fatal("directory id changed")
				}
				m.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func mustUUID(t *testing.T, s string) [16]byte {
	id, err := decodeUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestUnformattedDirWithDataRefused(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.MkdirAll(filepath.Join(testDir, "orders-0"), 0o755)
	_, err := OpenManager(ManagerConfig{FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("got %v", err)
	}
}

func TestMetaPropertiesVersion0Upgraded(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.MkdirAll(testDir, 0o755)
	v0 := "#Thu Jan 01 00:00:00 UTC 2020\nversion=0\nbroker.id=1\ncluster.id=" + testCluster + "\n"
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(testDir, metaPropertiesFile), []byte(v0)); err != nil {
		t.Fatal(err)
	}
	m := openTestManager(t, fsys)
	m.Close()
	data, _ := vfs.ReadFile(fsys, filepath.Join(testDir, metaPropertiesFile))
	meta, err := decodeMetaProperties(data)
	if err != nil || meta.version != 1 || meta.nodeID != 1 || meta.directoryID == ([16]byte{}) {
		t.Fatalf("%+v %v", meta, err)
	}
}

func TestPartitionMetadata(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	id := [16]byte{0x8a, 0x3f, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}
	if _, err := m.GetOrCreateLog("orders", 0, id, DefaultLogConfig()); err != nil {
		t.Fatal(err)
	}
	got, err := vfs.ReadFile(fsys, filepath.Join(partDir, partitionMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "version: 0\ntopic_id: ij8QAAAAAAAAAAAAAAAAAQ\n"; string(got) != want {
		t.Fatalf("partition.metadata %q, want %q", got, want)
	}
	if _, err := m.GetOrCreateLog("orders", 0, [16]byte{1}, DefaultLogConfig()); err == nil {
		t.Fatal("different topic id accepted")
	}
	if _, err := m.GetOrCreateLog("orders", 0, [16]byte{}, DefaultLogConfig()); err != nil {
		t.Fatalf("zero topic id: %v", err)
	}
	m.Close()
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	l, _ := m2.Log("orders", 0)
	if l.TopicID() != id {
		t.Fatalf("topic id %x after restart", l.TopicID())
	}
}

func TestGetOrCreateLogValidates(t *testing.T) {
	m := openTestManager(t, vfs.NewMem())
	defer m.Close()
	for _, tc := range []struct {
		topic string
		part  int32
	}{{"", 0}, {"..", 0}, {"a/b", 0}, {"spaces are bad", 0}, {strings.Repeat("x", 250), 0}, {"ok", -1}} {
		if _, err := m.GetOrCreateLog(tc.topic, tc.part, [16]byte{}, DefaultLogConfig()); err == nil {
			t.Errorf("%q/%d accepted", tc.topic, tc.part)
		}
	}
	a, err := m.GetOrCreateLog("a-b-c", 3, [16]byte{}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.GetOrCreateLog("a-b-c", 3, [16]byte{}, DefaultLogConfig())
	if a != b || a.Dir() != filepath.Join(testDir, "a-b-c-3") {
		t.Fatalf("second call gave another log or dir %s", a.Dir())
	}
}

func TestParseLogDirName(t *testing.T) {
	tests := []struct {
		in   string
		want TopicPartition
		ok   bool
	}{
		{"orders-0", TopicPartition{"orders", 0}, true},
		{"a-b-c-12", TopicPartition{"a-b-c", 12}, true},
		{"__consumer_offsets-49", TopicPartition{"__consumer_offsets", 49}, true},
		{"orders", TopicPartition{}, false},
		{"orders-", TopicPartition{}, false},
		{"-3", TopicPartition{}, false},
		{"orders-x", TopicPartition{}, false},
		{"orders-+1", TopicPartition{}, false},
		{"orders-99999999999", TopicPartition{}, false},
		{"lost+found", TopicPartition{}, false},
	}
	for _, tt := range tests {
		got, ok := parseLogDirName(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q: %v %v", tt.in, got, ok)
		}
	}
}

func TestDeleteLog(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(2, 1, 10), 0)
	other, _ := m.GetOrCreateLog("other", 0, [16]byte{}, DefaultLogConfig())
	if err := m.DeleteLog("orders", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Log("orders", 0); ok {
		t.Fatal("log still listed")
	}
	ents, _ := fsys.ReadDir(testDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "orders") {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	ckpt, _ := vfs.ReadFile(fsys, filepath.Join(testDir, recoveryPointFile))
	if string(ckpt) != "0\n1\nother 0 0\n" {
		t.Fatalf("checkpoint %q", ckpt)
	}
	if _, err := l.Append(batchOf(1, 1, 1), 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to deleted log: %v", err)
	}
	if err := m.DeleteLog("orders", 0); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	// A recreated log starts empty.
	l2 := createTestLog(t, m, DefaultLogConfig())
	if l2.LogEndOffset() != 0 {
		t.Fatalf("recreated log at %d", l2.LogEndOffset())
	}
	_ = other
	m.Close()
}

func TestDeleteDirNames(t *testing.T) {
	name := deleteDirName(TopicPartition{"orders", 3})
	if !strings.HasPrefix(name, "orders-3.") || !strings.HasSuffix(name, "-delete") || len(name) != len("orders-3.")+32+len("-delete") {
		t.Fatalf("delete dir name %q", name)
	}
	long := deleteDirName(TopicPartition{strings.Repeat("t", 249), 1000})
	if len(long) != 255 {
		t.Fatalf("long name is %d bytes", len(long))
	}
}

// TestStartRemovesLeftovers: a -delete dir (a crash inside DeleteLog),
// orphan index files and .deleted files go; -future dirs and the metadata
// log are left alone.
func TestStartRemovesLeftovers(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, DefaultLogConfig())
	mustAppend(t, l, batchOf(1, 1, 10), 0)
	m.Close()
	doomed := filepath.Join(testDir, "gone-0.0123456789abcdef0123456789abcdef-delete")
	keep := []string{filepath.Join(testDir, "orders-1-future"), filepath.Join(testDir, "__cluster_metadata-0")}
	for _, d := range append(keep, doomed) {
		fsys.MkdirAll(d, 0o755)
	}
	for _, f := range []string{filepath.Join(doomed, "00000000000000000000.log"), segFile(5, indexSuffix), segFile(0, ".log.deleted")} {
		if err := vfs.WriteFileAtomic(fsys, f, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	for _, gone := range []string{doomed, segFile(5, indexSuffix), segFile(0, ".log.deleted")} {
		if _, err := fsys.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", gone, err)
		}
	}
	for _, k := range keep {
		if _, err := fsys.Stat(k); err != nil {
			t.Errorf("%s removed", k)
		}
	}
	if len(m2.Logs()) != 1 {
		t.Fatalf("logs %v", m2.Logs())
	}
}

func TestMultipleDirs(t *testing.T) {
	fsys := vfs.NewMem()
	dirs := []string{"/d1", "/d2"}
	open := func() *Manager {
		m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: dirs, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	for p := range int32(4) {
		l, err := m.GetOrCreateLog("t", p, [16]byte{}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, batchOf(int(p)+1, 1, 10), 0)
	}
	ids := m.DirectoryIDs()
	if ids["/d1"] == ids["/d2"] {
		t.Fatal("dirs share an id")
	}
	m.Close()
	for _, d := range dirs {
		ents, _ := fsys.ReadDir(d)
		n := 0
		for _, e := range ents {
			if e.IsDir() {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%s holds %d logs, want 2", d, n)
		}
	}
	m2 := open()
	defer m2.Close()
	for p := range int32(4) {
		l, ok := m2.Log("t", p)
		if !ok || l.LogEndOffset() != int64(p)+1 {
			t.Fatalf("partition %d: %v", p, ok)
		}
	}
	if _, err := OpenManager(ManagerConfig{FS: fsys, Dirs: []string{"/d1", "/d1/"}, NodeID: 1, ClusterID: testCluster}); err == nil {
		t.Fatal("duplicate dir accepted")
	}
}

func TestDuplicatePartitionAcrossDirsRefused(t *testing.T) {
	fsys := vfs.NewMem()
	dirs := []string{"/d1", "/d2"}
	m, err := OpenManager(ManagerConfig{FS: fsys, Dirs: dirs, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.GetOrCreateLog("t", 0, [16]byte{}, DefaultLogConfig())
	m.Close()
	other := "/d2"
	if strings.HasPrefix(l.Dir(), "/d2") {
		other = "/d1"
	}
	fsys.MkdirAll(filepath.Join(other, "t-0"), 0o755)
	if _, err := OpenManager(ManagerConfig{FS: fsys, Dirs: dirs, NodeID: 1, ClusterID: testCluster, Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("got %v", err)
	}
}

// TestOSFilesystem runs a round trip, a clean restart and a simulated
// torn write on the real filesystem.
func TestOSFilesystem(t *testing.T) {
	dir := t.TempDir()
	open := func() *Manager {
		m, err := OpenManager(ManagerConfig{FS: vfs.Default, Dirs: []string{dir}, NodeID: 3, ClusterID: testCluster, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	l, err := m.GetOrCreateLog("os", 0, [16]byte{7}, smallConfig(2000, 100))
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for i := range 30 {
		a := mustAppend(t, l, batchOf(2, int64(i), 60), 0)
		all = append(all, a.data...)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = open()
	l, _ = m.Log("os", 0)
	if !bytes.Equal(readAll(t, l), all) {
		t.Fatal("clean restart differs")
	}
	// Tear the last batch, as a crash mid-write would, and drop the marker.
	last := l.segments()[len(l.segments())-1]
	m.Close()
	name := segmentPath(filepath.Join(dir, "os-0"), last.base, logSuffix)
	st, _ := os.Stat(name)
	if err := os.Truncate(name, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	m = open()
	defer m.Close()
	l, _ = m.Log("os", 0)
	if l.LogEndOffset() != 58 {
		t.Fatalf("LEO %d after torn write, want 58", l.LogEndOffset())
	}
	if got := readAll(t, l); !bytes.Equal(got, all[:len(all)-len(batchOf(2, 0, 60))]) {
		t.Fatal("recovered log differs")
	}
}

// TestNewLogsFillTheEmptiestDir: new logs go to the online log dir with
// the fewest logs, and only to online dirs once one goes offline (where
// the only online dir takes every new log without a count).
func TestNewLogsFillTheEmptiestDir(t *testing.T) {
	fsys := vfs.NewMem()
	m, err := OpenManager(ManagerConfig{
		FS: fsys, Dirs: []string{"/d1", "/d2"}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Decompress: gunzip,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	perDir := map[string]int{}
	for i := range 6 {
		l, err := m.GetOrCreateLog("spread", int32(i), [16]byte{7}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		perDir[filepath.Dir(l.Dir())]++
	}
	if perDir["/d1"] != 3 || perDir["/d2"] != 3 {
		t.Fatalf("logs per dir %v, want 3 in each", perDir)
	}
	m.SetDirOffline("/d1")
	for i := range 4 {
		l, err := m.GetOrCreateLog("after", int32(i), [16]byte{8}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		if d := filepath.Dir(l.Dir()); d != "/d2" {
			t.Fatalf("log %d in %s with /d1 offline", i, d)
		}
	}
	m.SetDirOffline("/d2")
	if _, err := m.GetOrCreateLog("none", 0, [16]byte{9}, DefaultLogConfig()); !errors.Is(err, ErrNoOnlineLogDir) {
		t.Fatalf("create with every dir offline: %v", err)
	}
}
