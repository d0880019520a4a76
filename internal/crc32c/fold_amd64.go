//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

// haveFold: fold needs PCLMULQDQ (and SSE2, which every amd64 CPU has).
var haveFold = cpu.X86.HasPCLMULQDQ

// fold reduces p (its length a multiple of 16, at least 64) to the block
// x congruent to it modulo the CRC-32C polynomial, after adding crc to
// its first four bytes (see updateFolded).
//
//go:noescape
func fold(crc uint32, p []byte, x *[16]byte)
