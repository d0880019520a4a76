package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// AddPartitionsToTxn (key 24), versions 0-5: a producer adds partitions to
// its open transaction (v0-v3); partition leaders send the batched form
// (v4+, broker/internal/interbroker): KIP-890's check that a partition is in the
// producer's transaction (VerifyOnly), or the add itself for transaction
// version 2 producers, which no longer send this request.
func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AddPartitionsToTxnRequest)
	if denied := s.addPartitionsToTxnDenied(r, req); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := s.txnContext(r)
		defer cancel()
		return s.txns.coord.AddPartitionsToTxn(ctx, req)()
	})
}
