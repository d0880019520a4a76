package group

// This file moves a member's current assignment towards its target, after
// Kafka's CurrentAssignmentBuilder: partitions are revoked before new ones
// are assigned, and a partition is handed out only once its previous owner
// has released it.

// reconcile returns the member's next assignment state, or m itself when
// nothing changes. owned is the partitions the member reported in its
// heartbeat; nil when it did not report them. It fails with
// FENCED_MEMBER_EPOCH for a member in a state this coordinator does not
// know, which must rejoin from scratch.
func reconcile(g *consumerGroup, m *consumerMember, targetEpoch int32, target tpSet, owned tpSet) (*consumerMember, int16) {
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return m, 0
		}
		return nextAssignment(g, m, m.epoch, targetEpoch, target, owned), 0
	case memberUnrevokedPartitions:
		// The member moves on once it no longer reports any of the
		// partitions it was asked to revoke.
		if ownsAny(owned, m.revoking) {
			return m, 0
		}
		return nextAssignment(g, m, m.epoch+1, targetEpoch, target, owned), 0
	case memberUnreleasedPartitions:
		return nextAssignment(g, m, m.epoch, targetEpoch, target, owned), 0
	default:
		if owned == nil || owned.size() > 0 {
			return nil, errFencedMemberEpoch
		}
		return nextAssignment(g, m, targetEpoch, targetEpoch, target, owned), 0
	}
}

// ownsAny reports whether the reported partitions include one of set; a
// member that did not report its partitions is assumed to still own them.
func ownsAny(owned, set tpSet) bool {
	if owned == nil {
		return true
	}
	for id, ps := range owned {
		for _, p := range ps {
			if set.has(id, p) {
				return true
			}
		}
	}
	return false
}

// nextAssignment is computeNextAssignment: the member keeps what it owns of
// its target, revokes the rest, and gets the target's other partitions that
// no member still holds.
func nextAssignment(g *consumerGroup, m *consumerMember, memberEpoch, targetEpoch int32, target, owned tpSet) *consumerMember {
	assigned := make(tpSet)
	revoking := make(tpSet)
	pending := make(tpSet)
	unreleased := false
	for id := range unionTopics(target, m.assigned) {
		for _, p := range m.assigned[id] {
			if target.has(id, p) {
				assigned.add(id, p)
			} else {
				revoking.add(id, p)
			}
		}
		for _, p := range target[id] {
			if assigned.has(id, p) {
				continue
			}
			if g.partitionOwned(id, p) {
				unreleased = true
				continue
			}
			pending.add(id, p)
		}
	}
	next := m.clone()
	switch {
	case len(revoking) > 0 && ownsAny(owned, revoking):
		// Stay in the current epoch until the client confirms the
		// revocation by no longer reporting those partitions.
		next.state = memberUnrevokedPartitions
		next.setEpoch(memberEpoch)
		next.assigned, next.revoking = assigned, revoking
	case len(pending) > 0:
		for id, ps := range pending {
			assigned.add(id, ps...)
		}
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		next.setEpoch(targetEpoch)
		next.assigned, next.revoking = assigned, tpSet{}
	default:
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		next.setEpoch(targetEpoch)
		next.assigned, next.revoking = assigned, tpSet{}
	}
	return next
}

// setEpoch moves the member to an epoch, remembering the one it leaves so
// that a member whose response was lost may still heartbeat with it.
func (m *consumerMember) setEpoch(e int32) {
	m.previousEpoch, m.epoch = m.epoch, e
}

func unionTopics(a, b tpSet) map[topicID]struct{} {
	out := make(map[topicID]struct{}, len(a)+len(b))
	for id := range a {
		out[id] = struct{}{}
	}
	for id := range b {
		out[id] = struct{}{}
	}
	return out
}
