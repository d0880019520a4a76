package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// LeaveGroup (key 13), versions 0-5; batched members (v3+), static members
// by instance id.
func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.LeaveGroupRequest)
	return r.inOrder(func() kmsg.Response { return s.groups.coord.LeaveGroup(r.conn.ctx, req)() })
}
