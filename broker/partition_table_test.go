package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/internal/cowmap"
)

// TestPartitionTableEditCopiesOnlyItsShards: an edit of two topics next to
// 5,000 shares every other shard with the view it started from; a view
// loaded before the store keeps what it saw, and the table after it has
// every topic.
func TestPartitionTableEditCopiesOnlyItsShards(t *testing.T) {
	var table partitionTable
	first := newTableEdit(table.load())
	for i := range 5000 {
		name := fmt.Sprintf("t%d", i)
		first.w.Set(name, &topicPartitions{name: name})
	}
	table.store(first)
	before := table.load()

	e := newTableEdit(before)
	e.w.Set("new", &topicPartitions{name: "new"})
	e.w.Delete("t7")
	table.store(e)
	after := table.load()

	if shared, want := cowmap.SharedShards(before, after), cowmap.Shards-2; shared < want {
		t.Fatalf("%d shards shared after an edit of two topics, want at least %d", shared, want)
	}
	if changed := slices.Sorted(cowmap.ChangedKeys(before, after)); !slices.Equal(changed, []string{"new", "t7"}) {
		t.Fatalf("changed topics %v, want [new t7]", changed)
	}
	if getTopic(before, "new") != nil || getTopic(before, "t7") == nil {
		t.Fatal("a view loaded before the edit changed")
	}
	if table.topic("new") == nil || table.topic("t7") != nil || table.topic("t4999") == nil {
		t.Fatal("the table after the edit lacks the new topic, keeps the deleted one or lost another")
	}
	n := 0
	for name, tp := range table.all() {
		if tp.name != name {
			t.Fatalf("entry %q holds %q", name, tp.name)
		}
		n++
	}
	if n != 5000 {
		t.Fatalf("%d topics in the table, want 5,000", n)
	}
}

// changedPartitions names, for the changed topics only, the partitions the
// new table hosts and those the old one hosted that it does not: a
// partition kept at its index is not removed, and an unchanged topic's
// partitions are in neither list.
func TestChangedPartitions(t *testing.T) {
	p := func() *partition.Partition { return &partition.Partition{} }
	kept, dropped, added, other, renewed := p(), p(), p(), p(), p()
	gone := p()
	oldE := newTableEdit(tableView{})
	oldE.w.Set("a", &topicPartitions{name: "a", parts: []*partition.Partition{kept, dropped}})
	oldE.w.Set("b", &topicPartitions{name: "b", parts: []*partition.Partition{other}})
	oldE.w.Set("c", &topicPartitions{name: "c", parts: []*partition.Partition{gone}})
	oldE.w.Set("d", &topicPartitions{name: "d", parts: []*partition.Partition{p()}})
	nextE := newTableEdit(oldE.view)
	nextE.w.Set("a", &topicPartitions{name: "a", parts: []*partition.Partition{kept, nil, added}})
	nextE.w.Delete("c")
	nextE.w.Set("d", &topicPartitions{name: "d", parts: []*partition.Partition{renewed}}) // deleted and made again

	changed, removed := changedPartitions([]string{"a", "c", "d"}, oldE.view, nextE.view)
	want := func(what string, got, w []*partition.Partition) {
		t.Helper()
		if !slices.Equal(got, w) {
			t.Fatalf("%s: %p, want %p", what, got, w)
		}
	}
	want("changed", changed, []*partition.Partition{kept, added, renewed})
	old := getTopic(oldE.view, "d").parts[0]
	want("removed", removed, []*partition.Partition{dropped, gone, old})
}
