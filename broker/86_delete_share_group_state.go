package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/share"
)

// DeleteShareGroupState (key 86), version 0: the durable state of share
// partitions is deleted (tombstones in __share_group_state); a leader
// serving one is fenced at its next write. Kafka's group coordinator
// sends it for DeleteGroups and DeleteShareGroupOffsets; Gregor's
// coordinator holds the state itself and deletes it directly, and serves
// the request for brokers that send it. Brokers only: CLUSTER_ACTION on
// the cluster under an authorizer.
func init() { register(86, 0, 0, handleDeleteShareGroupState) }

func handleDeleteShareGroupState(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteShareGroupStateRequest)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
		denied := s.shareStateDenied(r)
		if denied == 0 {
			if err := s.shareReady(r.conn.ctx, req.GroupID); err != nil {
				denied = errCode(err)
			}
		}
		for _, t := range req.Topics {
			waits := make([]coord.Pending[int16], len(t.Partitions))
			for i, p := range t.Partitions {
				if denied != 0 {
					waits[i] = coord.Ready(denied)
					continue
				}
				waits[i] = s.shares.coord.DeleteState(r.conn.ctx, share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			}
			rt := kmsg.NewDeleteShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for i, p := range t.Partitions {
				rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, waits[i]()
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
