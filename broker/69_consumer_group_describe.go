package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ConsumerGroupDescribe (key 69), versions 0-1: members, epochs and
// assignments of KIP-848 consumer groups.
func init() { register(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ConsumerGroupDescribeRequest)
	sub, finish := s.authorizeConsumerGroupDescribe(r, req)
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.ConsumerGroupDescribe(r.conn.ctx, sub)()
		finish(resp)
		return resp
	})
}
