package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// What Kafka's KafkaApis checks of the transaction APIs: WRITE on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
// group whose offsets join the transaction (GROUP_AUTHORIZATION_FAILED),
// WRITE on each topic added (TOPIC_AUTHORIZATION_FAILED), and
// CLUSTER_ACTION for the brokers' batched AddPartitionsToTxn (v4+). Each
// function returns nil when the request goes on to the coordinator.

// addPartitionsToTxnDenied answers an AddPartitionsToTxn the principal
// may not make: v4+ (from brokers) needs CLUSTER_ACTION; before, WRITE on
// the transactional id and on every topic, else the unauthorized
// partitions answer TOPIC_AUTHORIZATION_FAILED, unknown ones
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
func (s *Server) addPartitionsToTxnDenied(r *request, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	ac := s.auth(r)
	if !ac.enabled() {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if ac.cluster(authz.OpClusterAction) {
			return nil
		}
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	answer := func(code func(topic string, p int32) int16) kmsg.Response {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if !ac.txnID(authz.OpWrite, req.TransactionalID) {
		return answer(func(string, int32) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
	}
	img := s.meta.Image()
	denied := false
	for _, t := range req.Topics {
		// Kafka never authorizes an internal topic here.
		if isInternalTopic(t.Topic) || !ac.topic(authz.OpWrite, t.Topic) {
			denied = true
		}
	}
	if !denied {
		return nil
	}
	return answer(func(topic string, p int32) int16 {
		switch {
		case isInternalTopic(topic) || !ac.topic(authz.OpWrite, topic):
			return kerr.TopicAuthorizationFailed.Code
		case !partitionExists(img, topic, p):
			return kerr.UnknownTopicOrPartition.Code
		default:
			return kerr.OperationNotAttempted.Code
		}
	})
}

// txnDenied answers AddOffsetsToTxn and EndTxn when the principal may not
// WRITE the transactional id (or, for AddOffsetsToTxn, READ the group).
func (s *Server) txnDenied(r *request) kmsg.Response {
	ac := s.auth(r)
	switch req := r.req.(type) {
	case *kmsg.AddOffsetsToTxnRequest:
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		switch {
		case !ac.txnID(authz.OpWrite, req.TransactionalID):
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case !ac.group(authz.OpRead, req.Group):
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		default:
			return nil
		}
		return resp
	case *kmsg.EndTxnRequest:
		if ac.txnID(authz.OpWrite, req.TransactionalID) {
			return nil
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		var code int16
		switch {
		case !ac.txnID(authz.OpWrite, req.TransactionalID):
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case !ac.group(authz.OpRead, req.Group):
			code = kerr.GroupAuthorizationFailed.Code
		default:
			return nil
		}
		// TxnOffsetCommitRequest.getErrorResponse: every partition.
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	panic("txnDenied: no answer for " + kmsg.NameForKey(r.req.Key()))
}

// filterDescribedTransactions applies KafkaApis' DescribeTransactions
// checks to the coordinator's answer: a transactional id the principal
// may not DESCRIBE answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
// nothing else; of the others, only the topics it may DESCRIBE are shown.
func (s *Server) filterDescribedTransactions(r *request, resp *kmsg.DescribeTransactionsResponse) {
	ac := s.auth(r)
	if !ac.enabled() {
		return
	}
	for i := range resp.TransactionStates {
		ts := &resp.TransactionStates[i]
		if !ac.txnID(authz.OpDescribe, ts.TransactionalID) {
			denied := kmsg.NewDescribeTransactionsResponseTransactionState()
			denied.TransactionalID, denied.ErrorCode = ts.TransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
			*ts = denied
			continue
		}
		kept := ts.Topics[:0]
		for _, t := range ts.Topics {
			if ac.topic(authz.OpDescribe, t.Topic) {
				kept = append(kept, t)
			}
		}
		ts.Topics = kept
	}
}

// filterListedTransactions keeps the transactions whose ids the principal
// may DESCRIBE, as KafkaApis' ListTransactions.
func (s *Server) filterListedTransactions(r *request, resp *kmsg.ListTransactionsResponse) {
	ac := s.auth(r)
	if !ac.enabled() {
		return
	}
	kept := resp.TransactionStates[:0]
	for _, ts := range resp.TransactionStates {
		if ac.txnID(authz.OpDescribe, ts.TransactionalID) {
			kept = append(kept, ts)
		}
	}
	resp.TransactionStates = kept
}
