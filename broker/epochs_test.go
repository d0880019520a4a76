package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
)

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
	data, err := os.ReadFile(filepath.Join(ts.dir, "epochs-0", partition.EpochCheckpointFile))
	if err != nil || string(data) != "0\n1\n0 0\n" {
		t.Fatalf("leader-epoch-checkpoint %q %v", data, err)
	}
}
