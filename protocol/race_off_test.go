//go:build !race

package protocol

const raceEnabled = false

// bombSize is the zeros a decompression bomb test expands to: the 90 MiB
// record of the attack.
const bombSize = 90 << 20
