//go:build race

package storage

// raceEnabled: the race detector's instrumentation allocates, so
// allocation budgets are checked only without it.
const raceEnabled = true
