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
// a standby of the task, if it has room, or else to the least loaded
// member. Each task of a stateful subtopology then gets standbys standby
// replicas on other processes than the one running it, preferring the
// members that already had it as standby. Warm-up tasks are not assigned.
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
	leastLoaded := func(ok func(id string) bool) string {
		best := ""
		for _, id := range ids {
			if ok != nil && !ok(id) {
				continue
			}
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	// Then the others, to a previous standby holder with room, else to
	// the least loaded member.
	for _, t := range all {
		if activeOwner[t] != "" {
			continue
		}
		id := leastLoaded(func(id string) bool { return members[id].assigned.standby.has(t.sub, t.partition) && load[id] < quota })
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
			id := leastLoaded(func(id string) bool {
				return free(id) && members[id].assigned.standby.has(t.sub, t.partition)
			})
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
