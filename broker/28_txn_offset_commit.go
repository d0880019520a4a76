package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// TxnOffsetCommit (key 28), versions 0-5: offsets a transactional producer
// commits for a group (sendOffsetsToTransaction). They are written to
// __consumer_offsets in the producer's transaction and become the group's
// committed offsets only when the transaction commits; an abort drops them.
// v3+ checks the group member as OffsetCommit does. Unknown topics answer
// UNKNOWN_TOPIC_OR_PARTITION and are not written.
func init() { register(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.TxnOffsetCommitRequest)
	if denied := s.txnDenied(r); denied != nil {
		return respond(denied)
	}
	ac := s.auth(r)
	img := s.meta.Image()
	var unknown []kmsg.TxnOffsetCommitResponseTopic
	known := req.Topics[:0:0]
	for _, t := range req.Topics {
		ti, ok := img.Topic(t.Topic)
		// Authorization before existence, as KafkaApis.
		code := kerr.UnknownTopicOrPartition.Code
		if !ac.topic(authz.OpRead, t.Topic) {
			ok, code = false, kerr.TopicAuthorizationFailed.Code
		}
		var good []kmsg.TxnOffsetCommitRequestTopicPartition
		bad := kmsg.NewTxnOffsetCommitResponseTopic()
		bad.Topic = t.Topic
		for _, p := range t.Partitions {
			if ok && p.Partition >= 0 && int(p.Partition) < len(ti.Partitions) {
				good = append(good, p)
				continue
			}
			bp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			bp.Partition = p.Partition
			bp.ErrorCode = code
			bad.Partitions = append(bad.Partitions, bp)
		}
		if len(bad.Partitions) > 0 {
			unknown = append(unknown, bad)
		}
		if len(good) > 0 {
			t.Partitions = good
			known = append(known, t)
		}
	}
	if len(known) == 0 && len(unknown) > 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = unknown
		return respond(resp)
	}
	sub := *req
	sub.Topics = known
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.TxnOffsetCommit(r.conn.ctx, &sub)()
		resp.Topics = append(resp.Topics, unknown...)
		return resp
	})
}
