package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// LeaveGroup (key 13), versions 0-5; batched members (v3+), static members
// by instance id.
func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.LeaveGroupRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response { return s.groups.coord.LeaveGroup(r.conn.ctx, req)() })
}
