package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// AlterUserScramCredentials (key 51), version 0: creates, replaces and
// deletes users' SCRAM credentials. The broker forwards the request as it
// came to the active controller, which decides it as Kafka's
// ScramControlManager does and commits the credentials to the metadata
// log (raftmeta/controller/scram.go); the salted password the client
// computed never reaches the log, only the stored and server keys derived
// from it.
func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if denied := s.clusterDenied(r, authz.OpAlter); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		// Kafka gives the controller no deadline for this call; a
		// bound keeps a quorum without a leader from holding the
		// connection forever.
		ctx, cancel := context.WithTimeout(r.conn.ctx, 30*time.Second)
		defer cancel()
		resp := s.ctrl.AlterUserScramCredentials(ctx, req)
		// The controller's answer is built at no version in particular;
		// it is sent at the request's.
		resp.SetVersion(req.Version)
		return resp
	})
}
