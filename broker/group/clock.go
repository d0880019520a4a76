package group

import "github.com/gregorbroker/gregor/broker/coord"

// Clock is the coordinator's source of time, the coordinator runtime's, so
// the broker injects one clock into every coordinator. Tests inject one
// they advance by hand; production uses SystemClock.
type Clock = coord.Clock

// Timer is a pending Clock.AfterFunc call.
type Timer = coord.Timer

// SystemClock is the wall clock, backed by package time.
type SystemClock = coord.SystemClock
