//go:build race

package protocol

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so allocation counts say nothing about memory use.
const raceEnabled = true

// bombSize is the zeros a decompression bomb test expands to; smaller
// under the race detector, which makes every byte decoded slow.
const bombSize = 20 << 20
