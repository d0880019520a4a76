package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rest of the matrix: the group, transaction, admin and cluster
// requests, each answered by the error code the matrix checks.

func heartbeatCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = "g", 1, "nobody"
	return send[*kmsg.HeartbeatResponse](t, cl, req).ErrorCode
}

func deleteGroupsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"free-group"}
	return send[*kmsg.DeleteGroupsResponse](t, cl, req).Groups[0].ErrorCode
}

func describeBrokerConfigsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, rr)
	return send[*kmsg.DescribeConfigsResponse](t, cl, req).Resources[0].ErrorCode
}

func alterTopicConfigsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = true
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	return send[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0].ErrorCode
}

func createPartitionsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.ValidateOnly, req.TimeoutMillis = true, 5000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "t", 2
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.CreatePartitionsResponse](t, cl, req).Topics[0].ErrorCode
}

func deleteRecordsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.DeleteRecordsResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func offsetForLeaderEpochCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.OffsetForLeaderEpochResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func describeProducersCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.DescribeProducersResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func describeTransactionsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"tx"}
	return send[*kmsg.DescribeTransactionsResponse](t, cl, req).TransactionStates[0].ErrorCode
}

func endTxnCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx", 1<<40, 0, false
	return send[*kmsg.EndTxnResponse](t, cl, req).ErrorCode
}

func addOffsetsToTxnCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", 1<<40, 0, "g"
	return send[*kmsg.AddOffsetsToTxnResponse](t, cl, req).ErrorCode
}

func electLeadersCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrElectLeadersRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.ElectLeadersResponse](t, cl, req).ErrorCode
}

func describeLogDirsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	return send[*kmsg.DescribeLogDirsResponse](t, cl, kmsg.NewPtrDescribeLogDirsRequest()).ErrorCode
}

func listReassignmentsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	return send[*kmsg.ListPartitionReassignmentsResponse](t, cl, req).ErrorCode
}

func describeTopicPartitionsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "t"
	req.Topics = append(req.Topics, rt)
	req.ResponsePartitionLimit = 100
	return send[*kmsg.DescribeTopicPartitionsResponse](t, cl, req).Topics[0].ErrorCode
}

func createACLsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	// A copy of an ACL that exists: nothing changes whoever may create it.
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, aclCreation(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral,
		"User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	return send[*kmsg.CreateACLsResponse](t, cl, req).Results[0].ErrorCode
}

func consumerGroupDescribeCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g"}
	return send[*kmsg.ConsumerGroupDescribeResponse](t, cl, req).Groups[0].ErrorCode
}

// consumerJoin sends a KIP-848 join of group as a new member subscribed
// to topics by name, or to regex when topics is nil, and returns the
// answer.
func consumerJoin(t *testing.T, cl *kgo.Client, group, who string, topics []string, regex *string) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID = group, fmt.Sprintf("%s-%d", who, time.Now().UnixNano())
	req.RebalanceTimeoutMillis = 30000
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	req.SubscribedTopicNames, req.SubscribedTopicRegex = topics, regex
	return send[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, req)
}

// consumerHeartbeatCode joins cg subscribed to topic by name; the member
// stays (its target assignment is what ConsumerGroupDescribe cg shows).
func consumerHeartbeatCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, who string) int16 {
		return consumerJoin(t, cl, "cg", who, []string{topic}, nil).ErrorCode
	}
}

// consumerGroupDescribeCGCode describes cg, waiting (as the principal,
// for up to 10 s) for a member whose assignment or target names t when
// the answer has no error, so that a principal that may not DESCRIBE t
// is tested against a group that holds it.
func consumerGroupDescribeCGCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"cg"}
		g := send[*kmsg.ConsumerGroupDescribeResponse](t, cl, req).Groups[0]
		if g.ErrorCode != 0 {
			return g.ErrorCode
		}
		for _, m := range g.Members {
			for _, tps := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
				for _, tp := range tps {
					if tp.Topic == "t" {
						return 0
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member of cg is assigned t: %+v", g.Members)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsumerGroupRegexAuthorization: a regex subscription resolves, as
// Kafka 4.2's GroupMetadataManager does, only to the topics the
// heartbeat's principal may DESCRIBE; bob (denied t) subscribing to t|free
// is assigned free alone, alice both.
func TestConsumerGroupRegexAuthorization(t *testing.T) {
	_, clients := aclServer(t, true)
	setUpACLs(t, clients["admin"])
	regex := "t|free"
	for _, tc := range []struct {
		who, group string
		want       []string
	}{
		{"bob", "rg-bob", []string{"free"}},
		{"alice", "rg-alice", []string{"free", "t"}},
	} {
		cl := clients[tc.who]
		// Kafka creates __consumer_offsets on the first FindCoordinator.
		if code := settled(findCoordinatorCode(0, tc.group))(t, cl, tc.who); code != 0 {
			t.Fatalf("FindCoordinator %s: %s", tc.group, kerr.ErrorForCode(code))
		}
		code := settled(func(t *testing.T, cl *kgo.Client, who string) int16 {
			return consumerJoin(t, cl, tc.group, who, nil, &regex).ErrorCode
		})(t, cl, tc.who)
		if code != 0 {
			t.Fatalf("%s joins %s with regex %s: %s", tc.who, tc.group, regex, kerr.ErrorForCode(code))
		}
		var got []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{tc.group}
			g := send[*kmsg.ConsumerGroupDescribeResponse](t, clients["admin"], req).Groups[0]
			if g.ErrorCode != 0 || len(g.Members) != 1 {
				t.Fatalf("describe %s: %s, %d members", tc.group, kerr.ErrorForCode(g.ErrorCode), len(g.Members))
			}
			got = nil
			for _, tp := range g.Members[0].TargetAssignment.TopicPartitions {
				got = append(got, tp.Topic)
			}
			slices.Sort(got)
			if slices.Equal(got, tc.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s's member of %s subscribed to %s is to be assigned %v, want %v", tc.who, tc.group, regex, got, tc.want)
		}
	}
}

// streamsHeartbeatCode joins a streams group as a new member whose
// stateless topology reads topic.
func streamsHeartbeatCode(group, topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, who string) int16 {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID = group, fmt.Sprintf("%s-%d", who, time.Now().UnixNano())
		req.RebalanceTimeoutMillis = 30000
		topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		sub := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		sub.SubtopologyID, sub.SourceTopics = "0", []string{topic}
		topo.Subtopologies = append(topo.Subtopologies, sub)
		req.Topology = &topo
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return send[*kmsg.StreamsGroupHeartbeatResponse](t, cl, req).ErrorCode
	}
}

func streamsGroupDescribeCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{"stg-t"}
	return send[*kmsg.StreamsGroupDescribeResponse](t, cl, req).Groups[0].ErrorCode
}
