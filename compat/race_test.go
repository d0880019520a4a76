//go:build race

package compat

// raceEnabled builds gregor with the race detector when the suite itself
// runs under it, so a race in the broker under a real client is caught.
const raceEnabled = true
