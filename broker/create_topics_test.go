package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsReplicaAssignment: a topic created with an explicit
// replica assignment (partitions and replication factor -1, as Kafka
// requires) gets exactly those partitions; naming a count as well is
// refused.
func TestCreateTopicsReplicaAssignment(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for p := int32(0); p < 2; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	bad := rt
	bad.Topic, bad.NumPartitions = "assigned-bad", 2
	req.Topics = append(req.Topics, rt, bad)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.NumPartitions != 2 || got.ReplicationFactor != 1 {
		t.Fatalf("assigned topic: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("assignment with a partition count: code %d", got.ErrorCode)
	}
}
