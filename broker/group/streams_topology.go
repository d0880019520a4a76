package group

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
)

// This file resolves a streams group's topology against the broker's
// topics, after Kafka's InternalTopicManager, RepartitionTopics,
// CopartitionedTopicsEnforcer and ChangelogTopics: the number of tasks of
// each subtopology, the partition counts of its repartition and changelog
// topics, and the internal topics still to be created.

// Status codes of StreamsGroupHeartbeat responses.
const (
	statusStaleTopology          int8 = 0
	statusMissingSourceTopics    int8 = 1
	statusIncorrectlyPartitioned int8 = 2
	statusMissingInternalTopics  int8 = 3
	statusShutdownApplication    int8 = 4
	statusAssignmentDelayed      int8 = 5
	statusMissingClientTags      int8 = 6
)

// InternalTopic is a repartition or changelog topic a streams group needs
// and the broker must create (through the controller, as Kafka's
// AutoTopicCreationManager): ReplicationFactor -1 means the broker's
// default.
type InternalTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// streamsStatus is a status a heartbeat reports.
type streamsStatus struct {
	code   int8
	detail string
}

// configuredTopology is a topology resolved against the topics.
type configuredTopology struct {
	epoch int32
	hash  int64
	// tasks is the number of tasks of each subtopology; nil when source
	// topics are missing or the topics are wrongly partitioned.
	tasks map[string]int32
	// partitions are the partition counts decided for internal topics.
	partitions map[string]int32
	// toCreate are the internal topics that do not exist yet.
	toCreate []InternalTopic
	// problem is what keeps the topology from being ready, if anything.
	problem *streamsStatus
}

// ready reports whether tasks can be assigned: every topic exists with the
// partitions it must have.
func (c *configuredTopology) ready() bool { return c.tasks != nil && c.problem == nil }

// invalidTopologyError is a topology that can never be configured
// (STREAMS_INVALID_TOPOLOGY).
type invalidTopologyError struct{ msg string }

func (e *invalidTopologyError) Error() string { return e.msg }

// topicConfigError is a topology the topics do not fit now.
type topicConfigError struct{ status streamsStatus }

func (e *topicConfigError) Error() string { return e.status.detail }

// topologyHash summarizes the metadata of the topics a topology needs, so
// that a change of them (created, deleted, repartitioned) is noticed, as
// Kafka's metadata hash.
func topologyHash(t *streamsTopology, topics map[string]TopicInfo) int64 {
	names := requiredTopics(t)
	h := fnv.New64a()
	var buf [4]byte
	for _, n := range names {
		info, ok := topics[n]
		if !ok {
			continue
		}
		h.Write([]byte(n))
		h.Write(info.ID[:])
		binary.BigEndian.PutUint32(buf[:], uint32(info.Partitions))
		h.Write(buf[:])
	}
	return int64(h.Sum64())
}

