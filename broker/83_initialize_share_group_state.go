package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/share"
)

// InitializeShareGroupState (key 83), version 0: a broker asks the share
// coordinator of a group to start share partitions over at a start offset
// with a state epoch (the leader of a partition the group never read, in
// Gregor; Kafka's group coordinator when it assigns one or resets it).
// Brokers only: CLUSTER_ACTION on the cluster under an authorizer.
func init() { register(83, 0, 0, handleInitializeShareGroupState) }

func handleInitializeShareGroupState(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.InitializeShareGroupStateRequest)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
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
				waits[i] = s.shares.coord.InitializeState(r.conn.ctx, share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.StateEpoch, p.StartOffset)
			}
			rt := kmsg.NewInitializeShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for i, p := range t.Partitions {
				rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, waits[i]()
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
