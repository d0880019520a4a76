package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta"
)

// ElectLeaders (key 43), versions 0-2: preferred (0) or unclean (1, v1+)
// leader elections, done by the active controller; null topics mean every
// partition. ELECTION_NOT_NEEDED when the preferred replica already leads,
// PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE as
// Kafka.
func init() { register(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ElectLeadersRequest)
	return result{wait: func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		ctx, cancel := context.WithTimeout(r.conn.ctx, timeout)
		defer cancel()
		var topics []raftmeta.TopicPartitions
		if req.Topics != nil {
			topics = make([]raftmeta.TopicPartitions, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, raftmeta.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		typ := raftmeta.ElectPreferred
		if req.Version >= 1 && req.ElectionType == 1 {
			typ = raftmeta.ElectUnclean
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
	}}, nil
}
