package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// SyncGroup (key 14), versions 0-5: the leader's assignment, handed to every
// member once written to __consumer_offsets; protocol type and name are
// checked from v5.
func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.SyncGroupRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response { return s.groups.coord.SyncGroup(r.conn.ctx, req)() })
}
