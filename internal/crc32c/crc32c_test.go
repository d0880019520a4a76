package crc32c

import (
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Every length from 0 to 1,100 bytes, at every alignment within 16
// bytes, from random and from zero starting CRCs, agrees with hash/crc32,
// folded or not; and a long input given in random pieces checksums as
// when given whole.
func TestMatchesHashCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1100+16)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, crc := range []uint32{0, 0xffffffff, rng.Uint32()} {
		for off := range 16 {
			for n := 0; off+n <= len(buf)-16; n++ {
				p := buf[off : off+n]
				want := crc32.Update(crc, table, p)
				if got := Update(crc, p); got != want {
					t.Fatalf("Update(%#x, %d bytes at %d) = %#x, want %#x", crc, n, off, got, want)
				}
				if haveFold && n >= 64 {
					if got := updateFolded(crc, p); got != want {
						t.Fatalf("updateFolded(%#x, %d bytes at %d) = %#x, want %#x", crc, n, off, got, want)
					}
				}
			}
		}
	}
	long := make([]byte, 1<<20+13)
	for i := range long {
		long[i] = byte(rng.Uint32())
	}
	want := crc32.Checksum(long, table)
	var got uint32
	for p := long; len(p) > 0; {
		n := min(len(p), 1+rng.IntN(70000))
		got = Update(got, p[:n])
		p = p[n:]
	}
	if got != want || Checksum(long) != want {
		t.Fatalf("1 MiB in pieces: %#x (whole %#x), want %#x", got, Checksum(long), want)
	}
}

// The constants in fold_amd64.s are bitrev32(x^e mod P) << 1.
func TestFoldConstants(t *testing.T) {
	k := func(e int) uint64 {
		r := uint64(1)
		for range e {
			r <<= 1
			if r&(1<<32) != 0 {
				r ^= 0x11EDC6F41
			}
		}
		return uint64(bits.Reverse32(uint32(r))) << 1
	}
	got := fmt.Sprintf("%#x %#x %#x %#x", k(4*128+32), k(4*128-32), k(128+32), k(128-32))
	if want := "0x740eef02 0x9e4addf8 0xf20c0dfe 0x14cd00bd6"; got != want {
		t.Fatalf("constants %s, fold_amd64.s has %s", got, want)
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{512, 4 << 10, 128 << 10} {
		buf := make([]byte, n)
		b.Run(fmt.Sprintf("hash-crc32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Update(0, table, buf)
			}
		})
		if haveFold {
			b.Run(fmt.Sprintf("folded/%d", n), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					updateFolded(0, buf)
				}
			})
		}
	}
}
