package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/share"
)

// ReadShareGroupStateSummary (key 87), versions 0-1: the start offset and
// epochs of share partitions, without their state batches (start offset
// -1 for one never initialized). Kafka's group coordinator sends it for
// DescribeShareGroupOffsets; Gregor's coordinator holds the state itself
// and reads it directly, and serves the request for brokers that send it.
// Version 1 adds DeliveryCompleteCount (KIP-1226), not kept: -1. Brokers
// only: CLUSTER_ACTION on the cluster under an authorizer.
func init() { register(87, 0, 1, handleReadShareGroupStateSummary) }

func handleReadShareGroupStateSummary(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ReadShareGroupStateSummaryRequest)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
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
				waits[i] = s.shares.coord.ReadStateSummary(r.conn.ctx, share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			}
			rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			rt.TopicID = t.TopicID
			for i, p := range t.Partitions {
				st := waits[i]()
				rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, st.ErrorCode
				rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = st.StateEpoch, st.LeaderEpoch, st.StartOffset
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
