package txn

import "github.com/gregorbroker/gregor/broker/group"

// Clock is the coordinator's source of time, shared with the group
// coordinator so the broker injects one clock into both. Tests inject one
// they advance by hand; production uses group.SystemClock.
type Clock = group.Clock

// Timer is a pending Clock.AfterFunc call.
type Timer = group.Timer
