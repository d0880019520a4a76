package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/share"
)

// WriteShareGroupState (key 85), versions 0-1: the leader of a topic
// partition writes a share partition's state to its share coordinator
// (acknowledgements, releases, lock expiries), answered once it is in
// __share_group_state. A write from an older leader answers
// FENCED_LEADER_EPOCH, one from before a reset FENCED_STATE_EPOCH, one
// for a share partition never initialized INVALID_REQUEST, as Kafka's
// share coordinator. Version 1 adds DeliveryCompleteCount (KIP-1226),
// which Gregor does not keep. Brokers only: CLUSTER_ACTION on the
// cluster under an authorizer.
func init() { register(85, 0, 1, handleWriteShareGroupState) }

func handleWriteShareGroupState(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.WriteShareGroupStateRequest)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
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
				w := share.StateWrite{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
				for _, b := range p.StateBatches {
					w.Batches = append(w.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: b.DeliveryState, Deliveries: b.DeliveryCount})
				}
				waits[i] = s.shares.coord.WriteState(r.conn.ctx, share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, w)
			}
			rt := kmsg.NewWriteShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for i, p := range t.Partitions {
				rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, waits[i]()
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
