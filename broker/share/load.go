package share

import (
	"fmt"
	"iter"
	"log/slog"
)

// replay rebuilds the groups of a __share_group_state partition from its
// records: the newest snapshot of each share partition wins and a
// tombstone forgets it. Groups come back with the durable state of their
// share partitions and no members: members rejoin (their next heartbeat
// answers UNKNOWN_MEMBER_ID), and the leaders of the partitions read the
// state again, where what was in flight is AVAILABLE.
func replay(partition int32, records iter.Seq2[Record, error], log *slog.Logger) (map[string]*groupState, error) {
	groups := map[string]*groupState{}
	for r, err := range records {
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: %w", StateTopic, partition, err)
		}
		if r.Control || len(r.Key) < 2 {
			continue
		}
		group, k, version, err := parseKey(r.Key)
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: key: %w", StateTopic, partition, err)
		}
		if version != snapshotKeyVersion {
			log.Debug("skip share state record type", "partition", partition, "type", version)
			continue
		}
		g := groups[group]
		if r.Value == nil {
			if g != nil {
				delete(g.durable, k)
			}
			continue
		}
		v, err := parseSnapshotValue(r.Value)
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: snapshot of %s: %w", StateTopic, partition, group, err)
		}
		if g == nil {
			g = emptyGroup(group, partition)
			g.exists = true
			groups[group] = g
		}
		g.durable[k] = &v
	}
	for id, g := range groups {
		if len(g.durable) == 0 {
			delete(groups, id)
		}
	}
	return groups, nil
}
