package interbroker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregorbroker/gregor/broker/txn"
)

// The partition leader's side of KIP-890: it asks the transaction
// coordinator of a producer to verify that partitions are in the
// producer's open transaction, or (transaction version 2) to add them,
// with AddPartitionsToTxn v4+ in its broker form, as Kafka's
// AddPartitionsToTxnManager. Requests for one coordinator node are
// batched: one in flight per node, and what queues meanwhile goes in the
// next request, one transaction per transactional id. The coordinator
// may be this node, in which case the request goes to the same
// Coordinator.AddPartitionsToTxn the AddPartitionsToTxn handler serves;
// otherwise it crosses to the coordinator's inter-broker listener.

// Operation is what a leader asks of the coordinator, from the version
// of the request it serves (Kafka's TransactionSupportedOperation).
type Operation int8

const (
	// OpVerifyDefaultError verifies, for clients that know
	// INVALID_TXN_STATE only (Produce v0-v10, TxnOffsetCommit v0-v3).
	OpVerifyDefaultError Operation = iota
	// OpVerifyGenericError verifies, for clients that handle
	// TRANSACTION_ABORTABLE (Produce v11, TxnOffsetCommit v4).
	OpVerifyGenericError
	// OpAddPartition adds the partition: the producer runs transaction
	// version 2 and never sends AddPartitionsToTxn itself (Produce v12+,
	// TxnOffsetCommit v5+).
	OpAddPartition
)

// ProduceOperation is Kafka's produceRequestVersionToTransactionSupportedOperation.
func ProduceOperation(version int16) Operation {
	switch {
	case version > 11:
		return OpAddPartition
	case version > 10:
		return OpVerifyGenericError
	}
	return OpVerifyDefaultError
}

// TxnOffsetCommitOperation is Kafka's
// txnOffsetCommitRequestVersionToTransactionSupportedOperation.
func TxnOffsetCommitOperation(version int16) Operation {
	switch {
	case version > 4:
		return OpAddPartition
	case version > 3:
		return OpVerifyGenericError
	}
	return OpVerifyDefaultError
}

// RequestTimeout bounds one inter-broker request (an AddPartitionsToTxn
// to a coordinator, a WriteTxnMarkers to a leader), as Kafka's
// request.timeout.ms (30 s) bounds its inter-broker sends.
const RequestTimeout = 30 * time.Second

// AddSender sends the AddPartitionsToTxn requests of this node as a
// partition leader.
type AddSender struct {
	deps AddDeps
	// ViaNetwork sends to this node's coordinator over its inter-broker
	// listener too, as to any other node's; tests set it to exercise
	// the path between brokers on one node.
	ViaNetwork bool

	mu     sync.Mutex // a leaf: nothing else is taken while it is held
	closed bool
	queues map[int32]*addQueue // by coordinator node
	// clients are the connections to remote coordinator nodes.
	clients *Clients
}

// AddDeps are what an AddSender needs of the server.
type AddDeps struct {
	Self     int32               // this node's id
	Listener string              // inter.broker.listener.name
	Image    func() *image.Image // this node's metadata image
	// Ctx ends with the server, and the requests in flight with it.
	Ctx context.Context
	// Go starts a goroutine the server waits for when it closes.
	Go func(func())
	// CoordinatorNode is the live node coordinating a transactional id.
	CoordinatorNode func(transactionalID string) (int32, bool)
	// Local serves the request when the coordinator is this node: the
	// same entry point the AddPartitionsToTxn handler serves.
	Local func(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse
	// Secure are the client options of the inter-broker listener's
	// security protocol (TLS, SASL).
	Secure []kgo.Opt
}

// addQueue is one coordinator node's pending transactions.
type addQueue struct {
	inflight bool
	order    []string // transactional ids, first queued first
	pending  map[string]*pendingAdd
}

// pendingAdd is one transaction waiting for its answer.
type pendingAdd struct {
	txn   kmsg.AddPartitionsToTxnRequestTransaction
	op    Operation
	parts []txn.TopicPartition
	done  chan map[txn.TopicPartition]int16 // buffered: answered once
}

// NewAddSender is an AddSender for the server d describes.
func NewAddSender(d AddDeps) *AddSender {
	// The broker form exists from v4 on; an older coordinator must fail
	// the request rather than receive a client's form.
	var minVersions kversion.Versions
	minVersions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 4)
	return &AddSender{deps: d, queues: make(map[int32]*addQueue),
		clients: NewClients(d.Image, d.Listener, append(slices.Clone(d.Secure), kgo.MinVersions(&minVersions),
			kgo.ClientID(fmt.Sprintf("gregor-txn-verify-%d", d.Self)))...)}
}

// Clients are the sender's connections to remote coordinators.
func (a *AddSender) Clients() *Clients { return a.clients }

// Close stops sending and closes the connections to remote coordinators.
// Requests in flight end with the server's context.
func (a *AddSender) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.clients.Close()
}

// allCodes answers every partition with one code.
func allCodes(parts []txn.TopicPartition, code int16) map[txn.TopicPartition]int16 {
	out := make(map[txn.TopicPartition]int16, len(parts))
	for _, tp := range parts {
		out[tp] = code
	}
	return out
}

