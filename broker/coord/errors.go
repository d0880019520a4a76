package coord

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The codes the runtime itself answers.
var (
	errCoordinatorNotAvailable = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator          = kerr.NotCoordinator.Code
	errUnknownServerError      = kerr.UnknownServerError.Code
)

// AppendErrorCode maps a failed append to the code the client gets, as
// Kafka's coordinators do (CoordinatorOperationExceptionHelper for groups,
// TransactionStateManager.appendTransactionToLog for transactions):
// replication trouble means the coordinator is unavailable, lost leadership
// means it moved, oversized writes are server errors. A stopping
// coordinator has moved as far as the client can tell; errors that carry no
// Kafka code are server errors. extra maps the codes a coordinator treats
// its own way; it is consulted before the common mapping.
func AppendErrorCode(err error, extra map[int16]int16) int16 {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errNotCoordinator
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return errUnknownServerError
	}
	if code, ok := extra[ke.Code]; ok {
		return code
	}
	switch ke.Code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code:
		return errCoordinatorNotAvailable
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return errNotCoordinator
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return errUnknownServerError
	}
	return ke.Code
}
