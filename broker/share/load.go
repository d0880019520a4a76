package share

import (
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
)

// replay rebuilds the groups of a __share_group_state partition from its
// records: the newest snapshot of each share partition wins and a
// tombstone forgets it, and the membership records (members.go) bring
// back the group epoch and each member's epoch, subscriptions and
// assignments, so that members heartbeating at their epoch continue. The
// leaders of the partitions read the state again, where what was in
// flight is AVAILABLE.
func replay(partition int32, records iter.Seq2[Record, error], log *slog.Logger) (map[string]*groupState, error) {
	groups := map[string]*groupState{}
	membership := map[string]*loadedMembership{}
	for r, err := range records {
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: %w", StateTopic, partition, err)
		}
		if r.Control || len(r.Key) < 2 {
			continue
		}
		if version := int16(binary.BigEndian.Uint16(r.Key)); version >= recMemberMetadata && version <= recCurrentAssignment {
			if err := replayMembership(membership, version, r.Key, r.Value); err != nil {
				return nil, fmt.Errorf("replay %s-%d: %w", StateTopic, partition, err)
			}
			continue
		}
		group, k, version, err := parseKey(r.Key)
		if err != nil {
			return nil, fmt.Errorf("replay %s-%d: key: %w", StateTopic, partition, err)
		}
		g := groups[group]
		if version == updateKeyVersion {
			if err := replayUpdate(g, k, r.Value); err != nil {
				return nil, fmt.Errorf("replay %s-%d: update of %s: %w", StateTopic, partition, group, err)
			}
			continue
		}
		if version != snapshotKeyVersion {
			log.Debug("skip share state record type", "partition", partition, "type", version)
			continue
		}
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
		v.logged, v.loggedStateEpoch, v.snapshotBatches, v.loggedBatches = true, v.StateEpoch, v.Batches, v.Batches
		g.durable[k] = &v
	}
	for id, l := range membership {
		if !l.hasMeta && len(l.members) == 0 {
			continue
		}
		g := groups[id]
		if g == nil {
			g = emptyGroup(id, partition)
			groups[id] = g
		}
		restoreMembership(g, l)
	}
	for id, g := range groups {
		if l := membership[id]; len(g.durable) == 0 && (l == nil || !l.hasMeta && len(l.members) == 0) {
			delete(groups, id)
		}
	}
	return groups, nil
}

// replayUpdate lays a ShareUpdate record over the share partition's
// snapshot and the updates before it, as Kafka's share coordinator
// merges them. An update of another snapshot than the share partition's
// last one (left in the log by compaction after the share partition was
// deleted or written anew) is ignored, and so is an update tombstone,
// which Kafka never writes.
func replayUpdate(g *groupState, k partKey, value []byte) error {
	if value == nil {
		return nil
	}
	u, err := parseUpdateValue(value)
	if err != nil {
		return err
	}
	var v *snapshotValue
	if g != nil {
		v = g.durable[k]
	}
	if v == nil || u.SnapshotEpoch != v.SnapshotEpoch {
		return nil
	}
	if u.StartOffset != -1 {
		v.StartOffset = u.StartOffset
	}
	if u.LeaderEpoch != -1 {
		v.LeaderEpoch = u.LeaderEpoch
	}
	v.Batches = mergeBatches(v.Batches, u.Batches, v.StartOffset)
	v.loggedBatches = v.Batches
	v.updates++
	return nil
}
