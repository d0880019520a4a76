package broker

import (
	"iter"
	"sync/atomic"

	"github.com/gregorbroker/gregor/internal/cowmap"
)

// tableView is the hosted partition table at one moment: topic names to
// their hosted partitions, never written once published. It is a
// copy-on-write sharded map (cowmap), as the image's topics are: a
// metadata change copies only the shards of the topics it touches. With
// one map, creating a topic next to 7,000 others copied all 7,000
// entries, and the garbage of that copy at every CreateTopics kept the
// collector busy (a quarter of the broker's CPU with the group
// coordinator's like copies).
type tableView = cowmap.Map[string, *topicPartitions, cowmap.Strings]

// partitionTable maps topics to their hosted partitions. Readers load the
// current view; reconcile publishes a new one whole (tableEdit).
type partitionTable struct {
	byName atomic.Pointer[tableView]
}

// topic is the named topic's hosted partitions, or nil.
func (t *partitionTable) topic(name string) *topicPartitions {
	return getTopic(t.load(), name)
}

// load is the table as it is now.
func (t *partitionTable) load() tableView {
	if v := t.byName.Load(); v != nil {
		return *v
	}
	return tableView{}
}

// all walks every topic of the table as it is now.
func (t *partitionTable) all() iter.Seq2[string, *topicPartitions] {
	return t.load().All()
}

// tableEdit is a new version of a view being written; the view it
// started from is left as it was.
type tableEdit struct {
	view tableView
	w    cowmap.Writer[string, *topicPartitions, cowmap.Strings]
}

func newTableEdit(from tableView) *tableEdit {
	e := &tableEdit{view: from}
	e.w = cowmap.NewWriter(&e.view)
	return e
}

// store publishes the edited view.
func (t *partitionTable) store(e *tableEdit) {
	v := e.view
	t.byName.Store(&v)
}
