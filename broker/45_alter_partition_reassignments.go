package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// AlterPartitionReassignments (key 45), versions 0-1: moves partitions to
// new replicas (KIP-455), done by the active controller. Replicas that are
// added fetch from the leader; when the last of them joins the ISR the
// controller drops the replicas being removed, moving the leadership if
// its holder leaves, and those brokers delete their copies. Null replicas
// cancel a reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there
// is none). v1 carries AllowReplicationFactorChange (KIP-860): false
// answers INVALID_REPLICATION_FACTOR for a target of another size. Errors
// are per partition (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT
// for an empty, duplicated or unregistered replica); NOT_CONTROLLER or
// REQUEST_TIMED_OUT fail the whole request. A negative timeout is a
// deadline already past: REQUEST_TIMED_OUT at the top and for every
// partition, nothing moved (AlterPartitionReassignmentsRequest.getErrorResponse).
func init() { register(45, 0, 1, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AlterPartitionAssignmentsRequest)
	if denied := s.clusterDenied(r, authz.OpAlter); denied != nil {
		return respond(denied)
	}
	if req.TimeoutMillis < 0 && len(req.Topics) > 0 {
		return respond(reassignmentsError(req, kerr.RequestTimedOut))
	}
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		// v0 cannot forbid a change of replication factor.
		allow := req.Version < 1 || req.AllowReplicationFactorChange
		resp.AllowReplicationFactorChange = allow
		if len(req.Topics) == 0 {
			return resp
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 60 * time.Second
		}
		ctx, cancel := context.WithTimeout(r.conn.ctx, timeout)
		defer cancel()
		topics := make([]controller.ReassignTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			rt := controller.ReassignTopic{Topic: t.Topic, Partitions: make([]controller.ReassignPartition, 0, len(t.Partitions))}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, controller.ReassignPartition{Partition: p.Partition, Replicas: p.Replicas})
			}
			topics = append(topics, rt)
		}
		results, err := s.ctrl.AlterPartitionReassignments(ctx, topics, allow)
		if err != nil {
			resp.ErrorCode = errCode(err)
			resp.ErrorMessage = controller.ErrorMessage(err)
			return resp
		}
		for _, tr := range results {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = tr.Topic
			for _, pr := range tr.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition = pr.Partition
				rp.ErrorCode = errCode(pr.Err)
				rp.ErrorMessage = controller.ErrorMessage(pr.Err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}

// reassignmentsError is AlterPartitionReassignmentsRequest.getErrorResponse.
func reassignmentsError(req *kmsg.AlterPartitionAssignmentsRequest, ke *kerr.Error) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.Version < 1 || req.AllowReplicationFactorChange
	resp.ErrorCode = ke.Code
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, ke.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
