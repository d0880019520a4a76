package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// AddOffsetsToTxn (key 25), versions 0-4: adds the group's
// __consumer_offsets partition to the transaction, before TxnOffsetCommit.
func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AddOffsetsToTxnRequest)
	if denied := s.txnDenied(r); denied != nil {
		return respond(denied)
	}
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := s.txnContext(r)
		defer cancel()
		return s.txns.coord.AddOffsetsToTxn(ctx, req)()
	})
}
