package partition

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

func TestEpochCheckpointFormat(t *testing.T) {
	entries := []EpochEntry{{0, 0}, {3, 120}, {7, 4000}}
	data := encodeEpochCheckpoint(entries)
	if string(data) != "0\n3\n0 0\n3 120\n7 4000\n" {
		t.Fatalf("encoded %q", data)
	}
	got, err := decodeEpochCheckpoint(data)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("decoded %v %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n2\n3 10\n2 20\n", "0\n2\n1 10\n2 5\n", "0\n1\n0 0\n1 1\n", "0\n-1\n"} {
		if _, err := decodeEpochCheckpoint([]byte(bad)); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	entries := []EpochEntry{{1, 0}, {3, 120}, {7, 4000}}
	for _, tc := range []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{0, 0, 0}, // older than every epoch: itself, and where the first began
		{1, 1, 120},
		{2, 1, 120},
		{3, 3, 4000},
		{6, 3, 4000},
		{7, 7, 5000},
		{9, 7, 5000},
	} {
		e, end := EndOffsetForEpoch(entries, tc.epoch, 5000)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("epoch %d: (%d, %d), want (%d, %d)", tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
}

// TestEpochFileKeepsNewer: a checkpoint captured before another but
// written after it (the background writer's, fsynced without Mu) is
// skipped: the file keeps the newer state.
func TestEpochFileKeepsNewer(t *testing.T) {
	p := &Partition{Env: &Env{FS: vfs.Default}}
	path := filepath.Join(t.TempDir(), EpochCheckpointFile)
	older := encodeEpochCheckpoint([]EpochEntry{{0, 0}})
	newer := encodeEpochCheckpoint([]EpochEntry{{0, 0}, {1, 10}})
	if err := p.writeEpochFile(vfs.WriteFileAtomic, path, newer, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.writeEpochFile(vfs.WriteFileAtomic, path, older, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(newer) {
		t.Fatalf("file %q %v, want the newer %q", got, err, newer)
	}
	newest := encodeEpochCheckpoint([]EpochEntry{{0, 0}, {1, 10}, {2, 20}})
	if err := p.writeEpochFile(vfs.WriteFileAtomic, path, newest, 3); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(newest) {
		t.Fatalf("file %q %v, want %q", got, err, newest)
	}
}
