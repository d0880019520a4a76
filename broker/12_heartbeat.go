package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// Heartbeat (key 12), versions 0-4: REBALANCE_IN_PROGRESS tells a member to
// rejoin; ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID as Kafka.
func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.HeartbeatRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response { return s.groups.coord.Heartbeat(r.conn.ctx, req)() })
}
