package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// RPCHandler answers one rpc from node from, before ctx ends: body is the
// request, and the result is the whole answer, which starts with the
// call's error (see wire.go and AppendCallError).
type RPCHandler func(ctx context.Context, from uint64, body []byte) []byte

// APIAddLearner is the rpc the node answers itself: add the calling node
// to the quorum as a learner. Config.Handlers may not take its number.
const APIAddLearner byte = 11

// maxRPCInFlight bounds the requests one rpc connection may have running
// on the server; the reader stops reading until one finishes.
const maxRPCInFlight = 64

// rpcClientConn is one rpc connection to a peer, shared by all callers:
// requests are written under mu and answers matched by correlation ID.
type rpcClientConn struct {
	wc *wireConn

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan rpcAnswer
	err     error // set once the connection has failed
}

type rpcAnswer struct {
	body   []byte
	leader uint64
	err    error
}

// Call sends one request to node to and returns the answer, which starts
// with the call's error (see wire.go), and the leader the answering node
// knows (0 if none). Its error is failing to reach the node or to hear
// from it before ctx ends.
func (t *TCPTransport) Call(ctx context.Context, to uint64, api byte, body []byte) ([]byte, uint64, error) {
	rc, err := t.rpcConnTo(ctx, to)
	if err != nil {
		return nil, 0, err
	}
	timeout := t.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, 0, context.DeadlineExceeded
	}
	ch := make(chan rpcAnswer, 1)
	rc.mu.Lock()
	if rc.err != nil {
		rc.mu.Unlock()
		return nil, 0, rc.err
	}
	rc.next++
	corr := rc.next
	rc.pending[corr] = ch
	e := compact.Encoder{}
	e.Uvarint(corr)
	e.Buf = append(e.Buf, api)
	e.Uvarint(uint64(timeout.Milliseconds()))
	e.Buf = append(e.Buf, body...)
	werr := rc.wc.writeAndFlush(e.Buf, t.cfg.WriteTimeout)
	rc.mu.Unlock()
	if werr != nil {
		rc.fail(fmt.Errorf("send request to node %d: %w", to, werr))
	}
	select {
	case a := <-ch:
		return a.body, a.leader, a.err
	case <-ctx.Done():
		rc.mu.Lock()
		delete(rc.pending, corr)
		rc.mu.Unlock()
		return nil, 0, ctx.Err()
	}
}

// fail fails every pending call and closes the connection.
func (rc *rpcClientConn) fail(err error) {
	rc.mu.Lock()
	if rc.err == nil {
		rc.err = err
	}
	pending := rc.pending
	rc.pending = map[uint64]chan rpcAnswer{}
	rc.mu.Unlock()
	for _, ch := range pending {
		ch <- rpcAnswer{err: err}
	}
	rc.wc.close()
}

// rpcConnTo returns the live rpc connection to node to, dialing one if
// there is none.
func (t *TCPTransport) rpcConnTo(ctx context.Context, to uint64) (*rpcClientConn, error) {
	t.mu.Lock()
	if rc := t.rpcs[to]; rc != nil {
		rc.mu.Lock()
		dead := rc.err != nil
		rc.mu.Unlock()
		if !dead {
			t.mu.Unlock()
			return rc, nil
		}
		delete(t.rpcs, to)
	}
	var addr string
	if p := t.peers[to]; p != nil {
		addr = p.addr
	}
	t.mu.Unlock()
	if addr == "" {
		return nil, fmt.Errorf("rpc to node %d: no address for it", to)
	}
	wc, _, err := t.dial(ctx, addr, connRPC, to)
	if err != nil {
		return nil, fmt.Errorf("rpc to node %d: %w", to, err)
	}
	rc := &rpcClientConn{wc: wc, pending: map[uint64]chan rpcAnswer{}}
	t.mu.Lock()
	if other := t.rpcs[to]; other != nil {
		// Another caller dialed at the same time; use one connection.
		t.mu.Unlock()
		wc.close()
		return other, nil
	}
	t.rpcs[to] = rc
	t.mu.Unlock()
	if !t.goTracked(func() { t.readRPCAnswers(rc, to) }) {
		rc.fail(ErrClosed)
		return nil, ErrClosed
	}
	return rc, nil
}

func (t *TCPTransport) readRPCAnswers(rc *rpcClientConn, to uint64) {
	defer func() {
		t.mu.Lock()
		if t.rpcs[to] == rc {
			delete(t.rpcs, to)
		}
		closed := t.closed
		t.mu.Unlock()
		if !closed && t.cfg.RPCConnLost != nil {
			t.cfg.RPCConnLost(to)
		}
	}()
	for {
		b, err := readFrame(rc.wc.r, t.cfg.MaxFrameBytes)
		if err != nil {
			rc.fail(fmt.Errorf("rpc connection to node %d: %w", to, err))
			return
		}
		d := compact.Decoder{Buf: b}
		corr := d.Uvarint()
		leader := d.Uvarint()
		if d.Err != nil {
			rc.fail(fmt.Errorf("rpc connection to node %d: bad answer: %w", to, d.Err))
			return
		}
		rc.mu.Lock()
		ch := rc.pending[corr]
		delete(rc.pending, corr)
		rc.mu.Unlock()
		if ch != nil {
			ch <- rpcAnswer{body: d.Buf, leader: leader}
		}
	}
}

