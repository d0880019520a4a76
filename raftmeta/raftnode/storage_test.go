package raftnode

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/vfs"
)

func testEntries(lo, hi, term uint64) []*pb.Entry {
	var ents []*pb.Entry
	for i := lo; i <= hi; i++ {
		ents = append(ents, &pb.Entry{Term: new(term), Index: new(i), Type: pb.EntryNormal.Enum(), Data: []byte(strings.Repeat("x", int(i)))})
	}
	return ents
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func openTestStorage(t *testing.T, fsys vfs.FS, dir string) *diskStorage {
	t.Helper()
	s, err := openStorage(fsys, dir, discardLogger())
	if err != nil {
		t.Fatalf("openStorage: %v", err)
	}
	if err := s.setMeta(storageMeta{nodeID: 1, clusterID: "c"}); err != nil {
		t.Fatalf("setMeta: %v", err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

func checkLog(t *testing.T, s *diskStorage, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log is [%d, %d], want [%d, %d]", f, l, first, last)
	}
	if last < first {
		return
	}
	ents, err := s.Entries(first, last+1, ^uint64(0))
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	for i, e := range ents {
		if e.GetIndex() != first+uint64(i) || len(e.GetData()) != int(e.GetIndex()) {
			t.Fatalf("entry %d: index %d, %d bytes", i, e.GetIndex(), len(e.GetData()))
		}
	}
}

func TestStorageRecover(t *testing.T) {
	dir := t.TempDir()
	s := openTestStorage(t, vfs.Default, dir)
	if !s.empty() {
		t.Fatal("new storage not empty")
	}
	if err := s.append(hardState(1, 1, 3), testEntries(1, 5, 1), true); err != nil {
		t.Fatal(err)
	}
	// A new leader's entries from index 4 replace 4 and 5.
	if err := s.append(hardState(2, 2, 4), testEntries(4, 6, 2), true); err != nil {
		t.Fatal(err)
	}
	s.close()

	s = openTestStorage(t, vfs.Default, dir)
	checkLog(t, s, 1, 6)
	for i, want := range []uint64{1, 1, 1, 2, 2, 2} {
		if term, _ := s.Term(uint64(i + 1)); term != want {
			t.Fatalf("term of %d is %d, want %d", i+1, term, want)
		}
	}
	hs, _, _ := s.InitialState()
	if !proto.Equal(hs, hardState(2, 2, 4)) {
		t.Fatalf("hard state %v", hs)
	}
	if err := s.setMeta(storageMeta{nodeID: 2, clusterID: "c"}); err == nil {
		t.Fatal("another node ID accepted")
	}
	if err := s.setMeta(storageMeta{nodeID: 1, clusterID: "other"}); err == nil {
		t.Fatal("another cluster ID accepted")
	}
}

// walRecordBounds returns the end offset of every record in a segment.
func walRecordBounds(t *testing.T, data []byte) []int {
	t.Helper()
	var ends []int
	for off := 0; off < len(data); {
		_, _, n, err := readWALRecord(data[off:])
		if err != nil {
			t.Fatalf("record at %d: %v", off, err)
		}
		off += n
		ends = append(ends, off)
	}
	return ends
}

func TestStorageTornTail(t *testing.T) {
	// The segment holds: meta, entries 1-5, hard state.
	tests := []struct {
		name     string
		damage   func(data []byte, ends []int) []byte
		last     uint64 // last entry index after recovery
		keepUpTo func(ends []int) int
	}{
		{
			name:     "cut inside the hard state",
			damage:   func(d []byte, ends []int) []byte { return d[:ends[6]-3] },
			last:     5,
			keepUpTo: func(ends []int) int { return ends[5] },
		},
		{
			name:     "cut inside the last entry",
			damage:   func(d []byte, ends []int) []byte { return d[:ends[5]-1] },
			last:     4,
			keepUpTo: func(ends []int) int { return ends[4] },
		},
		{
			name:     "cut inside a record header",
			damage:   func(d []byte, ends []int) []byte { return d[:ends[3]+4] },
			last:     3,
			keepUpTo: func(ends []int) int { return ends[3] },
		},
		{
			name:     "zeroed preallocated tail",
			damage:   func(d []byte, ends []int) []byte { return append(d, make([]byte, 4096)...) },
			last:     5,
			keepUpTo: func(ends []int) int { return ends[6] },
		},
		{
			name: "flipped bit in the last entry",
			damage: func(d []byte, ends []int) []byte {
				d[ends[5]-2] ^= 0x10
				return d
			},
			last:     4,
			keepUpTo: func(ends []int) int { return ends[4] },
		},
		{
			name: "huge length",
			damage: func(d []byte, ends []int) []byte {
				return append(d, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, walEntry)
			},
			last:     5,
			keepUpTo: func(ends []int) int { return ends[6] },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStorage(t, vfs.Default, dir)
			if err := s.append(hardState(1, 1, 1), testEntries(1, 5, 1), true); err != nil {
				t.Fatal(err)
			}
			s.close()
			path := filepath.Join(dir, segmentName(0))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ends := walRecordBounds(t, data)
			if len(ends) != 7 {
				t.Fatalf("%d records, want 7", len(ends))
			}
			if err := os.WriteFile(path, tt.damage(data, ends), 0o644); err != nil {
				t.Fatal(err)
			}
			s = openTestStorage(t, vfs.Default, dir)
			checkLog(t, s, 1, tt.last)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.keepUpTo(ends); fi.Size() != int64(want) {
				t.Fatalf("segment is %d bytes after recovery, want %d", fi.Size(), want)
			}
			// The recovered log takes new entries where the old ones ended.
			if err := s.append(hardState(2, 1, tt.last), testEntries(tt.last+1, tt.last+1, 2), true); err != nil {
				t.Fatal(err)
			}
			s.close()
			s = openTestStorage(t, vfs.Default, dir)
			checkLog(t, s, 1, tt.last+1)
		})
	}
}

func TestStorageSnapshotCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openTestStorage(t, vfs.Default, dir)
	if err := s.append(hardState(1, 1, 18), testEntries(1, 20, 1), true); err != nil {
		t.Fatal(err)
	}
	cs := &pb.ConfState{Voters: []uint64{1}}
	if err := s.createSnapshot(15, 15, cs, []byte("image")); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 16, 20)
	names := dirNames(t, dir)
	if want := []string{snapName(15), segmentName(15)}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	if err := s.append(hardState(1, 1, 20), testEntries(21, 22, 1), true); err != nil {
		t.Fatal(err)
	}
	s.close()

	s = openTestStorage(t, vfs.Default, dir)
	checkLog(t, s, 16, 22)
	snap, _ := s.Snapshot()
	if snap.GetMetadata().GetIndex() != 15 || snap.GetMetadata().GetTerm() != 1 || string(snap.GetData()) != "image" ||
		!slices.Equal(snap.GetMetadata().GetConfState().GetVoters(), []uint64{1}) {
		t.Fatalf("snapshot %v", snap)
	}
	hs, _, _ := s.InitialState()
	if hs.GetCommit() != 20 {
		t.Fatalf("commit %d", hs.GetCommit())
	}
	if _, err := s.Entries(15, 16, 1<<20); err == nil {
		t.Fatal("compacted entry readable")
	}
}

