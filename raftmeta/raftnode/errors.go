package raftnode

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNotController is returned by mutating calls on a node that is not the
// active controller (the raft leader, caught up with its own term).
var ErrNotController = kerr.NotController

// ErrClosed is returned by calls on a closed node or transport.
var ErrClosed = errors.New("raftmeta: closed")

// ErrProposalDropped is returned when raft dropped a proposal before it was
// committed, for example because leadership changed while it was in flight.
var ErrProposalDropped = errors.New("raftmeta: proposal dropped")
