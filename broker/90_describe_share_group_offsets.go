package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeShareGroupOffsets (key 90), versions 0-1: each share partition's
// start offset for a share group (-1 where it has none), all of them when
// no topics are named, and from version 1 the lag (KIP-1226).
func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeShareGroupOffsetsRequest)
	return r.inOrder(func() kmsg.Response {
		sub, finish := s.authorizeDescribeShareGroupOffsets(r, req)
		if sub == nil {
			return finish(nil) // every group denied
		}
		if len(sub.Groups) == 1 {
			if fwd, ok := s.forwardShareGroup(r, sub.Groups[0].GroupID, sub); ok {
				return finish(fwd.(*kmsg.DescribeShareGroupOffsetsResponse))
			}
		}
		return finish(s.shares.coord.DescribeOffsets(r.conn.ctx, sub))
	})
}