// requiredTopics lists, sorted, the source, repartition source and
// changelog topics of a topology.
func requiredTopics(t *streamsTopology) []string {
	var out []string
	for _, s := range t.subtopologies {
		out = append(out, s.sourceTopics...)
		for _, r := range s.repartitionSourceTopics {
			out = append(out, r.name)
		}
		for _, c := range s.changelogTopics {
			out = append(out, c.name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// configureTopology resolves t against topics, as InternalTopicManager.
// configureTopics. An error is an invalid topology.
func configureTopology(t *streamsTopology, topics map[string]TopicInfo) (*configuredTopology, error) {
	c := &configuredTopology{epoch: t.epoch, hash: topologyHash(t, topics)}
	decided := map[string]int32{}
	count := func(topic string) (int32, bool) {
		if info, ok := topics[topic]; ok {
			return info.Partitions, true
		}
		n, ok := decided[topic]
		return n, ok
	}
	err := func() error {
		// Clients may list repartition topics among the source topics
		// too; those are created, not missing.
		repartition := map[string]bool{}
		for _, s := range t.subtopologies {
			for _, r := range s.repartitionSourceTopics {
				repartition[r.name] = true
			}
		}
		var missing []string
		for _, s := range t.subtopologies {
			for _, src := range s.sourceTopics {
				if _, ok := topics[src]; !ok && !repartition[src] {
					missing = append(missing, src)
				}
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			missing = slices.Compact(missing)
			return &topicConfigError{streamsStatus{statusMissingSourceTopics, "Source topics " + strings.Join(missing, ", ") + " are missing."}}
		}
		if err := decideRepartitionCounts(t, count, decided); err != nil {
			return err
		}
		if err := enforceCopartitioning(t, count, decided); err != nil {
			return err
		}
		// Changelog topics have as many partitions as their subtopology
		// has tasks.
		for _, s := range t.subtopologies {
			n, err := maxSourcePartitions(&s, count)
			if err != nil {
				return err
			}
			for _, cl := range s.changelogTopics {
				decided[cl.name] = n
			}
		}
		return nil
	}()
	if err != nil {
		if tc, ok := err.(*topicConfigError); ok {
			c.problem = &tc.status
			return c, nil
		}
		return nil, err
	}
	c.partitions = decided
	c.tasks = make(map[string]int32, len(t.subtopologies))
	for _, s := range t.subtopologies {
		n, err := maxSourcePartitions(&s, count)
		if err != nil {
			return nil, err
		}
		c.tasks[s.id] = n
	}
	// The internal topics to create, and those that exist with other
	// partition counts.
	toCreate := map[string]InternalTopic{}
	for _, s := range t.subtopologies {
		for _, list := range [][]streamsTopicInfo{s.repartitionSourceTopics, s.changelogTopics} {
			for _, it := range list {
				n := it.partitions
				if n == 0 {
					n = decided[it.name]
				}
				rf := it.rf
				if rf == 0 {
					rf = -1
				}
				cfg := make(map[string]string, len(it.configs))
				for _, kv := range it.configs {
					cfg[kv[0]] = kv[1]
				}
				toCreate[it.name] = InternalTopic{Name: it.name, Partitions: n, ReplicationFactor: rf, Configs: cfg}
			}
		}
	}
	for _, name := range requiredTopics(t) {
		info, ok := topics[name]
		if !ok {
			continue
		}
		if want, internal := toCreate[name]; internal {
			delete(toCreate, name)
			if info.Partitions != want.Partitions {
				c.tasks = nil
				c.problem = &streamsStatus{statusIncorrectlyPartitioned, fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d", name, want.Partitions, info.Partitions)}
				return c, nil
			}
		}
	}
	if len(toCreate) > 0 {
		names := slices.Sorted(maps.Keys(toCreate))
		for _, n := range names {
			c.toCreate = append(c.toCreate, toCreate[n])
		}
		c.problem = &streamsStatus{statusMissingInternalTopics, "Internal topics are missing: [" + strings.Join(names, ", ") + "]"}
	}
	return c, nil
}

// maxSourcePartitions is the number of tasks of a subtopology: the most
// partitions of its source and repartition source topics.
func maxSourcePartitions(s *streamsSubtopology, count func(string) (int32, bool)) (int32, error) {
	var n int32
	found := false
	for _, src := range s.sourceTopics {
		if c, ok := count(src); ok {
			n, found = max(n, c), true
		}
	}
	for _, r := range s.repartitionSourceTopics {
		c, ok := count(r.name)
		if !ok {
			return 0, &invalidTopologyError{"Number of partitions must be set for topic " + r.name}
		}
		n, found = max(n, c), true
	}
	if !found {
		return 0, &invalidTopologyError{"No source topics found for subtopology " + s.id}
	}
	return n, nil
}

// decideRepartitionCounts gives every repartition topic its partition
// count: the one the topology fixes, or else the most partitions of the
// source topics of the subtopology writing to it, iterating until every
// count is known (RepartitionTopics.setup).
func decideRepartitionCounts(t *streamsTopology, count func(string) (int32, bool), decided map[string]int32) error {
	for _, s := range t.subtopologies {
		for _, r := range s.repartitionSourceTopics {
			if r.partitions != 0 {
				decided[r.name] = r.partitions
			}
		}
	}
	for {
		needed, progress := false, false
		for _, s := range t.subtopologies {
			for _, sink := range s.repartitionSinkTopics {
				if _, ok := decided[sink]; ok {
					continue
				}
				var n int32
				known := false
				for _, r := range s.repartitionSourceTopics {
					if c, ok := decided[r.name]; ok && (!known || c > n) {
						n, known = c, true
					}
				}
				for _, src := range s.sourceTopics {
					if c, ok := count(src); ok && (!known || c > n) {
						n, known = c, true
					}
				}
				if !known {
					needed = true
					continue
				}
				decided[sink] = n
				progress = true
			}
		}
		if !needed {
			break
		}
		if !progress {
			return &invalidTopologyError{"Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."}
		}
	}
	for _, s := range t.subtopologies {
		for _, r := range s.repartitionSourceTopics {
			if _, ok := decided[r.name]; !ok {
				return &invalidTopologyError{"Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."}
			}
		}
	}
	return nil
}

// enforceCopartitioning makes the topics of each copartition group agree
// on their partition count, as CopartitionedTopicsEnforcer: repartition
// topics the topology leaves open take the count of the group's other
// topics, which must all be equal.
func enforceCopartitioning(t *streamsTopology, count func(string) (int32, bool), decided map[string]int32) error {
	fixed, flexible := map[string]bool{}, map[string]bool{}
	for _, s := range t.subtopologies {
		for _, r := range s.repartitionSourceTopics {
			if r.partitions != 0 {
				fixed[r.name] = true
			} else {
				flexible[r.name] = true
			}
		}
	}
	for _, s := range t.subtopologies {
		for _, cg := range s.copartitionGroups {
			var topics []string
			for _, i := range cg.sourceTopics {
				if int(i) < 0 || int(i) >= len(s.sourceTopics) {
					return &invalidTopologyError{fmt.Sprintf("Copartition group of subtopology %s names source topic index %d out of range.", s.id, i)}
				}
				topics = append(topics, s.sourceTopics[i])
			}
			for _, i := range cg.repartitionSourceTopics {
				if int(i) < 0 || int(i) >= len(s.repartitionSourceTopics) {
					return &invalidTopologyError{fmt.Sprintf("Copartition group of subtopology %s names repartition source topic index %d out of range.", s.id, i)}
				}
				topics = append(topics, s.repartitionSourceTopics[i].name)
			}
			slices.Sort(topics)
			topics = slices.Compact(topics)
			if len(topics) == 0 {
				continue
			}
			repart, other := map[string]int32{}, map[string]int32{}
			for _, tp := range topics {
				n, ok := count(tp)
				if !ok {
					return &invalidTopologyError{"Number of partitions is not set for topic: " + tp}
				}
				if fixed[tp] || flexible[tp] {
					repart[tp] = n
				} else {
					other[tp] = n
				}
			}
			var use int32
			switch {
			case len(other) == 0:
				var fixedNames []string
				for tp := range repart {
					if fixed[tp] {
						fixedNames = append(fixedNames, tp)
					}
				}
				if len(fixedNames) > 0 {
					slices.Sort(fixedNames)
					use = repart[fixedNames[0]]
					for _, tp := range fixedNames {
						if repart[tp] != use {
							return &topicConfigError{streamsStatus{statusIncorrectlyPartitioned, "Following topics do not have the same number of partitions: [" + describeCounts(repart) + "]"}}
						}
					}
				} else {
					for _, n := range repart {
						use = max(use, n)
					}
				}
			default:
				first := true
				for _, n := range other {
					if first {
						use, first = n, false
					} else if n != use {
						return &topicConfigError{streamsStatus{statusIncorrectlyPartitioned, "Following topics do not have the same number of partitions: [" + describeCounts(other) + "]"}}
					}
				}
			}
			for tp, n := range repart {
				if fixed[tp] && n != use {
					return &topicConfigError{streamsStatus{statusIncorrectlyPartitioned, fmt.Sprintf("Number of partitions [%d] of repartition topic [%s] doesn't match number of partitions [%d] of the source topic.", n, tp, use)}}
				}
				decided[tp] = use
			}
		}
	}
	return nil
}

func describeCounts(m map[string]int32) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
