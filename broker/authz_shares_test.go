package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share-group requests of the authorization matrix. The matrix's
// share groups are sg (members join it) and sq (offsets only), neither
// of which has an ACL: only the super user passes with
// allow.everyone.if.no.acl.found off, everyone with it on, and the topic
// ACLs of t (bob denied everything) then decide.

var sessNF = kerr.ShareSessionNotFound.Code

// shareHeartbeatCode joins sg as a new member subscribed to topic.
func shareHeartbeatCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, who string) int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID = "sg", fmt.Sprintf("%s-%d", who, time.Now().UnixNano())
		req.SubscribedTopicNames = []string{topic}
		return send[*kmsg.ShareGroupHeartbeatResponse](t, cl, req).ErrorCode
	}
}

func shareGroupDescribeCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"sg"}
	return send[*kmsg.ShareGroupDescribeResponse](t, cl, req).Groups[0].ErrorCode
}

// shareFetchCode continues a share session sq's member never opened.
func shareFetchCode(t *testing.T, cl *kgo.Client, who string) int16 {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("sq"), kmsg.StringPtr("m-"+who)
	req.ShareSessionEpoch, req.MaxBytes, req.MaxRecords = 1, 1<<20, 10
	return send[*kmsg.ShareFetchResponse](t, cl, req).ErrorCode
}

// shareAcknowledgeCode acknowledges in a share session never opened.
func shareAcknowledgeCode(t *testing.T, cl *kgo.Client, who string) int16 {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("sq"), kmsg.StringPtr("m-"+who)
	req.ShareSessionEpoch = 1
	return send[*kmsg.ShareAcknowledgeResponse](t, cl, req).ErrorCode
}

func describeShareOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = "sq"
	gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	gt.Topic, gt.Partitions = "t", []int32{0}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	rg := send[*kmsg.DescribeShareGroupOffsetsResponse](t, cl, req).Groups[0]
	if rg.ErrorCode != 0 || len(rg.Topics) == 0 {
		return rg.ErrorCode
	}
	return rg.Topics[0].Partitions[0].ErrorCode
}

// alterShareOffsetsCode starts sq (without members) over at offset 0 of
// t-0.
func alterShareOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = "sq"
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = "t"
	ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	at.Partitions = append(at.Partitions, ap)
	req.Topics = append(req.Topics, at)
	resp := send[*kmsg.AlterShareGroupOffsetsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// deleteShareOffsetsCode makes sq forget t.
func deleteShareOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = "sq"
	req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "t"})
	resp := send[*kmsg.DeleteShareGroupOffsetsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].ErrorCode
}
