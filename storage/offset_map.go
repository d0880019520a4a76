package storage

import (
	"hash/maphash"
)

// offsetMap maps a key's hash to the offset of the key's latest record,
// in a fixed memory budget, as Kafka's SkimpyOffsetMap: keys are never
// stored, only a 128-bit hash (two independent 64-bit hashes, where Kafka
// keeps an MD5), so that a collision, which would make the cleaner drop a
// record it should keep, is as unlikely as Kafka's.
//
// It is an open-addressing table with double hashing over a prime number
// of slots, so that every probe sequence visits every slot.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []offsetSlot
	entries      int
	latest       int64 // Kafka's latestOffset: the last offset put or declared
}

// offsetSlot is one entry; off is the offset plus one, so that a zero slot
// is empty.
type offsetSlot struct {
	h1, h2 uint64
	off    int64
}

// offsetSlotSize is what one slot costs; Kafka's costs 24 bytes too (a
// 16-byte hash and an 8-byte offset).
const offsetSlotSize = 24

func newOffsetMap() *offsetMap {
	return &offsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), latest: -1}
}

// reset empties the map and sizes it for want slots within a memory
// budget: a prime number of slots, at most budget/24. A table from an
// earlier cleaning is reused when it is large enough and within budget,
// so memory stays at the largest table a cleaning needed, bounded by the
// budget (Kafka allocates the whole budget up front).
func (m *offsetMap) reset(want int64, budget int64) {
	most := max(budget/offsetSlotSize, 3)
	n := min(max(want, 3), most)
	if int64(len(m.slots)) >= n && int64(len(m.slots)) <= most {
		if m.entries > 0 {
			clear(m.slots)
		}
	} else if p := nextPrime(n); p <= most {
		m.slots = make([]offsetSlot, p)
	} else {
		m.slots = make([]offsetSlot, prevPrime(most))
	}
	m.entries = 0
	m.latest = -1
}

// prevPrime returns the largest prime <= n (n >= 2).
func prevPrime(n int64) int64 {
	for ; n > 2; n-- {
		if isPrime(n) {
			return n
		}
	}
	return 2
}

// nextPrime returns the smallest prime >= n.
func nextPrime(n int64) int64 {
	for !isPrime(n) {
		n++
	}
	return n
}

func isPrime(n int64) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := int64(3); d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	h1 := maphash.Bytes(m.seed1, key)
	h2 := maphash.Bytes(m.seed2, key)
	if h1 == 0 && h2 == 0 {
		h2 = 1 // never the empty marker's pattern; off tells emptiness anyway
	}
	return h1, h2
}

// probe returns the first slot of key's sequence and the step between
// slots; the step is in [1, len-1] and the length prime, so the sequence
// covers the table.
func (m *offsetMap) probe(h1, h2 uint64) (uint64, uint64) {
	n := uint64(len(m.slots))
	return h1 % n, 1 + h2%(n-1)
}

// capacity is how many keys the map holds before it counts as full, at a
// load factor: probing degrades as the table fills.
func (m *offsetMap) capacity(loadFactor float64) int {
	return int(float64(len(m.slots)) * loadFactor)
}

// put records offset as key's latest. It returns false, changing
// nothing, if the key is new and the table is completely full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	i, step := m.probe(h1, h2)
	n := uint64(len(m.slots))
	for range n {
		s := &m.slots[i]
		if s.off == 0 {
			*s = offsetSlot{h1: h1, h2: h2, off: offset + 1}
			m.entries++
			m.latest = offset
			return true
		}
		if s.h1 == h1 && s.h2 == h2 {
			s.off = offset + 1
			m.latest = offset
			return true
		}
		i = (i + step) % n
	}
	return false
}

// get returns the latest offset recorded for key, or -1.
func (m *offsetMap) get(key []byte) int64 {
	if len(m.slots) == 0 {
		return -1
	}
	h1, h2 := m.hash(key)
	i, step := m.probe(h1, h2)
	n := uint64(len(m.slots))
	for range n {
		s := &m.slots[i]
		if s.off == 0 {
			return -1
		}
		if s.h1 == h1 && s.h2 == h2 {
			return s.off - 1
		}
		i = (i + step) % n
	}
	return -1
}

// updateLatest declares every offset up to offset mapped (Kafka's
// updateLatestOffset): records past it are kept whatever their key.
func (m *offsetMap) updateLatest(offset int64) { m.latest = offset }
