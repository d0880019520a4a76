package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteShareGroupOffsets (key 92), version 0: a share group without
// members forgets its state of every partition of the topics named.
func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteShareGroupOffsetsRequest)
	return r.inOrder(func() kmsg.Response { return s.shares.coord.DeleteOffsets(r.conn.ctx, req) })
}
