package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Kafka serves one request of a connection at a time: it stops reading a
// connection until the request in hand is answered. Clients rely on that
// order (async offset commits, a commit read back with OffsetFetch, a
// transaction's adds before its end). So every request whose effect
// happens in the background phase (the group and transaction coordinator
// requests, FindCoordinator, WriteTxnMarkers, ElectLeaders and the
// reassignment requests) goes through inOrder, and a connection's inOrder
// requests run one after another, each once the one before it is answered.
// The other requests take effect in the first phase, which runs in
// connection order already; Produce and Fetch keep their pipelining, as
// only their waits (for replicas, for data) overlap.

// inOrder answers r in the background phase with what fn returns, starting
// fn only once the connection's previous inOrder request is answered.
// Independent connections still run in parallel.
func (r *request) inOrder(fn func() kmsg.Response) (result, error) {
	c := r.conn
	prev := c.lastInOrder
	done := make(chan struct{})
	c.lastInOrder = done
	return result{wait: func() kmsg.Response {
		defer close(done)
		if prev != nil {
			// Prompt even when the connection is closing: the previous
			// request waits on the connection's context too.
			<-prev
		}
		if c.ctx.Err() != nil {
			// The connection is closing and nothing more is written to
			// it; Kafka would not have read this request at all.
			return nil
		}
		return fn()
	}}, nil
}
