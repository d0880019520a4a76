package txn

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// InitProducerID handles InitProducerId v0-v5. With a transactional id it
// creates the id's state or bumps its epoch, fencing the previous producer
// and aborting its open transaction first (the answer is then
// CONCURRENT_TRANSACTIONS and the client retries). Without one it hands out
// a fresh producer id at epoch 0, as Kafka's coordinator does for
// idempotent producers. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4.
func (c *Coordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) Pending[*kmsg.InitProducerIDResponse] {
	return coord.Then(c.initProducerID(ctx, req), func(res initResult) *kmsg.InitProducerIDResponse {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = res.producerID, res.epoch
		resp.ErrorCode = fencedCode(res.code, req.Version < 4)
		return resp
	})
}

func (c *Coordinator) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) Pending[initResult] {
	var expected *producerIDEpoch
	switch {
	case req.ProducerID == noProducerID && req.ProducerEpoch == noProducerEpoch:
	case req.ProducerID == noProducerID || req.ProducerEpoch == noProducerEpoch:
		return coord.Ready(initError(errInvalidRequest))
	default:
		expected = &producerIDEpoch{req.ProducerID, req.ProducerEpoch}
	}
	if req.TransactionalID == nil {
		// A fresh id touches no transactional state: nothing to order.
		return func() initResult {
			pid, err := c.deps.AllocateProducerID(ctx)
			if err != nil {
				c.log.Warn("allocate producer id", "err", err)
				return initError(allocErrorCode(err))
			}
			return initResult{producerID: pid, epoch: 0}
		}
	}
	id, timeout := *req.TransactionalID, req.TransactionTimeoutMillis
	switch {
	case id == "":
		return coord.Ready(initError(errInvalidRequest))
	case timeout <= 0 || timeout > c.cfg.TransactionMaxTimeoutMs:
		return coord.Ready(initError(errInvalidTransactionTimeout))
	}
	return coord.Submit(c.rt, ctx, c.rt.ShardFor(id), func(m *machine, reply func(initResult)) {
		m.initProducerID(id, timeout, expected, noProducerID, reply)
	}, initError)
}

// internalTopics are the topics a client may not add to a transaction
// itself (Kafka's Topic.isInternal): AddPartitionsToTxn before v4 answers
// TOPIC_AUTHORIZATION_FAILED for them, as they never pass authorization.
var internalTopics = map[string]bool{
	ConsumerOffsetsTopic:  true,
	TransactionStateTopic: true,
	"__share_group_state": true,
}

// addRequest is one transaction of an AddPartitionsToTxn request.
type addRequest struct {
	id         string
	pid        int64
	epoch      int16
	verifyOnly bool
	parts      []TopicPartition // request order, without duplicates
}

// addResult is the answer for one transaction: a code per partition.
type addResult struct {
	parts []TopicPartition
	codes []int16
}

