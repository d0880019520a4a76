// Package crc32c computes CRC-32C (Castagnoli), the checksum of Kafka's
// record batches, as hash/crc32 with the Castagnoli table does, but
// faster on CPUs whose CRC32 instruction is slow.
//
// hash/crc32 computes CRC-32C with the SSE 4.2 CRC32 instruction, three
// streams at a time. On some CPUs, such as the AMD Zen 1 of the
// project's benchmark machine, that instruction issues only once every
// three cycles, and checking the produced batches took a fifth of the
// broker's CPU per GiB produced (docs/performance.md). There,
// folding the data with carry-less multiplication (PCLMULQDQ, as
// hash/crc32 already does for the IEEE polynomial) runs about 1.6 times
// as fast. On CPUs where the CRC32 instruction is as fast or faster, the
// standard library stays in use: the first long checksum times both ways
// once and keeps the faster.
package crc32c

import (
	"hash/crc32"
	"sync"
	"time"
)

var table = crc32.MakeTable(crc32.Castagnoli)

// foldMin is the shortest input worth folding: below it the fixed cost
// of the fold's set-up and final reduction outweighs its speed.
const foldMin = 1024

// Update returns the CRC-32C of the bytes whose CRC-32C is crc followed
// by p: crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), p).
func Update(crc uint32, p []byte) uint32 {
	if len(p) >= foldMin && foldFaster() {
		return updateFolded(crc, p)
	}
	return crc32.Update(crc, table, p)
}

// Checksum is the CRC-32C of p.
func Checksum(p []byte) uint32 { return Update(0, p) }

// updateFolded is Update by folding; len(p) >= 64.
//
// crc32.Update(crc, p) is the complement of the CRC register run over p
// from the state ^crc. That run equals one from state 0 over p with ^crc
// added to its first four bytes, which fold does, reducing the blocks of
// 16 bytes to one block X whose run from state 0 ends in the same
// register (X is congruent to them modulo the polynomial). So the
// checksum of p's blocks is crc32.Update(^0, X), and the bytes after the
// last whole block follow as usual.
func updateFolded(crc uint32, p []byte) uint32 {
	n := len(p) &^ 15
	var x [16]byte
	fold(^crc, p[:n], &x)
	// X's 16 bytes a byte at a time (crc32.Update would move x to the
	// heap): the state starts at 0, the complement of crc32.Update's ^0.
	var r uint32
	for _, b := range x {
		r = table[byte(r)^b] ^ r>>8
	}
	return crc32.Update(^r, table, p[n:])
}

var (
	pickOnce sync.Once
	useFold  bool
)

// foldFaster reports whether folding is available and, timed once on
// this CPU, faster than hash/crc32.
func foldFaster() bool {
	if !haveFold {
		return false
	}
	pickOnce.Do(func() {
		// Long enough that each run takes microseconds, short enough
		// to stay in the L1/L2 cache.
		buf := make([]byte, 32<<10)
		useFold = bestOf(func() { updateFolded(0, buf) }) < bestOf(func() { crc32.Update(0, table, buf) })
	})
	return useFold
}

// bestOf is the shortest of several runs of f, so that an interruption
// or a cold cache in one run does not decide.
func bestOf(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 8 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}
