package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// JoinGroup (key 11), versions 0-9. Kafka 4 dropped v0-v1 but old sarama
// and kafka-go still send them, so they are served. KIP-394 member ids,
// KIP-345 static members, the initial rebalance delay; the answer waits for
// the rebalance. A group id a share group holds answers GROUP_ID_NOT_FOUND,
// as Kafka, which keeps one group of one type per id.
func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.JoinGroupRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		if s.shares.coord.IsShareGroup(r.conn.ctx, req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.MemberID = kerr.GroupIDNotFound.Code, req.MemberID
			return resp
		}
		return s.groups.coord.JoinGroup(r.conn.ctx, r.clientInfo(), req)()
	})
}
