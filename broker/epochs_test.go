package broker

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEpochCheckpointFormat(t *testing.T) {
	entries := []epochEntry{{0, 0}, {3, 120}, {7, 4000}}
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
	entries := []epochEntry{{1, 0}, {3, 120}, {7, 4000}}
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
		e, end := endOffsetForEpoch(entries, tc.epoch, 5000)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("epoch %d: (%d, %d), want (%d, %d)", tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
}

// TestOffsetForLeaderEpoch: after appends in epoch 0, the partition's
// checkpoint holds (0, 0) and OffsetForLeaderEpoch answers the log end.
func TestOffsetForLeaderEpoch(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "epochs", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("epochs"))
	produceAll(t, cl, keyedRecords("epochs", 10, "e"))
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "epochs"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch = -1
	rp.LeaderEpoch = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 10 {
		t.Fatalf("offset for epoch 0: %+v", got)
	}
	data, err := os.ReadFile(filepath.Join(ts.dir, "epochs-0", epochCheckpointFile))
	if err != nil || string(data) != "0\n1\n0 0\n" {
		t.Fatalf("leader-epoch-checkpoint %q %v", data, err)
	}
}
