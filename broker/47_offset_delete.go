package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// OffsetDelete (key 47), version 0: GROUP_SUBSCRIBED_TO_TOPIC when the
// group consumes the topic. Partitions of unknown topics answer
// UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the request, and
// a group-level error replaces them, as KafkaApis and
// OffsetDeleteResponse.Builder.merge do.
func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	if denied := s.groupDenied(r, authz.OpDelete, req.Group); denied != nil {
		return respond(denied)
	}
	ac := s.auth(r)
	img := s.meta.Image()
	var unknown []kmsg.OffsetDeleteResponseTopic
	known := *req
	known.Topics = nil
	for _, t := range req.Topics {
		ti, ok := img.Topic(t.Topic)
		// Authorization before existence, as KafkaApis.
		code := kerr.UnknownTopicOrPartition.Code
		if !ac.topic(authz.OpRead, t.Topic) {
			ok, code = false, kerr.TopicAuthorizationFailed.Code
		}
		bad := kmsg.NewOffsetDeleteResponseTopic()
		bad.Topic = t.Topic
		good := t
		good.Partitions = nil
		for _, p := range t.Partitions {
			if ok && p.Partition >= 0 && int(p.Partition) < len(ti.Partitions) {
				good.Partitions = append(good.Partitions, p)
				continue
			}
			bp := kmsg.NewOffsetDeleteResponseTopicPartition()
			bp.Partition = p.Partition
			bp.ErrorCode = code
			bad.Partitions = append(bad.Partitions, bp)
		}
		if len(bad.Partitions) > 0 {
			unknown = append(unknown, bad)
		}
		if len(good.Partitions) > 0 {
			known.Topics = append(known.Topics, good)
		}
	}
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.OffsetDelete(r.conn.ctx, &known)()
		if resp.ErrorCode != 0 || len(unknown) == 0 {
			return resp
		}
		return mergeOffsetDelete(unknown, resp)
	})
}

// mergeOffsetDelete adds the coordinator's answers to those of unknown
// partitions, topic by topic.
func mergeOffsetDelete(unknown []kmsg.OffsetDeleteResponseTopic, resp *kmsg.OffsetDeleteResponse) *kmsg.OffsetDeleteResponse {
	merged := unknown
	for _, t := range resp.Topics {
		i := 0
		for i < len(merged) && merged[i].Topic != t.Topic {
			i++
		}
		if i == len(merged) {
			merged = append(merged, t)
			continue
		}
		merged[i].Partitions = append(merged[i].Partitions, t.Partitions...)
	}
	resp.Topics = merged
	return resp
}
