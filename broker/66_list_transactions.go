package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ListTransactions (key 66), versions 0-2: transactional ids with their
// state and producer, filtered by state, producer id, duration (v1) and
// id pattern (v2).
func init() { register(66, 0, 2, handleListTransactions) }

func handleListTransactions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ListTransactionsRequest)
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := s.txnContext(r)
		defer cancel()
		resp := s.txns.coord.ListTransactions(ctx, req)
		s.filterListedTransactions(r, resp)
		return resp
	})
}
