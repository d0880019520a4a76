package group

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord"
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
	errStreamsInvalidTopology    = kerr.StreamsInvalidTopology.Code
)

// appendCodes are the append failures the group coordinator maps its own
// way, as Kafka's CoordinatorOperationExceptionHelper (see
// coord.AppendErrorCode for the rest).
var appendCodes = map[int16]int16{
	kerr.InvalidFetchSize.Code: errUnknownServerError,
	kerr.NetworkException.Code: errCoordinatorLoadInProgress,
}

// appendErrorCode maps a failed Store.Append to the code the client gets.
func appendErrorCode(err error) int16 { return coord.AppendErrorCode(err, appendCodes) }
