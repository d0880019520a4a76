package txn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Kafka error codes the coordinator answers.
var (
	errCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	errCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator            = kerr.NotCoordinator.Code
	errInvalidRequest            = kerr.InvalidRequest.Code
	errInvalidTransactionTimeout = kerr.InvalidTransactionTimeout.Code
	errConcurrentTransactions    = kerr.ConcurrentTransactions.Code
	errProducerFenced            = kerr.ProducerFenced.Code
	errInvalidProducerEpoch      = kerr.InvalidProducerEpoch.Code
	errInvalidProducerIDMapping  = kerr.InvalidProducerIDMapping.Code
	errInvalidTxnState           = kerr.InvalidTxnState.Code
	errTransactionAbortable      = kerr.TransactionAbortable.Code
	errTransactionalIDNotFound   = kerr.TransactionalIDNotFound.Code
	errUnknownTopicOrPartition   = kerr.UnknownTopicOrPartition.Code
	errOperationNotAttempted     = kerr.OperationNotAttempted.Code
	errTopicAuthorizationFailed  = kerr.TopicAuthorizationFailed.Code
	errInvalidRegularExpression  = kerr.InvalidRegularExpression.Code
	errUnknownServerError        = kerr.UnknownServerError.Code
)

// ErrPartitionDeleted is what a MarkerWriter wraps for a partition that no
// longer exists in the cluster's metadata (its topic was deleted). The
// coordinator then stops sending that partition its marker, as Kafka skips
// partitions whose leader it cannot find. Every other failure is retried.
var ErrPartitionDeleted = errors.New("partition no longer exists")

// appendCodes are the append failures the transaction coordinator maps
// its own way, as Kafka's TransactionStateManager.appendTransactionToLog
// (see coord.AppendErrorCode for the rest).
var appendCodes = map[int16]int16{
	kerr.NotEnoughReplicasAfterAppend.Code: errCoordinatorNotAvailable,
}

// appendErrorCode maps a failed Store.Append to the code the client gets.
func appendErrorCode(err error) int16 { return coord.AppendErrorCode(err, appendCodes) }

// allocErrorCode maps a failed producer id allocation: Kafka answers the
// error's own code, and a block not yet available is
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
func allocErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, context.Canceled) {
		return errNotCoordinator
	}
	return errCoordinatorLoadInProgress
}

// fencedCode is the fencing error a request version understands: clients
// older than the PRODUCER_FENCED code get INVALID_PRODUCER_EPOCH, as
// Kafka's KafkaApis rewrites it.
func fencedCode(code int16, oldClient bool) int16 {
	if oldClient && code == errProducerFenced {
		return errInvalidProducerEpoch
	}
	return code
}
