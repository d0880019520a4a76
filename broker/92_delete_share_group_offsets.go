package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DeleteShareGroupOffsets (key 92), version 0: a share group without
// members forgets its state of every partition of the topics named.
func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteShareGroupOffsetsRequest)
	return r.inOrder(func() kmsg.Response {
		// DELETE on the group, READ on each topic, as Kafka.
		if resp := s.shareGroupDenied(r, authz.OpDelete, req.GroupID); resp != nil {
			return resp
		}
		sub, finish := s.authorizeDeleteShareGroupOffsets(r, req)
		if fwd, ok := s.forwardShareGroup(r, req.GroupID, sub); ok {
			resp := fwd.(*kmsg.DeleteShareGroupOffsetsResponse)
			finish(resp)
			return resp
		}
		resp := s.shares.coord.DeleteOffsets(r.conn.ctx, sub)
		finish(resp)
		return resp
	})
}
