package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetCommit (key 8), versions 0-9: commits of group members (generation
// and member checked) and of simple consumers (generation -1, no member, on
// an empty group), written to __consumer_offsets before the answer.
func init() { register(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetCommitRequest)
	return inGroupCoordinator(func() kmsg.Response { return s.groups.coord.OffsetCommit(s.ctx, req) })
}
