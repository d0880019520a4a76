package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups (key 15), versions 0-6: state, protocol, members with
// their metadata and assignment.
func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeGroupsRequest)
	sub, finish := s.authorizeDescribeGroups(r, req)
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.DescribeGroups(r.conn.ctx, sub)()
		for i, g := range resp.Groups {
			// A share group is no classic group: Kafka says so.
			if g.ErrorCode == kerr.GroupIDNotFound.Code && s.shares.coord.IsShareGroup(r.conn.ctx, g.Group) {
				msg := "Group " + g.Group + " is not a classic group."
				resp.Groups[i].ErrorMessage = &msg
			}
		}
		finish(resp)
		return resp
	})
}
