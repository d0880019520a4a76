package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// ShareGroupHeartbeat (key 76), version 1 (the stable KIP-932 version;
// version 0 was Kafka 4.0's early access, removed in 4.1): share group
// membership. The coordinator assigns partitions on the server with the
// simple assignor; share groups need no revocation, so a member's
// assignment is the group's target at once. The first share-group request
// creates __share_group_state. A node that coordinates the group for
// clients (it leads the group's __consumer_offsets partition) but does
// not keep its membership forwards the heartbeat (forwardShareGroup).
func init() { register(76, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ShareGroupHeartbeatRequest)
	return r.inOrder(func() kmsg.Response {
		// Kafka checks READ on the group, then DESCRIBE on the topics
		// subscribed to, before the coordinator (or the state topic it
		// needs) is involved.
		if resp := s.shareGroupDenied(r, authz.OpRead, req.GroupID); resp != nil {
			return resp
		}
		if resp := s.shareSubscriptionDenied(r, req); resp != nil {
			return resp
		}
		if err := s.shareReady(r.conn.ctx, req.GroupID); err != nil {
			resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
		if code := s.shareGroupConflict(r, req.GroupID); code != 0 {
			resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			resp.ErrorCode = code
			msg := "Group " + req.GroupID + " is not a share group."
			resp.ErrorMessage = &msg
			return resp
		}
		if resp, ok := s.forwardShareGroup(r, req.GroupID, req); ok {
			return resp
		}
		return s.shares.coord.Heartbeat(r.conn.ctx, r.shareClientInfo(), req)()
	})
}
