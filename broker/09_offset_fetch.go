package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetFetch (key 9), versions 0-9: one group (v0-v7) or several (v8+);
// all partitions when topics are null; committed leader epoch and metadata.
func init() { register(9, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetFetchRequest)
	whole, sub, finish := s.authorizeOffsetFetch(r, req)
	if whole != nil {
		return respond(whole)
	}
	return r.inOrder(func() kmsg.Response {
		resp := s.groups.coord.OffsetFetch(r.conn.ctx, sub)()
		finish(resp)
		return resp
	})
}