// AddOrVerify asks the producer's transaction coordinator to verify the
// partitions (or add them, for OpAddPartition) and returns the error of
// each partition that failed, mapped as Kafka's AddPartitionsToTxnManager
// maps them for the append path: PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE
// for clients that predate it, a transport failure NETWORK_EXCEPTION, and
// an unknown coordinator COORDINATOR_NOT_AVAILABLE. A partition absent
// from the result passed.
func (a *AddSender) AddOrVerify(ctx context.Context, id string, pid int64, epoch int16, parts []txn.TopicPartition, op Operation) map[txn.TopicPartition]int16 {
	node, ok := a.deps.CoordinatorNode(id)
	if !ok {
		return allCodes(parts, kerr.CoordinatorNotAvailable.Code)
	}
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch = id, pid, epoch
	t.VerifyOnly = op != OpAddPartition
	byTopic := make(map[string]int)
	for _, tp := range parts {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(t.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic = tp.Topic
			t.Topics = append(t.Topics, rt)
		}
		t.Topics[i].Partitions = append(t.Topics[i].Partitions, tp.Partition)
	}
	p := &pendingAdd{txn: t, op: op, parts: parts, done: make(chan map[txn.TopicPartition]int16, 1)}

	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return allCodes(parts, kerr.CoordinatorNotAvailable.Code)
	}
	q := a.queues[node]
	if q == nil {
		q = &addQueue{pending: make(map[string]*pendingAdd)}
		a.queues[node] = q
	}
	if old := q.pending[id]; old != nil {
		// One entry per transactional id, as Kafka: a newer epoch fences
		// the queued one, the same epoch is likely a client retry (the
		// queued one answers a retriable error), an older epoch is fenced
		// at once.
		if old.txn.ProducerEpoch > epoch {
			a.mu.Unlock()
			return allCodes(parts, kerr.InvalidProducerEpoch.Code)
		}
		code := kerr.NetworkException.Code
		if old.txn.ProducerEpoch < epoch {
			code = kerr.InvalidProducerEpoch.Code
		}
		old.done <- allCodes(old.parts, code)
	} else {
		q.order = append(q.order, id)
	}
	q.pending[id] = p
	if !q.inflight {
		q.inflight = true
		a.deps.Go(func() { a.run(node, q) })
	}
	a.mu.Unlock()

	select {
	case res := <-p.done:
		return res
	case <-ctx.Done():
		return allCodes(parts, kerr.NetworkException.Code)
	}
}

// run sends a node's queued transactions, one request at a time, until
// none are left.
func (a *AddSender) run(node int32, q *addQueue) {
	for {
		a.mu.Lock()
		if len(q.order) == 0 {
			q.inflight = false
			if a.queues[node] == q {
				delete(a.queues, node)
			}
			a.mu.Unlock()
			return
		}
		batch := make([]*pendingAdd, 0, len(q.order))
		for _, id := range q.order {
			batch = append(batch, q.pending[id])
		}
		q.order = q.order[:0]
		clear(q.pending)
		a.mu.Unlock()

		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 5
		for _, p := range batch {
			req.Transactions = append(req.Transactions, p.txn)
		}
		resp, err := a.send(node, req)
		for _, p := range batch {
			p.done <- answerFor(p, resp, err)
		}
	}
}

// send issues one AddPartitionsToTxn to a coordinator node.
func (a *AddSender) send(node int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	ctx, cancel := context.WithTimeout(a.deps.Ctx, RequestTimeout)
	defer cancel()
	if node == a.deps.Self && !a.ViaNetwork {
		// The coordinator is here: the same entry point the
		// AddPartitionsToTxn handler serves, with the same request.
		return a.deps.Local(ctx, req), nil
	}
	b, err := a.clients.Broker(node)
	if err != nil {
		return nil, fmt.Errorf("AddPartitionsToTxn to coordinator %d: %w", node, err)
	}
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("AddPartitionsToTxn to coordinator %d: %w", node, err)
	}
	return resp, nil
}

// answerFor maps a coordinator's answer for one transaction to the error
// of each failed partition, as AddPartitionsToTxnManager's response
// handler.
func answerFor(p *pendingAdd, resp *kmsg.AddPartitionsToTxnResponse, err error) map[txn.TopicPartition]int16 {
	if err != nil {
		return allCodes(p.parts, kerr.NetworkException.Code)
	}
	if resp.ErrorCode != 0 {
		// A broker not allowed to ask must not expose the authorization
		// error to the producer: the partition is simply not verified.
		code := resp.ErrorCode
		if code == kerr.ClusterAuthorizationFailed.Code {
			code = kerr.InvalidTxnState.Code
		}
		return allCodes(p.parts, code)
	}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != p.txn.TransactionalID {
			continue
		}
		seen := make(map[txn.TopicPartition]bool, len(p.parts))
		out := make(map[txn.TopicPartition]int16)
		for _, t := range rt.Topics {
			for _, rp := range t.Partitions {
				tp := txn.TopicPartition{Topic: t.Topic, Partition: rp.Partition}
				seen[tp] = true
				switch code := rp.ErrorCode; {
				case code == 0:
				case code == kerr.ProducerFenced.Code:
					// Producers expect INVALID_PRODUCER_EPOCH on this path.
					out[tp] = kerr.InvalidProducerEpoch.Code
				case code == kerr.TransactionAbortable.Code && p.op == OpVerifyDefaultError:
					out[tp] = kerr.InvalidTxnState.Code
				default:
					out[tp] = code
				}
			}
		}
		for _, tp := range p.parts {
			if !seen[tp] {
				out[tp] = kerr.NetworkException.Code // an answer we cannot trust
			}
		}
		return out
	}
	return allCodes(p.parts, kerr.NetworkException.Code)
}
