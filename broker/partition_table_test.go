package broker

import (
	"fmt"
	"math/bits"
	"testing"
)

// TestPartitionTableEditCopiesOnlyItsShards: an edit of one topic next to
// 5,000 copies that topic's shard alone; views loaded before the store
// keep what they saw, and the table after it has every topic.
func TestPartitionTableEditCopiesOnlyItsShards(t *testing.T) {
	var table partitionTable
	first := newTableEdit(table.load())
	for i := range 5000 {
		name := fmt.Sprintf("t%d", i)
		first.set(name, &topicPartitions{name: name})
	}
	table.store(first)
	before := table.load()

	e := newTableEdit(before)
	e.set("new", &topicPartitions{name: "new"})
	e.delete("t7")
	e.delete("never-there")
	want := 1<<tableShard("new") | 1<<tableShard("t7")
	if e.copied != uint64(want) {
		t.Fatalf("edit copied shards %b, want %b", e.copied, want)
	}
	if n := bits.OnesCount64(e.copied); n > 2 {
		t.Fatalf("%d shards copied for two topics", n)
	}
	table.store(e)

	if before.get("new") != nil || before.get("t7") == nil {
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
	// Shards untouched by the edit are the same maps as before it.
	for i := range partitionTableShards {
		if want&(1<<i) != 0 {
			continue
		}
		if fmt.Sprintf("%p", before[i]) != fmt.Sprintf("%p", table.load()[i]) {
			t.Fatalf("shard %d was copied though the edit did not touch it", i)
		}
	}
}
