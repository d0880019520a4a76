package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/security/authz"
)

// ShareAcknowledge (key 79), versions 1-2: acknowledgements outside a
// fetch (ACCEPT, RELEASE, REJECT, and RENEW from version 2, KIP-1222),
// within the member's share session: epoch 0 is refused (a session opens
// with a ShareFetch), -1 closes the session after the acknowledgements
// and releases what the member still holds. The answer waits until the
// new state is durable in __share_group_state.
func init() { register(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ShareAcknowledgeRequest)
	return r.inOrder(func() kmsg.Response {
		// READ on the group first, as Kafka; READ on each topic
		// acknowledged is the coordinator's to apply (Readable).
		if resp := s.shareGroupDenied(r, authz.OpRead, ptrOr(req.GroupID)); resp != nil {
			return resp
		}
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		names := s.topicNamesByID()
		ack := share.AckStart{Group: *req.GroupID, Member: *req.MemberID, Epoch: req.ShareSessionEpoch,
			Renew: req.Version >= 2 && req.IsRenewAck, Readable: s.shareReadable(r)}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				a := share.Ack{Ref: share.PartitionRef{TopicID: t.TopicID, Topic: names[t.TopicID], Partition: p.Partition}}
				for _, b := range p.AcknowledgementBatches {
					a.Batches = append(a.Batches, share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
				}
				ack.Acks = append(ack.Acks, a)
			}
		}
		code, codes := s.shares.coord.Acknowledge(r.conn.ctx, ack)
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if req.Version >= 2 {
			resp.AcquisitionLockTimeoutMillis = s.cfg.GroupShareRecordLockDurationMs
			if v, ok := s.groupConfigLookup(*req.GroupID, "share.record.lock.duration.ms"); ok {
				if ms, err := strconv.ParseInt(v, 10, 32); err == nil {
					resp.AcquisitionLockTimeoutMillis = int32(ms)
				}
			}
		}
		for _, t := range req.Topics {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) == 0 {
					continue // nothing acknowledged there: Kafka leaves it out
				}
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codes[share.PartitionRef{TopicID: t.TopicID, Topic: names[t.TopicID], Partition: p.Partition}]
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
				if lp := s.leaderPartition(names[t.TopicID], p.Partition); lp != nil && rp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.cfg.NodeID, lp.LeaderEpoch.Load()
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			if len(rt.Partitions) > 0 {
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp
	})
}
