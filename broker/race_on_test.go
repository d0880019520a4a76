//go:build race

package broker

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so allocation figures say nothing about memory use.
const raceEnabled = true
