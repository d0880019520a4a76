// Package cowmap is a map split into shards and shared copy-on-write
// between versions: a new version copies the array of shards (1 KiB) and
// only the shards it writes, so a one-key change costs O(len/Shards)
// rather than a copy of every entry. The metadata image keeps its topics
// in them, and the broker its hosted partitions, each changed at every
// CreateTopics.
package cowmap

import (
	"hash/maphash"
	"iter"
	"maps"
	"reflect"
)

// Shards is how many maps a Map is split into.
const Shards = 128

// seed places string keys in shards; the layout lives only in memory.
var seed = maphash.MakeSeed()

// Sharder places keys in shards, 0 to Shards-1. It is a type parameter,
// not a func field, so that a Map holds only data (the image compares
// with reflect.DeepEqual) and the call is static: it must be fast
// (maphash.Comparable, generic, made the image's Apply 3x slower).
type Sharder[K comparable] interface{ ShardOf(K) int }

// Strings places string keys.
type Strings struct{}

func (Strings) ShardOf(s string) int { return int(maphash.String(seed, s) % Shards) }

// Map is a sharded map, never written once it is published; a Writer
// writes a version of its own.
type Map[K comparable, V any, S Sharder[K]] struct {
	shards *[Shards]map[K]V
	n      int
}

// New is an empty Map.
func New[K comparable, V any, S Sharder[K]]() Map[K, V, S] {
	return Map[K, V, S]{shards: &[Shards]map[K]V{}}
}

func (m Map[K, V, S]) shard(k K) int {
	var s S
	return s.ShardOf(k)
}

// Get is k's value.
func (m Map[K, V, S]) Get(k K) (V, bool) {
	if m.shards == nil {
		var zero V
		return zero, false
	}
	v, ok := m.shards[m.shard(k)][k]
	return v, ok
}

// Len is the number of entries.
func (m Map[K, V, S]) Len() int { return m.n }

// All yields every entry in no particular order.
func (m Map[K, V, S]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.shards == nil {
			return
		}
		for _, s := range m.shards {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// Keys yields every key in no particular order.
func (m Map[K, V, S]) Keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.All() {
			if !yield(k) {
				return
			}
		}
	}
}

// Values yields every value in no particular order.
func (m Map[K, V, S]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, v := range m.All() {
			if !yield(v) {
				return
			}
		}
	}
}

// ChangedKeys yields every key that only one of prev and next holds, or
// that they map to different values, looking only at the shards the two
// do not share: a change costs its shards' entries, not a walk of every
// key. Maps not written from one another share no shard, and every key
// of either is looked at.
func ChangedKeys[K, V comparable, S Sharder[K]](prev, next Map[K, V, S]) iter.Seq[K] {
	return func(yield func(K) bool) {
		if prev.shards == next.shards {
			return
		}
		var none [Shards]map[K]V
		ps, ns := &none, &none
		if prev.shards != nil {
			ps = prev.shards
		}
		if next.shards != nil {
			ns = next.shards
		}
		for i := range ns {
			p, n := ps[i], ns[i]
			if sameMap(p, n) {
				continue
			}
			for k, v := range n {
				if old, ok := p[k]; (!ok || old != v) && !yield(k) {
					return
				}
			}
			for k := range p {
				if _, ok := n[k]; !ok && !yield(k) {
					return
				}
			}
		}
	}
}

// SharedShards is how many shards a and b share (not merely equal).
func SharedShards[K comparable, V any, S Sharder[K]](a, b Map[K, V, S]) int {
	if a.shards == nil || b.shards == nil {
		return 0
	}
	n := 0
	for i := range a.shards {
		if sameMap(a.shards[i], b.shards[i]) {
			n++
		}
	}
	return n
}

// sameMap reports whether a and b are the same map (not merely equal): a
// shard a version shares with the one it was written from.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Writer writes a new version of a Map in place, copying the shard array
// at its first write and each shard at its first write to it; the version
// it started from is left as it was.
type Writer[K comparable, V any, S Sharder[K]] struct {
	m        *Map[K, V, S]
	ownArray bool
	owned    [Shards]bool
}

// NewWriter writes *m, which starts as a copy of a published Map.
func NewWriter[K comparable, V any, S Sharder[K]](m *Map[K, V, S]) Writer[K, V, S] {
	return Writer[K, V, S]{m: m}
}

func (w *Writer[K, V, S]) shard(k K) map[K]V {
	i := w.m.shard(k)
	if !w.ownArray {
		var arr [Shards]map[K]V
		if w.m.shards != nil {
			arr = *w.m.shards
		}
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

// Set sets k to v.
func (w *Writer[K, V, S]) Set(k K, v V) {
	s := w.shard(k)
	if _, ok := s[k]; !ok {
		w.m.n++
	}
	s[k] = v
}

// Delete removes k; a key that is not there copies nothing.
func (w *Writer[K, V, S]) Delete(k K) {
	if _, ok := w.m.Get(k); !ok {
		return
	}
	s := w.shard(k)
	delete(s, k)
	w.m.n--
}
