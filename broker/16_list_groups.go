package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ListGroups (key 16), versions 0-5: every group this node coordinates,
// with the states filter (v4+) and the types filter (v5+); share groups
// come from the share coordinator (shares.go).
func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ListGroupsRequest)
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.ListGroups(r.conn.ctx, req)()
		s.listShareGroups(req, resp)
		s.filterListedGroups(r, resp)
		return resp
	})
}
