package broker

import (
	"testing"

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