func uniqueParts(topics []string, partitions [][]int32) []TopicPartition {
	seen := make(map[TopicPartition]bool)
	var out []TopicPartition
	for i, topic := range topics {
		for _, p := range partitions[i] {
			tp := TopicPartition{topic, p}
			if !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	return out
}

// AddPartitionsToTxn handles AddPartitionsToTxn v0-v5. Versions 0-3 come
// from clients and add partitions to one transaction. Versions 4 and 5 come
// from partition leaders and batch transactions: with VerifyOnly each
// partition answers whether it is in the open transaction (KIP-890's
// verification); without it the partitions are added, as transaction
// version 2 producers no longer add them themselves (a leader adds only
// for such producers, so v4+ marks the client as transaction version 2,
// as Kafka's transactionVersionForAddPartitionsToTxn). Authorization is
// the broker's; a partition that
// does not exist fails the transaction with UNKNOWN_TOPIC_OR_PARTITION and
// OPERATION_NOT_ATTEMPTED for the others. PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v2.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) Pending[*kmsg.AddPartitionsToTxnResponse] {
	if req.Version < 4 {
		topics := make([]string, len(req.Topics))
		parts := make([][]int32, len(req.Topics))
		for i, t := range req.Topics {
			topics[i], parts[i] = t.Topic, t.Partitions
		}
		a := addRequest{id: req.TransactionalID, pid: req.ProducerID, epoch: req.ProducerEpoch, parts: uniqueParts(topics, parts)}
		return coord.Then(c.addOne(ctx, req.Version, a), func(res addResult) *kmsg.AddPartitionsToTxnResponse {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for _, g := range groupResults(res) {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = g.topic
				for i, p := range g.partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, g.codes[i]
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		})
	}
	waits := make([]Pending[addResult], len(req.Transactions))
	for i, tx := range req.Transactions {
		topics := make([]string, len(tx.Topics))
		parts := make([][]int32, len(tx.Topics))
		for j, t := range tx.Topics {
			topics[j], parts[j] = t.Topic, t.Partitions
		}
		a := addRequest{id: tx.TransactionalID, pid: tx.ProducerID, epoch: tx.ProducerEpoch, verifyOnly: tx.VerifyOnly, parts: uniqueParts(topics, parts)}
		waits[i] = c.addOne(ctx, req.Version, a)
	}
	return func() *kmsg.AddPartitionsToTxnResponse {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for i, tx := range req.Transactions {
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tx.TransactionalID
			for _, g := range groupResults(waits[i]()) {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = g.topic
				for j, p := range g.partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, g.codes[j]
					rt.Partitions = append(rt.Partitions, rp)
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
		return resp
	}
}

// addOne queues one transaction of AddPartitionsToTxn.
func (c *Coordinator) addOne(ctx context.Context, version int16, a addRequest) Pending[addResult] {
	res := addResult{parts: a.parts, codes: make([]int16, len(a.parts))}
	all := func(code int16) addResult {
		for i := range res.codes {
			res.codes[i] = code
		}
		return res
	}
	// Partitions failing the metadata checks fail the whole transaction.
	failed := false
	for i, tp := range a.parts {
		switch {
		case version < 4 && internalTopics[tp.Topic]:
			res.codes[i] = errTopicAuthorizationFailed
			failed = true
		case c.deps.PartitionExists != nil && !c.deps.PartitionExists(tp.Topic, tp.Partition):
			res.codes[i] = errUnknownTopicOrPartition
			failed = true
		}
	}
	if failed {
		for i := range res.codes {
			if res.codes[i] == 0 {
				res.codes[i] = errOperationNotAttempted
			}
		}
		return coord.Ready(res)
	}
	if a.verifyOnly {
		type verified struct {
			code  int16
			codes []int16
		}
		p := coord.Submit(c.rt, ctx, c.rt.ShardFor(a.id), func(m *machine, reply func(verified)) {
			code, codes := m.verifyPartitions(a.id, a.pid, a.epoch, a.parts)
			reply(verified{code, codes})
		}, func(code int16) verified { return verified{code: code} })
		return coord.Then(p, func(v verified) addResult {
			if v.code != 0 {
				return all(v.code)
			}
			copy(res.codes, v.codes)
			return res
		})
	}
	tv := TV0
	if version >= 4 {
		tv = TV2
	}
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(a.id), func(m *machine, reply func(int16)) {
		m.addPartitions(a.id, a.pid, a.epoch, a.parts, tv, reply)
	}, func(code int16) int16 { return code })
	return coord.Then(p, func(code int16) addResult { return all(fencedCode(code, version < 2)) })
}

type topicResult struct {
	topic      string
	partitions []int32
	codes      []int16
}

// groupResults groups a transaction's partition codes by topic, in the
// order topics first appear.
func groupResults(r addResult) []topicResult {
	var out []topicResult
	index := make(map[string]int)
	for i, tp := range r.parts {
		j, ok := index[tp.Topic]
		if !ok {
			j = len(out)
			index[tp.Topic] = j
			out = append(out, topicResult{topic: tp.Topic})
		}
		out[j].partitions = append(out[j].partitions, tp.Partition)
		out[j].codes = append(out[j].codes, r.codes[i])
	}
	return out
}

// AddOffsetsToTxn handles AddOffsetsToTxn v0-v4: it adds the group's
// __consumer_offsets partition to the transaction, so the offsets a
// TxnOffsetCommit then writes are committed or aborted with it.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) Pending[*kmsg.AddOffsetsToTxnResponse] {
	parts := []TopicPartition{{ConsumerOffsetsTopic, c.deps.PartitionForGroup(req.Group)}}
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.TransactionalID), func(m *machine, reply func(int16)) {
		m.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, TV0, reply)
	}, func(code int16) int16 { return code })
	return coord.Then(p, func(code int16) *kmsg.AddOffsetsToTxnResponse {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = fencedCode(code, req.Version < 2)
		return resp
	})
}

