package cowmap

import (
	"fmt"
	"slices"
	"testing"
)

type stringMap = Map[string, int, Strings]

// TestWriterCopiesOnlyWhatItWrites: a version written from another copies
// the shards of the keys it changes and shares every other one; the
// version it started from keeps its entries, and ChangedKeys finds exactly
// the keys changed.
func TestWriterCopiesOnlyWhatItWrites(t *testing.T) {
	base := New[string, int, Strings]()
	w := NewWriter(&base)
	for i := range 5000 {
		w.Set(fmt.Sprintf("k%d", i), i)
	}
	next := base
	nw := NewWriter(&next)
	nw.Set("new", -1)
	nw.Set("k1", 100)
	nw.Delete("k7")
	nw.Delete("never-there")

	touched := map[int]bool{}
	for _, k := range []string{"new", "k1", "k7"} {
		touched[Strings{}.ShardOf(k)] = true
	}
	if got, want := SharedShards(base, next), Shards-len(touched); got != want {
		t.Fatalf("%d shards shared after writing %d, want %d", got, len(touched), want)
	}
	if v, _ := base.Get("k1"); v != 1 || base.Len() != 5000 {
		t.Fatalf("the base changed: k1=%d, %d entries", v, base.Len())
	}
	if _, ok := base.Get("k7"); !ok {
		t.Fatal("the base lost k7")
	}
	if v, _ := next.Get("k1"); v != 100 || next.Len() != 5000 {
		t.Fatalf("the new version: k1=%d, %d entries, want 100 and 5,000", v, next.Len())
	}
	changed := slices.Sorted(ChangedKeys(base, next))
	if !slices.Equal(changed, []string{"k1", "k7", "new"}) {
		t.Fatalf("changed keys %v, want [k1 k7 new]", changed)
	}
	if n := len(slices.Collect(ChangedKeys(base, base))); n != 0 {
		t.Fatalf("%d keys changed between a map and itself", n)
	}
}

// TestZeroMap: the zero Map is empty and can be written.
func TestZeroMap(t *testing.T) {
	var m stringMap
	if _, ok := m.Get("a"); ok || m.Len() != 0 || len(slices.Collect(m.Keys())) != 0 {
		t.Fatal("the zero Map is not empty")
	}
	next := m
	w := NewWriter(&next)
	w.Set("a", 1)
	if v, ok := next.Get("a"); !ok || v != 1 || next.Len() != 1 {
		t.Fatalf("after Set: %d %v, %d entries", v, ok, next.Len())
	}
	if changed := slices.Collect(ChangedKeys(m, next)); !slices.Equal(changed, []string{"a"}) {
		t.Fatalf("changed keys %v, want [a]", changed)
	}
}