// A crash after the new segment was written but before the old one was
// removed leaves both; recovery reads them in order and agrees.
func TestStorageLeftoverOldSegment(t *testing.T) {
	dir := t.TempDir()
	s := openTestStorage(t, vfs.Default, dir)
	if err := s.append(hardState(1, 1, 10), testEntries(1, 10, 1), true); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.createSnapshot(8, 8, &pb.ConfState{Voters: []uint64{1}}, []byte("img")); err != nil {
		t.Fatal(err)
	}
	s.close()
	if err := os.WriteFile(filepath.Join(dir, segmentName(0)), old, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTestStorage(t, vfs.Default, dir)
	checkLog(t, s, 9, 10)
	s.close()

	// The same leftover segment, damaged, is corruption: only the newest
	// segment may have a torn tail.
	old[len(old)-1] ^= 1
	if err := os.WriteFile(filepath.Join(dir, segmentName(0)), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openStorage(vfs.Default, dir, discardLogger()); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("openStorage with a corrupt older segment: %v", err)
	}
}

func TestStorageCorruptSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openTestStorage(t, vfs.Default, dir)
	if err := s.append(hardState(1, 1, 5), testEntries(1, 5, 1), true); err != nil {
		t.Fatal(err)
	}
	if err := s.createSnapshot(5, 5, &pb.ConfState{Voters: []uint64{1}}, []byte("img")); err != nil {
		t.Fatal(err)
	}
	s.close()
	path := filepath.Join(dir, snapName(5))
	data, _ := os.ReadFile(path)
	data[len(snapMagic)+2] ^= 0xff
	os.WriteFile(path, data, 0o644)
	if _, err := openStorage(vfs.Default, dir, discardLogger()); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("openStorage with a corrupt snapshot: %v", err)
	}
}

func TestStorageMemCrash(t *testing.T) {
	fsys := vfs.NewMem()
	s := openTestStorage(t, fsys, "/meta")
	if err := s.append(hardState(1, 1, 3), testEntries(1, 3, 1), true); err != nil {
		t.Fatal(err)
	}
	// Not synced: a crash may lose it.
	if err := s.append(hardState(1, 1, 3), testEntries(4, 5, 1), false); err != nil {
		t.Fatal(err)
	}
	fsys.Crash()
	s = openTestStorage(t, fsys, "/meta")
	checkLog(t, s, 1, 3)
	hs, _, _ := s.InitialState()
	if hs.GetCommit() != 3 {
		t.Fatalf("commit %d", hs.GetCommit())
	}
}

func TestStorageStickyError(t *testing.T) {
	fail := false
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if fail && op == vfs.OpSync {
			return vfs.ErrInjected
		}
		return nil
	})
	s := openTestStorage(t, fsys, "/meta")
	fail = true
	err := s.append(hardState(1, 1, 1), testEntries(1, 1, 1), true)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append: %v", err)
	}
	fail = false
	if err2 := s.append(hardState(1, 1, 1), testEntries(1, 1, 1), true); err2 != err {
		t.Fatalf("second append: %v, want the sticky %v", err2, err)
	}
	if err := s.createSnapshot(1, 1, nil, nil); err == nil {
		t.Fatal("createSnapshot after a failure succeeded")
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