// serveRPC answers requests on an accepted rpc connection from node from.
func (t *TCPTransport) serveRPC(wc *wireConn, from uint64) {
	t.mu.Lock()
	t.rpcServing[from]++
	t.mu.Unlock()
	defer t.rpcServed(from)
	ctx, cancel := context.WithCancel(t.ctx)
	var handlers sync.WaitGroup
	defer handlers.Wait()
	defer cancel()
	sem := make(chan struct{}, maxRPCInFlight)
	var wmu sync.Mutex
	for {
		b, err := readFrame(wc.r, t.cfg.MaxFrameBytes)
		if err != nil {
			t.logConnEnd("rpc connection ended", from, err)
			wc.close()
			return
		}
		d := compact.Decoder{Buf: b}
		corr := d.Uvarint()
		api := byte(d.Int8())
		timeoutMs := d.Uvarint()
		if d.Err != nil {
			t.log.Warn("bad rpc request; closing the connection", "from", from, "err", d.Err)
			wc.close()
			return
		}
		body := d.Buf
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		timeout := min(time.Duration(timeoutMs)*time.Millisecond, t.cfg.RequestTimeout)
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer func() { <-sem }()
			hctx, hcancel := context.WithTimeout(ctx, timeout)
			defer hcancel()
			resp := t.handleRPC(hctx, from, api, body)
			e := compact.Encoder{}
			e.Uvarint(corr)
			var leader uint64
			if n := t.node.Load(); n != nil {
				leader, _ = n.LeaderID()
			}
			e.Uvarint(leader)
			e.Buf = append(e.Buf, resp...)
			wmu.Lock()
			err := wc.writeAndFlush(e.Buf, t.cfg.WriteTimeout)
			wmu.Unlock()
			if err != nil {
				wc.close()
			}
		}()
	}
}

// rpcServed notes that an rpc connection from node from has ended, and
// tells the node when it was that node's last one.
func (t *TCPTransport) rpcServed(from uint64) {
	t.mu.Lock()
	t.rpcServing[from]--
	last := t.rpcServing[from] == 0
	if last {
		delete(t.rpcServing, from)
	}
	closed := t.closed
	t.mu.Unlock()
	if !last || closed {
		return
	}
	if n := t.node.Load(); n != nil && n.cfg.RPCPeerGone != nil {
		n.cfg.RPCPeerGone(from)
	}
}

// handleRPC runs one request and returns its answer. A panic is a bug: it
// is logged and answered as UNKNOWN_SERVER_ERROR rather than taking the
// process down.
func (t *TCPTransport) handleRPC(ctx context.Context, from uint64, api byte, body []byte) (resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			t.log.Error("panic in controller rpc", "api", api, "from", from, "panic", r)
			resp = AppendCallError(nil, kerr.UnknownServerError.Code, new("internal error"))
		}
	}()
	n := t.node.Load()
	if n == nil {
		return AppendCallError(nil, kerr.NotController.Code, new("the metadata node is not running"))
	}
	if api == APIAddLearner {
		return n.serveAddLearner(ctx, from, body)
	}
	h := n.cfg.Handlers[api]
	if h == nil {
		return AppendCallError(nil, kerr.InvalidRequest.Code, new(fmt.Sprintf("unknown controller rpc %d", api)))
	}
	return h(ctx, from, body)
}

// serveAddLearner answers APIAddLearner: an answer without a call error,
// then AddLearner's outcome in the same form.
func (n *Node) serveAddLearner(ctx context.Context, from uint64, body []byte) []byte {
	if len(body) != 0 {
		return AppendCallError(nil, kerr.InvalidRequest.Code, new("AddLearner takes no body"))
	}
	resp := AppendCallError(nil, 0, nil)
	err := n.AddLearner(ctx, from)
	switch {
	case err == nil:
		return AppendCallError(resp, 0, nil)
	case errors.Is(err, ErrNotController):
		return AppendCallError(resp, kerr.NotController.Code, new("this node is not the active controller"))
	case ctx.Err() != nil:
		return AppendCallError(resp, kerr.RequestTimedOut.Code, new(ctx.Err().Error()))
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return AppendCallError(resp, ke.Code, nil)
	}
	return AppendCallError(resp, kerr.UnknownServerError.Code, new(err.Error()))
}

// AppendCallError appends an rpc's error as the answers carry it: a Kafka
// error code (0, and nothing more, for none) and the message, if any, that
// goes with it (package controller reads and writes the same form).
func AppendCallError(b []byte, code int16, msg *string) []byte {
	e := compact.Encoder{Buf: b}
	e.Int16(code)
	if code != 0 {
		e.NullableString(msg)
	}
	return e.Buf
}

// callError is an error a peer answered an rpc with.
type callError struct {
	code *kerr.Error
	msg  string
}

// Error reads as controller.Error does.
func (e *callError) Error() string {
	if e.msg == "" {
		return e.code.Error()
	}
	return e.code.Message + ": " + e.msg
}

// Unwrap returns the Kafka error code, for errors.Is.
func (e *callError) Unwrap() error { return e.code }

// readCallError reads what AppendCallError wrote.
func readCallError(d *compact.Decoder) error {
	code := d.Int16()
	if d.Err != nil || code == 0 {
		return nil
	}
	e := &callError{code: kerr.TypedErrorForCode(code)}
	if msg := d.NullableString(); msg != nil {
		e.msg = *msg
	}
	return e
}
