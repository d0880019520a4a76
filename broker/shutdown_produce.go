package broker

import (
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// On shutdown, an acks=all produce still waiting for its followers is
// answered NOT_LEADER_OR_FOLLOWER rather than left to the closing
// connection. That is Kafka's answer too: its controlled shutdown moves
// leadership away first, and a DelayedProduce whose partition is no
// longer led here completes with NOT_LEADER_OR_FOLLOWER. The client
// refreshes its metadata and retries on the new leader (an idempotent
// producer's retry of a batch that did survive is answered with its
// original offsets). Server.Close signals the waits, waits for them to
// answer, and then closes each connection's read side first, so that
// answers already made are written before the socket closes.

// produceWaits counts the acks=all produces waiting for a high watermark
// and tells them when the server is leaving. The zero value is ready.
type produceWaits struct {
	mu      sync.Mutex
	leaving chan struct{} // closed by answerAll; made on first use
	left    bool
	n       int           // waits in progress
	drained chan struct{} // closed when n reaches 0 after answerAll
}

func (w *produceWaits) initLocked() {
	if w.leaving == nil {
		w.leaving = make(chan struct{})
	}
}

// enter registers a wait; the channel it returns closes when the server
// starts to shut down (at once if it has). exit must follow.
func (w *produceWaits) enter() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.initLocked()
	w.n++
	return w.leaving
}

func (w *produceWaits) exit() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.n == 0 && w.drained != nil {
		close(w.drained)
		w.drained = nil
	}
}

// answerAll tells every wait, present and future, that the server is
// leaving, and waits up to timeout for those in progress to answer.
func (w *produceWaits) answerAll(timeout time.Duration) {
	w.mu.Lock()
	w.initLocked()
	if !w.left {
		w.left = true
		close(w.leaving)
	}
	if w.n == 0 {
		w.mu.Unlock()
		return
	}
	if w.drained == nil {
		w.drained = make(chan struct{})
	}
	drained := w.drained
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// answerLeaving answers NOT_LEADER_OR_FOLLOWER for each partition whose
// batch the high watermark does not cover yet: this node will not lead it
// much longer, and what it appended may not survive.
func answerLeaving(resp *kmsg.ProduceResponse, ws []hwWait) {
	for _, w := range ws {
		if w.p.HighWatermark() < w.offset || w.deposed() {
			sp := &resp.Topics[w.topicIdx].Partitions[w.idx]
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
		}
	}
}

// closeConns ends the connections of a closing server: it shuts each
// one's read side, so its reader stops and its writer sends the answers
// already made (those of the produces answerAll released among them)
// before the connection closes, and closes whatever is still open after
// timeout.
func (s *Server) closeConns(conns []net.Conn, timeout time.Duration) {
	for _, nc := range conns {
		if cr, ok := nc.(interface{ CloseRead() error }); ok && cr.CloseRead() == nil {
			continue
		}
		nc.Close()
	}
	// Each connection's writer waits for the responses of the requests
	// already read (conn.awaitOnClose) and its serveConn returns once they
	// are flushed; past the deadline the writers give those up and the
	// sockets close.
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		if open == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(s.connsExpired)
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
}
