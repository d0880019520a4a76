package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeTransactions (key 65), version 0: state, producer id and epoch,
// timeout, start time and partitions of transactional ids.
func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeTransactionsRequest)
	return r.inOrder(func() kmsg.Response {
		ctx, cancel := s.txnContext(r)
		defer cancel()
		resp := s.txns.coord.DescribeTransactions(ctx, req)
		s.filterDescribedTransactions(r, resp)
		return resp
	})
}
