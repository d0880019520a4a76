package partition

import (
	"reflect"
	"testing"
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
