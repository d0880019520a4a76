package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ShareGroupDescribe (key 77), version 1: members, epochs and assignments
// of share groups. A group id that is not a share group answers
// GROUP_ID_NOT_FOUND, as Kafka.
func init() { register(77, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ShareGroupDescribeRequest)
	return r.inOrder(func() kmsg.Response {
		sub, finish := s.authorizeShareGroupDescribe(r, req)
		if len(sub.GroupIDs) == 1 {
			if fwd, ok := s.forwardShareGroup(r, sub.GroupIDs[0], sub); ok {
				resp := fwd.(*kmsg.ShareGroupDescribeResponse)
				finish(resp)
				return resp
			}
		}
		resp := s.shares.coord.Describe(r.conn.ctx, sub)()
		finish(resp)
		return resp
	})
}
