package group

import "fmt"

// replayStreams applies one streams group record to the partition being
// loaded, as GroupMetadataManager.replay does for each streams record
// type. Records create the group they name (a simple classic group of
// offsets becomes it); tombstones of unknown groups or members are
// ignored.
func replayStreams(lp *loadedPartition, partition int32, version int16, r Record) error {
	d := &decoder{b: r.Key}
	d.i16()
	k := cgKey{group: d.str()}
	switch version {
	case sgMemberMetadataKeyVersion, sgTargetMemberKeyVersion, sgCurrentAssignmentKeyVersion:
		k.member = d.str()
	}
	if err := d.done(); err != nil {
		return fmt.Errorf("decode streams group key type %d: %w", version, err)
	}
	g := lp.streams[k.group]
	if r.Value == nil {
		if g == nil {
			return nil
		}
		switch version {
		case sgMemberMetadataKeyVersion, sgCurrentAssignmentKeyVersion:
			// The member goes with its metadata; its current assignment
			// tombstone comes first, as Kafka writes them.
			if version == sgMemberMetadataKeyVersion {
				delete(g.members, k.member)
			} else if m := g.members[k.member]; m != nil {
				m.assigned, m.revoking, m.epoch, m.previousEpoch, m.state = emptyTasks(), emptyTasks(), 0, 0, memberStable
				m.activeEpochs = nil
			}
		case sgTargetMemberKeyVersion:
			delete(g.target, k.member)
		case sgMetadataKeyVersion:
			// The group is gone; its offsets stay until their own
			// tombstones, in a simple classic group.
			delete(lp.streams, k.group)
			if len(g.offsets) > 0 {
				c := newClassicGroup(k.group, partition, 0)
				c.offsetStore = g.offsetStore
				lp.classic[k.group] = c
			}
		case sgTopologyKeyVersion:
			g.topology = nil
		}
		return nil
	}
	if g == nil {
		if lp.consumers[k.group] != nil {
			return fmt.Errorf("streams group record type %d for %s, which is a consumer group", version, k.group)
		}
		g = newStreamsGroup(k.group, partition)
		if c := lp.classic[k.group]; c != nil {
			if c.protocolType != "" || len(c.members) > 0 {
				return fmt.Errorf("streams group record type %d for %s, which is a classic group", version, k.group)
			}
			delete(lp.classic, k.group)
			g.offsetStore = c.offsetStore
		}
		lp.streams[k.group] = g
	}
	fail := func(err error) error {
		return fmt.Errorf("decode streams group value type %d of %s: %w", version, k.group, err)
	}
	member := func() *streamsMember {
		m := g.members[k.member]
		if m == nil {
			m = &streamsMember{id: k.member, rebalanceTimeoutMs: -1, topologyEpoch: -1, assigned: emptyTasks(), revoking: emptyTasks()}
			g.members[k.member] = m
		}
		return m
	}
	switch version {
	case sgMetadataKeyVersion:
		v, err := decodeSGEpoch(r.Value)
		if err != nil {
			return fail(err)
		}
		g.epoch, g.metadataHash, g.validatedTopologyEpoch, g.standbyReplicas = v.epoch, v.hash, v.validated, v.standbys
		g.rackAwareTags = v.rackTags
	case sgTopologyKeyVersion:
		t, err := decodeSGTopology(r.Value)
		if err != nil {
			return fail(err)
		}
		g.topology = t
	case sgMemberMetadataKeyVersion:
		if err := decodeSGMember(r.Value, member()); err != nil {
			return fail(err)
		}
	case sgTargetMetadataKeyVersion:
		epoch, ts, err := decodeTargetEpoch(r.Value)
		if err != nil {
			return fail(err)
		}
		g.assignmentEpoch, g.assignmentTimestampMs = epoch, ts
	case sgTargetMemberKeyVersion:
		t, err := decodeSGTargetMember(r.Value)
		if err != nil {
			return fail(err)
		}
		g.target[k.member] = t
	case sgCurrentAssignmentKeyVersion:
		if err := decodeSGCurrentAssignment(r.Value, member()); err != nil {
			return fail(err)
		}
	}
	return nil
}
