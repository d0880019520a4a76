package group

import (
	"cmp"
	"slices"
)

// streamsAssignorName is the one task assignor Gregor serves, Kafka's
// default ("sticky").
const streamsAssignorName = "sticky"

// streamsTask is one task: a subtopology and a partition.
type streamsTask struct {
	sub       string
	partition int32
}

// assignStreamsTasks computes a target assignment of tasks to members, after
// Kafka's StickyTaskAssignor: active tasks stay with the member that owns
// them as long as it holds no more than its share (the total divided by the
// members, rounded up); the others go to a member of the process that held
// a standby of the task or reported an offset for it, if it has room, or
// else to the least loaded member. Each task of a stateful subtopology then
// gets standbys standby replicas on other processes than the one running
// it, preferring those same candidates. Kafka 4.4 ranks the candidates of
// a task as its StickyTaskAssignor does (standbyCandidates); among equally
// loaded candidates the better ranked one wins. Warm-up tasks are not
// assigned: Kafka 4.4's AssignmentRefiner, where they would be added,
// returns the target unchanged.
func assignStreamsTasks(members map[string]*streamsMember, tasks map[string]int32, stateful map[string]bool, standbys int) map[string]tasksTuple {
	out := make(map[string]tasksTuple, len(members))
	if len(members) == 0 {
		return out
	}
	ids := sortedKeys(members)
	for _, id := range ids {
		out[id] = emptyTasks()
	}
	var all []streamsTask
	for _, sub := range sortedKeys(tasks) {
		for p := range tasks[sub] {
			all = append(all, streamsTask{sub, p})
		}
	}
	if len(all) == 0 {
		return out
	}
	quota := (len(all) + len(ids) - 1) / len(ids)
	load := make(map[string]int, len(ids))
	activeOwner := make(map[streamsTask]string, len(all))

	// Keep the active tasks members own, within their share.
	for _, id := range ids {
		m := members[id]
		for _, sub := range sortedKeys(m.assigned.active) {
			n, ok := tasks[sub]
			if !ok {
				continue
			}
			for _, p := range m.assigned.active[sub] {
				t := streamsTask{sub, p}
				if p >= n || activeOwner[t] != "" || load[id] >= quota {
					continue
				}
				activeOwner[t] = id
				out[id].active.add(sub, p)
				load[id]++
			}
		}
	}
	ranked := standbyCandidates(members, ids)
	leastLoadedOf := func(cands []string, ok func(id string) bool) string {
		best := ""
		for _, id := range cands {
			if ok != nil && !ok(id) {
				continue
			}
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	leastLoaded := func(ok func(id string) bool) string { return leastLoadedOf(ids, ok) }
	// Then the others, to a previous standby holder with room, else to
	// the least loaded member.
	for _, t := range all {
		if activeOwner[t] != "" {
			continue
		}
		id := leastLoadedOf(ranked[t], func(id string) bool { return load[id] < quota })
		if id == "" {
			id = leastLoaded(nil)
		}
		activeOwner[t] = id
		out[id].active.add(t.sub, t.partition)
		load[id]++
	}

	// Standby replicas of stateful tasks, on processes without a copy.
	if standbys <= 0 {
		return out
	}
	for _, t := range all {
		if !stateful[t.sub] {
			continue
		}
		copies := map[string]bool{members[activeOwner[t]].processID: true}
		for range standbys {
			free := func(id string) bool { return !copies[members[id].processID] }
			id := leastLoadedOf(ranked[t], free)
			if id == "" {
				id = leastLoaded(free)
			}
			if id == "" {
				break // fewer processes than replicas: Kafka leaves them out too
			}
			copies[members[id].processID] = true
			out[id].standby.add(t.sub, t.partition)
			load[id]++
		}
	}
	return out
}

// standbyCandidates lists, per task, the members that hold it as a standby
// or reported a changelog offset for it (TaskOffsets in their heartbeats:
// state they keep locally), best first: current standby holders before the
// others, then the greater offset first, as Kafka 4.4's StickyTaskAssignor
// ranks them. A member reporting an offset for a task it holds as standby
// is listed once, as a standby holder with that offset.
func standbyCandidates(members map[string]*streamsMember, ids []string) map[streamsTask][]string {
	type candidate struct {
		id        string
		isStandby bool
		offset    int64
	}
	byTask := make(map[streamsTask][]candidate)
	for _, id := range ids {
		m := members[id]
		reported := make(map[streamsTask]int64, len(m.taskOffsets))
		for _, o := range m.taskOffsets {
			reported[streamsTask{o.sub, o.partition}] = o.offset
		}
		for _, t := range sortedTasks(m.assigned.standby) {
			byTask[t] = append(byTask[t], candidate{id, true, reported[t]})
		}
		for _, o := range m.taskOffsets {
			t := streamsTask{o.sub, o.partition}
			if m.assigned.standby.has(t.sub, t.partition) {
				continue
			}
			byTask[t] = append(byTask[t], candidate{id, false, o.offset})
		}
	}
	out := make(map[streamsTask][]string, len(byTask))
	for t, cs := range byTask {
		// Stable, so equal candidates stay in member id order.
		slices.SortStableFunc(cs, func(a, b candidate) int {
			if a.isStandby != b.isStandby {
				if a.isStandby {
					return -1
				}
				return 1
			}
			return cmp.Compare(b.offset, a.offset)
		})
		for _, c := range cs {
			out[t] = append(out[t], c.id)
		}
	}
	return out
}

// sortedTasks lists a task set's tasks in order.
func sortedTasks(s taskSet) []streamsTask {
	var out []streamsTask
	for sub, ps := range s {
		for _, p := range ps {
			out = append(out, streamsTask{sub, p})
		}
	}
	slices.SortFunc(out, func(a, b streamsTask) int {
		return cmp.Or(cmp.Compare(a.sub, b.sub), cmp.Compare(a.partition, b.partition))
	})
	return out
}
