package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// ListPartitionReassignments (key 46), version 0: the partitions with a
// reassignment in progress, with their replicas and the ones being added
// and removed, as the active controller sees them. Null topics list every
// reassignment; named topics and partitions that are unknown or not being
// reassigned are left out, as Kafka does.
func init() { register(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ListPartitionReassignmentsRequest)
	if denied := s.clusterDenied(r, authz.OpDescribe); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 60 * time.Second
		}
		ctx, cancel := context.WithTimeout(r.conn.ctx, timeout)
		defer cancel()
		var topics []controller.TopicPartitions
		if req.Topics != nil {
			topics = make([]controller.TopicPartitions, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, controller.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		results, err := s.ctrl.ListPartitionReassignments(ctx, topics)
		if err != nil {
			resp.ErrorCode = errCode(err)
			resp.ErrorMessage = controller.ErrorMessage(err)
			return resp
		}
		for _, tr := range results {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = tr.Topic
			for _, pr := range tr.Partitions {
				rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				rp.Partition = pr.Partition
				rp.Replicas = pr.Replicas
				rp.AddingReplicas = pr.AddingReplicas
				rp.RemovingReplicas = pr.RemovingReplicas
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
