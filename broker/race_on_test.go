//go:build race

package broker

// raceEnabled: the race detector's instrumentation changes what is
// allocated (and sync.Pools drop a share of what is put back on purpose),
// so allocation figures say nothing about memory use.
const raceEnabled = true
