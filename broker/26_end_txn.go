package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// EndTxn (key 26), versions 0-5: commit or abort. The coordinator writes
// PrepareCommit/PrepareAbort to __transaction_state, answers, then writes
// markers to every partition of the transaction and completes it. From v5
// (transaction version 2, advertised in ApiVersions) every EndTxn bumps
// the producer epoch, the markers carry the bumped epoch, and the answer
// names the producer id and epoch the next transaction runs at.
func init() { register(26, 0, 5, handleEndTxn) }

func handleEndTxn(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.EndTxnRequest)
	if denied := s.txnDenied(r); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := s.txnContext(r)
		defer cancel()
		return s.txns.coord.EndTxn(ctx, req)()
	})
}
