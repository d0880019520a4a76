package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/share"
)

// ReadShareGroupState (key 84), version 0: the leader of a topic
// partition reads the durable state of a share partition from its share
// coordinator when it starts serving it (after a restart or a change of
// leader): start offset, state epoch and the state batches. A leader
// epoch newer than the last one recorded is recorded, so that the
// writes of an older leader are fenced (FENCED_LEADER_EPOCH). Brokers
// only: CLUSTER_ACTION on the cluster under an authorizer.
func init() { register(84, 0, 0, handleReadShareGroupState) }

func handleReadShareGroupState(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ReadShareGroupStateRequest)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
		denied := s.shareStateDenied(r)
		if denied == 0 {
			if err := s.shareReady(r.conn.ctx, req.GroupID); err != nil {
				denied = errCode(err)
			}
		}
		for _, t := range req.Topics {
			waits := make([]coord.Pending[share.State], len(t.Partitions))
			for i, p := range t.Partitions {
				if denied != 0 {
					waits[i] = coord.Ready(share.State{ErrorCode: denied})
					continue
				}
				waits[i] = s.shares.coord.ReadState(r.conn.ctx, share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.LeaderEpoch)
			}
			rt := kmsg.NewReadShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for i, p := range t.Partitions {
				st := waits[i]()
				rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, st.ErrorCode
				if st.ErrorCode == 0 {
					rp.StateEpoch, rp.StartOffset = st.StateEpoch, st.StartOffset
					for _, b := range st.Batches {
						sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
						sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, b.State, b.Deliveries
						rp.StateBatches = append(rp.StateBatches, sb)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
