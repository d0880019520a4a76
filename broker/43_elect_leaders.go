package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// ElectLeaders (key 43), versions 0-2: preferred (0) or unclean (1, v1+)
// leader elections, done by the active controller; null topics mean every
// partition. ELECTION_NOT_NEEDED when the preferred replica already leads,
// PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE as
// Kafka. Another election type fails the request with INVALID_REQUEST at
// the top and for each partition named (ReplicationControlManager.electionType,
// ElectLeadersRequest.getErrorResponse); v0 carries no type and means
// preferred. A negative timeout is a deadline already past: Kafka's
// controller times the request out before it runs (REQUEST_TIMED_OUT, no
// election); 0 waits up to 30s here, where Kafka would time out too, as
// clients that mean "do not wait" send it.
func init() { register(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ElectLeadersRequest)
	if denied := s.clusterDenied(r, authz.OpAlter); denied != nil {
		return respond(denied)
	}
	if req.TimeoutMillis < 0 {
		// Before the election type: Kafka's controller checks that
		// in the event the deadline cancels.
		return respond(electLeadersError(req, kerr.RequestTimedOut))
	}
	if req.ElectionType != 0 && req.ElectionType != 1 {
		return respond(electLeadersError(req, kerrMsg(kerr.InvalidRequest, fmt.Sprintf("Unknown election type %d", req.ElectionType))))
	}
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second
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
		typ := controller.ElectPreferred
		if req.ElectionType == 1 {
			typ = controller.ElectUnclean
		}
		results, err := s.ctrl.ElectLeaders(ctx, typ, topics)
		if err != nil {
			resp.ErrorCode = errCode(err)
			return resp
		}
		for _, tr := range results {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = tr.Topic
			for _, pr := range tr.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition = pr.Partition
				if pr.Err != nil {
					rp.ErrorCode = errCode(pr.Err)
					msg := pr.Err.Error()
					rp.ErrorMessage = &msg
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if err := s.reconcile(s.meta.Image()); err != nil {
			s.log.Error("apply metadata", "err", err)
		}
		return resp
	})
}

// electLeadersError is ElectLeadersRequest.getErrorResponse: err at the
// top and for every partition the request names.
func electLeadersError(req *kmsg.ElectLeadersRequest, err error) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = errCode(err)
	msg := err.Error()
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, resp.ErrorCode, &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
