package image

import (
	"hash/maphash"
	"iter"
	"maps"
	"reflect"
)

// cowShards is how many maps a cowMap is split into.
const cowShards = 128

// cowSeed places keys in shards; the layout lives only in memory.
var cowSeed = maphash.MakeSeed()

// cowMap is a map split into shards, shared between images: an image
// made by Apply copies the array of shards (1 KiB) and only the shards
// its records write, so a one-topic change costs O(topics/128) rather
// than a copy of every topic's entry (at 10,000 topics a CreateTopics
// cost each node three 10,000-entry map copies, 9 ms at load 20:
// BenchmarkApplyCreateTopic). A cowMap is never written once an image
// holding it is published; cowWriter writes a builder's own copy.
//
// S places keys in shards. It is a type, not a func field, so that an
// image holds only data (images compare with reflect.DeepEqual) and the
// call is static: it must be fast (maphash.Comparable, generic, made
// Apply 3x slower).
type cowMap[K comparable, V any, S sharder[K]] struct {
	shards *[cowShards]map[K]V
	n      int
}

// sharder is the shard of a key, 0 to cowShards-1.
type sharder[K comparable] interface{ shardOf(K) int }

// nameShard places topic names.
type nameShard struct{}

func (nameShard) shardOf(s string) int { return int(maphash.String(cowSeed, s) % cowShards) }

// idShard places topic ids, which are random already.
type idShard struct{}

func (idShard) shardOf(id [16]byte) int { return int(id[15]^id[7]^id[0]) % cowShards }

// newCowMap is an empty cowMap.
func newCowMap[K comparable, V any, S sharder[K]]() cowMap[K, V, S] {
	return cowMap[K, V, S]{shards: &[cowShards]map[K]V{}}
}

func (m cowMap[K, V, S]) shard(k K) int {
	var s S
	return s.shardOf(k)
}

func (m cowMap[K, V, S]) get(k K) (V, bool) {
	v, ok := m.shards[m.shard(k)][k]
	return v, ok
}

func (m cowMap[K, V, S]) len() int { return m.n }

// all yields every entry in no particular order.
func (m cowMap[K, V, S]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, s := range m.shards {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

func (m cowMap[K, V, S]) keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.all() {
			if !yield(k) {
				return
			}
		}
	}
}

func (m cowMap[K, V, S]) values() iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, v := range m.all() {
			if !yield(v) {
				return
			}
		}
	}
}

// changedKeys yields every key that only one of prev and next holds, or
// that they map to different values, looking only at the shards the two
// do not share: a change costs its shards' entries (topics/128 each),
// not a walk of every key. Maps unrelated by Apply share no shard, and
// every key of either is looked at.
func changedKeys[K, V comparable, S sharder[K]](prev, next cowMap[K, V, S]) iter.Seq[K] {
	return func(yield func(K) bool) {
		if prev.shards == next.shards {
			return
		}
		for i, ns := range next.shards {
			ps := prev.shards[i]
			if sameMap(ps, ns) {
				continue
			}
			for k, v := range ns {
				if old, ok := ps[k]; (!ok || old != v) && !yield(k) {
					return
				}
			}
			for k := range ps {
				if _, ok := ns[k]; !ok && !yield(k) {
					return
				}
			}
		}
	}
}

// sameMap reports whether a and b are the same map (not merely equal):
// a shard an image shares with the one it was built from.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// cowWriter writes a cowMap of an image being built, copying the shard
// array on the first write and each shard on its first write.
type cowWriter[K comparable, V any, S sharder[K]] struct {
	m        *cowMap[K, V, S]
	ownArray bool
	owned    [cowShards]bool
}

func (w *cowWriter[K, V, S]) shard(k K) map[K]V {
	i := w.m.shard(k)
	if !w.ownArray {
		arr := *w.m.shards
		w.m.shards = &arr
		w.ownArray = true
	}
	if !w.owned[i] {
		if s := w.m.shards[i]; s != nil {
			w.m.shards[i] = maps.Clone(s)
		} else {
			w.m.shards[i] = map[K]V{}
		}
		w.owned[i] = true
	}
	return w.m.shards[i]
}

func (w *cowWriter[K, V, S]) set(k K, v V) {
	s := w.shard(k)
	if _, ok := s[k]; !ok {
		w.m.n++
	}
	s[k] = v
}

func (w *cowWriter[K, V, S]) delete(k K) {
	s := w.shard(k)
	if _, ok := s[k]; ok {
		delete(s, k)
		w.m.n--
	}
}
