package group

import (
	"cmp"
	"slices"
)

// assignSpec is the input of a server-side assignor: the members, each with
// the topics it subscribes to and its current target, and the partition
// count of every subscribed topic.
type assignSpec struct {
	members []assignMember     // sorted by member id
	topics  map[topicID]int32  // partitions per topic
	names   map[topicID]string // for a deterministic order of topics
}

type assignMember struct {
	id         string
	instanceID *string
	topics     []topicID // subscribed topics that exist, sorted by id
	current    tpSet     // the member's current target assignment
}

// assignor is a server-side partition assignor (Kafka's
// ConsumerGroupPartitionAssignor). It must give every partition of a
// subscribed topic to exactly one member subscribed to it.
type assignor interface {
	name() string
	assign(spec assignSpec) map[string]tpSet
}

// The assignors Kafka 4 ships, by the names clients ask for in
// ConsumerGroupHeartbeat's ServerAssignor.
const (
	uniformAssignorName = "uniform"
	rangeAssignorName   = "range"
)

func assignorByName(name string) assignor {
	switch name {
	case uniformAssignorName:
		return uniformAssignor{}
	case rangeAssignorName:
		return rangeAssignor{}
	}
	return nil
}

// rangeAssignor is Kafka's server-side RangeAssignor: for each topic, the
// members subscribed to it, static members first by instance id then the
// others by member id, get consecutive ranges of partitions; the first
// partitions%members of them get one more. Members subscribed to the same
// topics with the same partition counts get the same partition numbers of
// each, which is what joins across co-partitioned topics need. It is not
// sticky.
type rangeAssignor struct{}

func (rangeAssignor) name() string { return rangeAssignorName }

func (rangeAssignor) assign(spec assignSpec) map[string]tpSet {
	members := slices.Clone(spec.members)
	slices.SortFunc(members, func(a, b assignMember) int {
		switch {
		case a.instanceID != nil && b.instanceID != nil:
			return cmp.Compare(*a.instanceID, *b.instanceID)
		case a.instanceID != nil:
			return -1
		case b.instanceID != nil:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	subscribers := make(map[topicID][]string)
	for _, m := range members {
		for _, t := range m.topics {
			subscribers[t] = append(subscribers[t], m.id)
		}
	}
	out := make(map[string]tpSet, len(members))
	for _, m := range members {
		out[m.id] = make(tpSet)
	}
	for t, ids := range subscribers {
		n := spec.topics[t]
		quota, extra := n/int32(len(ids)), n%int32(len(ids))
		next := int32(0)
		for i, id := range ids {
			size := quota
			if int32(i) < extra {
				size++
			}
			if size > 0 {
				out[id][t] = partitionRange(next, next+size)
			}
			next += size
		}
	}
	return out
}

// partitionRange returns the partitions [from, to).
func partitionRange(from, to int32) []int32 {
	ps := make([]int32, 0, to-from)
	for p := from; p < to; p++ {
		ps = append(ps, p)
	}
	return ps
}

// sortedTopics orders the spec's topics by name, then id.
func (s assignSpec) sortedTopics() []topicID {
	ids := make([]topicID, 0, len(s.topics))
	for id := range s.topics {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b topicID) int {
		if c := cmp.Compare(s.names[a], s.names[b]); c != 0 {
			return c
		}
		return slices.Compare(a[:], b[:])
	})
	return ids
}
