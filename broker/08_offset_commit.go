package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// OffsetCommit (key 8), versions 0-9: commits of group members (generation
// and member checked) and of simple consumers (generation -1, no member, on
// an empty group), written to __consumer_offsets before the answer.
// Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and are
// not committed, as Kafka's KafkaApis does before the coordinator sees
// them. v10 (topic ids) is not served yet.
func init() { register(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetCommitRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	ac := s.auth(r)
	img := s.meta.Image()
	var unknown []kmsg.OffsetCommitResponseTopic
	known := req.Topics[:0:0]
	for _, t := range req.Topics {
		ti, ok := img.Topic(t.Topic)
		// Authorization before existence, as KafkaApis.
		code := kerr.UnknownTopicOrPartition.Code
		if !ac.topic(authz.OpRead, t.Topic) {
			ok, code = false, kerr.TopicAuthorizationFailed.Code
		}
		var good []kmsg.OffsetCommitRequestTopicPartition
		bad := kmsg.NewOffsetCommitResponseTopic()
		bad.Topic = t.Topic
		for _, p := range t.Partitions {
			if ok && p.Partition >= 0 && int(p.Partition) < len(ti.Partitions) {
				good = append(good, p)
				continue
			}
			bp := kmsg.NewOffsetCommitResponseTopicPartition()
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
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = unknown
		return respond(resp)
	}
	sub := *req
	sub.Topics = known
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.OffsetCommit(r.conn.ctx, &sub)()
		resp.Topics = append(resp.Topics, unknown...)
		return resp
	})
}
