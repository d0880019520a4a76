package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// AlterShareGroupOffsets (key 91), version 0: resets share partitions of a
// group without members to the start offsets given, with nothing in
// flight; the answer waits until the new state is durable.
func init() { register(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AlterShareGroupOffsetsRequest)
	return r.inOrder(func() kmsg.Response {
		// Kafka asks READ (not ALTER) on the group, and READ on each
		// topic.
		if resp := s.shareGroupDenied(r, authz.OpRead, req.GroupID); resp != nil {
			return resp
		}
		sub, finish := s.authorizeAlterShareGroupOffsets(r, req)
		if err := s.shareReady(r.conn.ctx, req.GroupID); err != nil {
			resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
			resp.ErrorCode = errCode(err)
			return resp
		}
		if fwd, ok := s.forwardShareGroup(r, req.GroupID, sub); ok {
			resp := fwd.(*kmsg.AlterShareGroupOffsetsResponse)
			finish(resp)
			return resp
		}
		resp := s.shares.coord.AlterOffsets(r.conn.ctx, sub)
		finish(resp)
		return resp
	})
}
