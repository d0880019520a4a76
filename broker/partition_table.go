package broker

import (
	"iter"
	"maps"
	"sync/atomic"
)

// partitionTableShards is how many maps the hosted partition table is
// split into. A metadata change copies only the shards of the topics it
// touches: with one map, creating a topic next to 7,000 others copied
// all 7,000 entries, and the garbage of that copy at every CreateTopics
// kept the collector busy (a quarter of the broker's CPU with the group
// coordinator's like copies).
const partitionTableShards = 64

// partitionTable maps topics to their hosted partitions. Readers load a
// shard's current immutable map; reconcile replaces the shards it
// changed (tableEdit), each whole. A topic's entry therefore changes
// atomically; two topics in different shards may be seen one changed
// and the other not yet, as they could be by two reads of the table.
type partitionTable struct {
	shards [partitionTableShards]atomic.Pointer[map[string]*topicPartitions]
}

// tableShard is the shard of a topic name (FNV-1a).
func tableShard(name string) int {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return int(h % partitionTableShards)
}

// topic is the named topic's hosted partitions, or nil.
func (t *partitionTable) topic(name string) *topicPartitions {
	m := t.shards[tableShard(name)].Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

// load is the table's shards as they are now.
func (t *partitionTable) load() *tableView {
	var v tableView
	for i := range t.shards {
		if m := t.shards[i].Load(); m != nil {
			v[i] = *m
		}
	}
	return &v
}

// all walks every topic of the table as it is now.
func (t *partitionTable) all() iter.Seq2[string, *topicPartitions] {
	return t.load().all()
}

// store installs the shards e changed.
func (t *partitionTable) store(e *tableEdit) {
	for i := range e.view {
		if e.copied&(1<<i) != 0 {
			m := e.view[i]
			t.shards[i].Store(&m)
		}
	}
}

// tableView is a partition table's shards at one moment; its maps are
// never written.
type tableView [partitionTableShards]map[string]*topicPartitions

func (v *tableView) get(name string) *topicPartitions { return v[tableShard(name)][name] }

// all walks every topic of the view.
func (v *tableView) all() iter.Seq2[string, *topicPartitions] {
	return func(yield func(string, *topicPartitions) bool) {
		for _, m := range v {
			for name, tp := range m {
				if !yield(name, tp) {
					return
				}
			}
		}
	}
}

// tableEdit is a view being changed: a shard is copied at its first
// change, the others are shared with the view it started from.
type tableEdit struct {
	view   tableView
	copied uint64 // bit i: shard i is this edit's own copy
}

func newTableEdit(from *tableView) *tableEdit { return &tableEdit{view: *from} }

func (e *tableEdit) shard(name string) map[string]*topicPartitions {
	i := tableShard(name)
	if e.copied&(1<<i) == 0 {
		if e.view[i] == nil {
			e.view[i] = make(map[string]*topicPartitions)
		} else {
			e.view[i] = maps.Clone(e.view[i])
		}
		e.copied |= 1 << i
	}
	return e.view[i]
}

func (e *tableEdit) set(name string, tp *topicPartitions) { e.shard(name)[name] = tp }

func (e *tableEdit) delete(name string) {
	if e.view.get(name) != nil {
		delete(e.shard(name), name)
	}
}
