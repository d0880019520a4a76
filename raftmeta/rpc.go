package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

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

// rpcCall sends one request to node to and returns the answer's body and
// the leader the answering node knows (0 if none). A whole-call failure
// reported by the peer is an *Error; failing to reach it is any other
// error.
func (t *TCPTransport) rpcCall(ctx context.Context, to uint64, api byte, body []byte) ([]byte, uint64, error) {
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
	e := encoder{}
	e.uvarint(corr)
	e.buf = append(e.buf, api)
	e.uvarint(uint64(timeout.Milliseconds()))
	e.buf = append(e.buf, body...)
	werr := rc.wc.writeAndFlush(e.buf, t.cfg.WriteTimeout)
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
		t.mu.Unlock()
	}()
	for {
		b, err := readFrame(rc.wc.r, t.cfg.MaxFrameBytes)
		if err != nil {
			rc.fail(fmt.Errorf("rpc connection to node %d: %w", to, err))
			return
		}
		d := decoder{buf: b}
		corr := d.uvarint()
		leader := d.uvarint()
		callErr := d.apiErr()
		if d.err != nil {
			rc.fail(fmt.Errorf("rpc connection to node %d: bad answer: %w", to, d.err))
			return
		}
		rc.mu.Lock()
		ch := rc.pending[corr]
		delete(rc.pending, corr)
		rc.mu.Unlock()
		if ch != nil {
			ch <- rpcAnswer{body: d.buf, leader: leader, err: callErr}
		}
	}
}

// serveRPC answers requests on an accepted rpc connection from node from.
func (t *TCPTransport) serveRPC(wc *wireConn, from uint64) {
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
		d := decoder{buf: b}
		corr := d.uvarint()
		api := byte(d.int8())
		timeoutMs := d.uvarint()
		if d.err != nil {
			t.log.Warn("bad rpc request; closing the connection", "from", from, "err", d.err)
			wc.close()
			return
		}
		body := d.buf
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
			e := encoder{}
			e.uvarint(corr)
			var leader uint64
			if n := t.node.Load(); n != nil {
				leader, _ = n.LeaderID()
			}
			e.uvarint(leader)
			e.buf = append(e.buf, resp...)
			wmu.Lock()
			err := wc.writeAndFlush(e.buf, t.cfg.WriteTimeout)
			wmu.Unlock()
			if err != nil {
				wc.close()
			}
		}()
	}
}

// handleRPC runs one request and returns the call's error and the body of
// its answer. A panic is a bug: it is logged and answered as
// UNKNOWN_SERVER_ERROR rather than taking the process down.
func (t *TCPTransport) handleRPC(ctx context.Context, from uint64, api byte, body []byte) (resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			t.log.Error("panic in controller rpc", "api", api, "from", from, "panic", r)
			resp = encodeErrResp(apiError(kerr.UnknownServerError, "internal error"))
		}
	}()
	n := t.node.Load()
	if n == nil {
		return encodeErrResp(apiError(kerr.NotController, "the metadata node is not running"))
	}
	out, err := dispatchRPC(ctx, n, from, api, body)
	if err != nil {
		return encodeErrResp(err)
	}
	return append(encodeErrResp(nil), out...)
}

// dispatchRPC decodes a request, runs it on the node's controller and
// encodes the answer. Its error is for the whole call.
func dispatchRPC(ctx context.Context, n *Node, from uint64, api byte, body []byte) ([]byte, error) {
	c := n.Controller()
	bad := func(err error) ([]byte, error) { return nil, apiError(kerr.InvalidRequest, "%v", err) }
	switch api {
	case rpcCreateTopics:
		topics, validateOnly, err := decodeCreateTopicsReq(body)
		if err != nil {
			return bad(err)
		}
		return encodeCreateTopicsResp(c.CreateTopics(ctx, topics, validateOnly)), nil
	case rpcDeleteTopics:
		names, ids, err := decodeDeleteTopicsReq(body)
		if err != nil {
			return bad(err)
		}
		return encodeDeleteTopicsResp(c.DeleteTopics(ctx, names, ids)), nil
	case rpcCreatePartitions:
		reqs, validateOnly, err := decodeCreatePartitionsReq(body)
		if err != nil {
			return bad(err)
		}
		return encodeCreatePartitionsResp(c.CreatePartitions(ctx, reqs, validateOnly)), nil
	case rpcAlterConfigs:
		r, err := decodeAlterConfigsReq(body)
		if err != nil {
			return bad(err)
		}
		return encodeErrResp(c.AlterConfigs(ctx, r.resourceType, r.name, r.set, r.validateOnly)), nil
	case rpcRegisterBroker:
		r, err := decodeRegisterBrokerReq(body)
		if err != nil {
			return bad(err)
		}
		epoch, err := c.RegisterBroker(ctx, r)
		return encodeInt64sResp(err, epoch), nil
	case rpcAllocateProducerIDs:
		d := decoder{buf: body}
		broker := d.int32()
		if err := d.finish("AllocateProducerIDs request"); err != nil {
			return bad(err)
		}
		first, count, err := c.AllocateProducerIDs(ctx, broker)
		return encodeInt64sResp(err, first, count), nil
	case rpcAlterPartition:
		r, err := decodeAlterPartitionReq(body)
		if err != nil {
			return bad(err)
		}
		p, err := c.AlterPartition(ctx, r.topicID, r.partition, r.leaderEpoch, r.partitionEpoch, r.newISR)
		return encodeAlterPartitionResp(p, err), nil
	case rpcElectLeaders:
		typ, topics, err := decodeElectLeadersReq(body)
		if err != nil {
			return bad(err)
		}
		res, err := c.ElectLeaders(ctx, typ, topics)
		return encodeElectLeadersResp(res, err), nil
	case rpcAlterReassignments:
		topics, allow, err := decodeAlterReassignmentsReq(body)
		if err != nil {
			return bad(err)
		}
		res, err := c.AlterPartitionReassignments(ctx, topics, allow)
		return encodeAlterReassignmentsResp(res, err), nil
	case rpcListReassignments:
		topics, err := decodeListReassignmentsReq(body)
		if err != nil {
			return bad(err)
		}
		res, err := c.ListPartitionReassignments(ctx, topics)
		return encodeListReassignmentsResp(res, err), nil
	case rpcBrokerHeartbeat:
		hb, err := decodeHeartbeatReq(body)
		if err != nil {
			return bad(err)
		}
		res, err := c.BrokerHeartbeat(ctx, hb)
		return encodeHeartbeatResp(res, err), nil
	case rpcDescribeQuorum:
		if len(body) != 0 {
			return bad(errors.New("DescribeQuorum takes no body"))
		}
		q, err := c.DescribeQuorum(ctx)
		return encodeQuorumResp(q, err), nil
	case rpcAddLearner:
		if len(body) != 0 {
			return bad(errors.New("AddLearner takes no body"))
		}
		err := n.AddLearner(ctx, from)
		if errors.Is(err, ErrNotController) {
			err = notController()
		} else if err != nil && ctx.Err() != nil {
			err = timeoutError(ctx)
		}
		return encodeErrResp(err), nil
	default:
		return nil, apiError(kerr.InvalidRequest, "unknown controller rpc %d", api)
	}
}