// EndTxn handles EndTxn v0-v5: PrepareCommit or PrepareAbort is written,
// the answer sent, and the markers written afterwards, then CompleteCommit
// or CompleteAbort. v5 clients use transaction version 2: the epoch is
// bumped and the answer carries the producer id and epoch to continue with.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) Pending[*kmsg.EndTxnResponse] {
	tv := TV0
	if req.Version >= 5 {
		tv = TV2
	}
	type ended struct {
		code  int16
		pid   int64
		epoch int16
	}
	p := coord.Submit(c.rt, ctx, c.rt.ShardFor(req.TransactionalID), func(m *machine, reply func(ended)) {
		m.endTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, true, tv, noProducerID,
			func(code int16, pid int64, epoch int16) { reply(ended{code, pid, epoch}) })
	}, func(code int16) ended { return ended{code, noProducerID, noProducerEpoch} })
	return coord.Then(p, func(r ended) *kmsg.EndTxnResponse {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = fencedCode(r.code, req.Version < 2)
		resp.ProducerID, resp.ProducerEpoch = r.pid, r.epoch
		return resp
	})
}

// DescribeTransactions handles DescribeTransactions v0, answering in
// request order. Partitions are sorted.
func (c *Coordinator) DescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	byShard := make(map[*shard][]int)
	for i, id := range req.TransactionalIDs {
		s := c.rt.ShardFor(id)
		byShard[s] = append(byShard[s], i)
	}
	type described = []kmsg.DescribeTransactionsResponseTransactionState
	var wg sync.WaitGroup
	for s, idx := range byShard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, len(idx))
			for i, j := range idx {
				ids[i] = req.TransactionalIDs[j]
			}
			out := coord.Call(c.rt, ctx, s, func(m *machine, reply func(described)) {
				out := make(described, len(ids))
				for i, id := range ids {
					out[i] = m.describe(id)
				}
				reply(out)
			}, func(code int16) described {
				code = adminFailCode(code)
				out := make(described, len(ids))
				for i, id := range ids {
					out[i] = kmsg.NewDescribeTransactionsResponseTransactionState()
					out[i].TransactionalID = id
					out[i].ErrorCode = code
				}
				return out
			})
			for i, j := range idx {
				resp.TransactionStates[j] = out[i]
			}
		}()
	}
	wg.Wait()
	return resp
}

// adminFailCode is what DescribeTransactions and ListTransactions answer
// when the coordinator could not be asked: Kafka answers
// COORDINATOR_NOT_AVAILABLE while its coordinator is not active.
func adminFailCode(code int16) int16 {
	if code == errNotCoordinator {
		return errCoordinatorNotAvailable
	}
	return code
}

// ListTransactions handles ListTransactions v0-v2: filters on states
// (unknown names come back in UnknownStateFilters), producer ids, the time
// a transaction has been open (v1+: longer than DurationFilterMillis) and a
// transactional id regular expression (v2+, matching the whole id; RE2
// syntax, which covers the Java patterns admin tools use). Results come
// sorted by transactional id.
func (c *Coordinator) ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := &listFilter{producerIDs: make(map[int64]bool), states: make(map[txnState]bool), stateNames: len(req.StateFilters), durationMs: -1}
	for _, pid := range req.ProducerIDFilters {
		f.producerIDs[pid] = true
	}
	for _, name := range req.StateFilters {
		if s, ok := stateByName(name); ok {
			f.states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if req.Version >= 1 {
		f.durationMs = req.DurationFilterMillis
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = errInvalidRegularExpression
			return resp
		}
		f.pattern = re
	}
	type listed struct {
		states  []kmsg.ListTransactionsResponseTransactionState
		loading bool
		code    int16
	}
	results := make([]listed, len(c.rt.Shards()))
	var wg sync.WaitGroup
	for i, s := range c.rt.Shards() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = coord.Call(c.rt, ctx, s, func(m *machine, reply func(listed)) {
				states, loading := m.list(f)
				reply(listed{states: states, loading: loading})
			}, func(code int16) listed { return listed{code: adminFailCode(code)} })
		}()
	}
	wg.Wait()
	for _, r := range results {
		switch {
		case r.code != 0:
			resp.ErrorCode = r.code
		case r.loading:
			resp.ErrorCode = errCoordinatorLoadInProgress
		}
		if resp.ErrorCode != 0 {
			resp.TransactionStates = nil
			return resp
		}
		resp.TransactionStates = append(resp.TransactionStates, r.states...)
	}
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp
}
