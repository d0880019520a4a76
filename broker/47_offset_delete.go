package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetDelete (key 47), version 0: GROUP_SUBSCRIBED_TO_TOPIC when the
// group consumes the topic.
func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	return r.inOrder(func() kmsg.Response { return s.groups.coord.OffsetDelete(r.conn.ctx, req)() })
}
