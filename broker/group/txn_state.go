package group

// txnOffsets holds the transactional offset commits of one
// __consumer_offsets partition whose transactions have not ended, after
// Kafka's pendingTransactionalOffsets and openTransactionsByGroup in
// OffsetMetadataManager. They are invisible to OffsetFetch (which answers
// UNSTABLE_OFFSET_COMMIT for them when asked for stable offsets) until the
// producer's COMMIT marker moves them to the groups' committed offsets; an
// ABORT marker drops them.
type txnOffsets struct {
	// pending maps producer id -> group -> partition -> offset. A group
	// stays under its producer after tombstones removed all its offsets:
	// the transaction is still open for it until the marker.
	pending map[int64]map[string]map[tp]offsetValue
	// open maps group -> the producers with an open transaction that
	// committed offsets of the group, the index of pending by group.
	open map[string]map[int64]struct{}
}

func newTxnOffsets() *txnOffsets {
	return &txnOffsets{pending: make(map[int64]map[string]map[tp]offsetValue), open: make(map[string]map[int64]struct{})}
}

// begin records that producer's open transaction committed offsets of
// group, and returns the group's pending offsets of that producer.
func (t *txnOffsets) begin(producer int64, group string) map[tp]offsetValue {
	groups := t.pending[producer]
	if groups == nil {
		groups = make(map[string]map[tp]offsetValue)
		t.pending[producer] = groups
	}
	offsets := groups[group]
	if offsets == nil {
		offsets = make(map[tp]offsetValue)
		groups[group] = offsets
	}
	producers := t.open[group]
	if producers == nil {
		producers = make(map[int64]struct{})
		t.open[group] = producers
	}
	producers[producer] = struct{}{}
	return offsets
}

// put stores a pending offset; a later write of the same partition in the
// same transaction replaces it.
func (t *txnOffsets) put(producer int64, group string, k tp, v offsetValue) {
	t.begin(producer, group)[k] = v
}

// hasPending reports whether an open transaction holds an offset of the
// group's partition.
func (t *txnOffsets) hasPending(group string, k tp) bool {
	for producer := range t.open[group] {
		if _, ok := t.pending[producer][group][k]; ok {
			return true
		}
	}
	return false
}

// hasOpen reports whether a transaction that committed offsets of the group
// is still open: the group must not be expired meanwhile.
func (t *txnOffsets) hasOpen(group string) bool {
	return len(t.open[group]) > 0
}

// pendingOf lists the partitions of a group with pending offsets in any
// open transaction.
func (t *txnOffsets) pendingOf(group string) map[tp]offsetValue {
	out := make(map[tp]offsetValue)
	for producer := range t.open[group] {
		for k, v := range t.pending[producer][group] {
			out[k] = v
		}
	}
	return out
}

// remove drops the pending offsets of a group's partition from every open
// transaction, as an offset tombstone does in Kafka's replay.
func (t *txnOffsets) remove(group string, k tp) {
	for producer := range t.open[group] {
		delete(t.pending[producer][group], k)
	}
}

// removeGroup drops every pending offset of a group, as the tombstones of
// a group deletion do; the transactions stay open for it.
func (t *txnOffsets) removeGroup(group string) {
	for producer := range t.open[group] {
		clear(t.pending[producer][group])
	}
}

// end closes producer's transaction and returns its pending offsets by
// group (nil when it committed none here).
func (t *txnOffsets) end(producer int64) map[string]map[tp]offsetValue {
	groups, ok := t.pending[producer]
	if !ok {
		return nil
	}
	delete(t.pending, producer)
	for group := range groups {
		if producers := t.open[group]; producers != nil {
			delete(producers, producer)
			if len(producers) == 0 {
				delete(t.open, group)
			}
		}
	}
	return groups
}

// groupOffsets finds the offsets of a group among a partition's groups,
// creating a simple classic group when there is none, as Kafka's replay
// does for offsets of a group it does not know.
func groupOffsets(classic map[string]*classicGroup, consumers map[string]*consumerGroup, streams map[string]*streamsGroup, partition int32, id string, nowMs int64) *offsetStore {
	if cg := consumers[id]; cg != nil {
		return &cg.offsetStore
	}
	if sg := streams[id]; sg != nil {
		return &sg.offsetStore
	}
	g := classic[id]
	if g == nil {
		g = newClassicGroup(id, partition, nowMs)
		classic[id] = g
	}
	return &g.offsetStore
}

// applyMarker ends producer's transaction on a partition: a commit moves
// its offsets to their groups, each unless the group holds an offset
// written after it (Kafka keeps the most recent record when transactional
// and plain commits mix); an abort forgets them. It reports how many
// offsets were committed.
func (t *txnOffsets) applyMarker(classic map[string]*classicGroup, consumers map[string]*consumerGroup, streams map[string]*streamsGroup, partition int32, producer int64, commit bool, nowMs int64) int {
	groups := t.end(producer)
	if !commit {
		return 0
	}
	n := 0
	for _, group := range sortedKeys(groups) {
		offsets := groups[group]
		if len(offsets) == 0 {
			continue
		}
		store := groupOffsets(classic, consumers, streams, partition, group, nowMs)
		for k, v := range offsets {
			if old, ok := store.offsets[k]; ok && old.order > v.order {
				continue
			}
			store.offsets[k] = v
			n++
		}
	}
	return n
}
