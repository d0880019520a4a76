package group

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes the coordinator answers.
var (
	errCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	errCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator            = kerr.NotCoordinator.Code
	errIllegalGeneration         = kerr.IllegalGeneration.Code
	errInconsistentGroupProtocol = kerr.InconsistentGroupProtocol.Code
	errInvalidGroupID            = kerr.InvalidGroupID.Code
	errUnknownMemberID           = kerr.UnknownMemberID.Code
	errInvalidSessionTimeout     = kerr.InvalidSessionTimeout.Code
	errRebalanceInProgress       = kerr.RebalanceInProgress.Code
	errNonEmptyGroup             = kerr.NonEmptyGroup.Code
	errGroupIDNotFound           = kerr.GroupIDNotFound.Code
	errMemberIDRequired          = kerr.MemberIDRequired.Code
	errGroupMaxSizeReached       = kerr.GroupMaxSizeReached.Code
	errFencedInstanceID          = kerr.FencedInstanceID.Code
	errGroupSubscribedToTopic    = kerr.GroupSubscribedToTopic.Code
	errOffsetMetadataTooLarge    = kerr.OffsetMetadataTooLarge.Code
	errUnknownServerError        = kerr.UnknownServerError.Code
	errInvalidRequest            = kerr.InvalidRequest.Code
	errUnsupportedVersion        = kerr.UnsupportedVersion.Code
	errFencedMemberEpoch         = kerr.FencedMemberEpoch.Code
	errUnreleasedInstanceID      = kerr.UnreleasedInstanceID.Code
	errUnsupportedAssignor       = kerr.UnsupportedAssignor.Code
	errStaleMemberEpoch          = kerr.StaleMemberEpoch.Code
	errInvalidRegularExpression  = kerr.InvalidRegularExpression.Code
)

// appendErrorCode maps a failed Store.Append to the code the client gets, as
// Kafka's CoordinatorOperationExceptionHelper: replication trouble means the
// coordinator is unavailable, lost leadership means it moved, oversized
// writes are server errors. A stopping coordinator has moved as far as the
// client can tell; errors that carry no Kafka code are server errors.
func appendErrorCode(err error) int16 {
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
	switch ke.Code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code:
		return errCoordinatorNotAvailable
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return errNotCoordinator
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return errUnknownServerError
	case kerr.NetworkException.Code:
		return errCoordinatorLoadInProgress
	}
	return ke.Code
}
