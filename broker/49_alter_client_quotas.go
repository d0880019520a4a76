package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// AlterClientQuotas (key 49), versions 0-1: sets and removes quotas of
// user, client-id and ip entities. The broker forwards the request as it
// came to the active controller, which decides it as Kafka's
// ClientQuotaControlManager does and commits ClientQuotaRecords
// (raftmeta/controller/quota.go). Only the keys the brokers enforce
// (controller.EnforcedQuotaKeys, quota.go) are accepted; Kafka's other
// quota keys answer INVALID_REQUEST.
func init() { register(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AlterClientQuotasRequest)
	if denied := s.clusterDenied(r, authz.OpAlterConfigs); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(r.conn.ctx, 30*time.Second)
		defer cancel()
		resp := s.ctrl.AlterClientQuotas(ctx, req)
		// The controller's answer is built at no version in particular;
		// it is sent at the request's.
		resp.SetVersion(req.Version)
		return resp
	})
}
