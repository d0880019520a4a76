package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// ConsumerGroupHeartbeat (key 68), versions 0-1: the KIP-848 consumer
// group protocol. The coordinator computes assignments on the server
// (uniform or range), and members reconcile incrementally: partitions are
// assigned only once their previous owner has revoked them. Gregor
// advertises the group.version feature at level 1, which tells clients
// the protocol is on. Joining a group id a share group holds answers
// GROUP_ID_NOT_FOUND, as Kafka.
func init() { register(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ConsumerGroupHeartbeatRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	if denied := s.consumerSubscriptionDenied(r, req); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		if req.MemberEpoch == 0 && s.shares.coord.IsShareGroup(r.conn.ctx, req.Group) {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + req.Group + " is not a consumer group."
			resp.ErrorMessage = &msg
			return resp
		}
		ci := r.clientInfo()
		if ac := s.auth(r); ac.enabled() {
			ci.TopicDescribable = func(topic string) bool { return ac.topic(authz.OpDescribe, topic) }
		}
		return s.groups.coord.ConsumerGroupHeartbeat(r.conn.ctx, ci, req)()
	})
}
