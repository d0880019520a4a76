package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteGroups (key 42), versions 0-2: NON_EMPTY_GROUP for a group with
// members, GROUP_ID_NOT_FOUND for an unknown one. Share groups are
// deleted, with their share-partition state, by the share coordinator
// (shares.go).
func init() { register(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteGroupsRequest)
	sub, finish := s.authorizeDeleteGroups(r, req)
	return r.inOrder(func() kmsg.Response {
		resp := s.deleteGroups(r.conn.ctx, sub)
		finish(resp)
		return resp
	})
}
