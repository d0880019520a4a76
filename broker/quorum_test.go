package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeQuorumAndElectLeaders(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "elect", 1, nil)
	cl := ts.client(t)
	qr := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = append(qt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	qr.Topics = append(qr.Topics, qt)
	q, err := qr.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := q.Topics[0].Partitions[0]
	if q.Topics[0].Topic != "__cluster_metadata" || p.ErrorCode != 0 || p.LeaderID != 1 || len(p.CurrentVoters) != 1 || p.HighWatermark <= 0 {
		t.Fatalf("describe quorum: %+v", q)
	}
	req := kmsg.NewPtrElectLeadersRequest()
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "elect", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("preferred election of a partition its preferred replica leads: code %d", code)
	}
}
