package share

import (
	"fmt"
	"iter"
	"log/slog"
)

// replay rebuilds the groups of a __share_group_state partition from its
// records: the newest snapshot of each share partition wins and a
// tombstone forgets it. Groups come back with their share partitions and
// no members: members rejoin (their next heartbeat answers
// UNKNOWN_MEMBER_ID), and what they held is AVAILABLE again.
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
				delete(g.parts, k)
			}
			continue
		}
		v, err := parseSnapshotValue(r.Value)
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: snapshot of %s: %w", StateTopic, partition, group, err)
		}
		if g == nil {
			g = &groupState{id: group, partition: partition, members: map[string]*member{},
				target: map[string]assignment{}, parts: map[partKey]*partitionState{},
				sessions: map[string]*session{}}
			groups[group] = g
		}
		// The topic name is filled in by the next fetch or assignment.
		g.parts[k] = restore("", v)
	}
	for id, g := range groups {
		if len(g.parts) == 0 {
			delete(groups, id)
		}
	}
	return groups, nil
}
