package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// JoinGroup (key 11), versions 0-9. Kafka 4 dropped v0-v1 but old sarama
// and kafka-go still send them, so they are served. KIP-394 member ids,
// KIP-345 static members, the initial rebalance delay; the answer waits for
// the rebalance.
func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.JoinGroupRequest)
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response { return s.groups.coord.JoinGroup(r.conn.ctx, r.clientInfo(), req)() })
}
