package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups (key 15), versions 0-6: state, protocol, members with
// their metadata and assignment.
func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeGroupsRequest)
	return r.inOrder(func() kmsg.Response { return s.groups.coord.DescribeGroups(r.conn.ctx, req)() })
}
