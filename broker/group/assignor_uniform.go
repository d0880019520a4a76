package group

import (
	"cmp"
	"slices"
)

// uniformAssignor is the default server-side assignor, after Kafka's
// UniformAssignor: it spreads the partitions of the subscribed topics so
// that members' partition counts differ as little as their subscriptions
// allow, and moves as few partitions as it can from one target assignment
// to the next (it is sticky).
//
// It works in three steps over members in member id order and topics in
// name order, so equal inputs give equal outputs:
//  1. every member keeps the partitions of its current target that still
//     exist and that it still subscribes to;
//  2. every other partition goes to the least loaded member subscribed to
//     its topic;
//  3. while some partition's owner has at least two more partitions than
//     the least loaded member subscribed to its topic, the partition moves
//     there, from the most loaded members first and partitions handed out
//     in step 2 before kept ones. Each move lowers the sum of squared counts, so this ends; with
//     identical subscriptions it ends with counts at most one apart.
type uniformAssignor struct{}

func (uniformAssignor) name() string { return uniformAssignorName }

func (uniformAssignor) assign(spec assignSpec) map[string]tpSet {
	n := len(spec.members)
	out := make(map[string]tpSet, n)
	if n == 0 {
		return out
	}
	// Everything below is indexed: topic i is topics[i], member i is
	// spec.members[i], and a partition is its topic's base plus its number
	// in the flat owner and kept slices. The assignor runs once per target
	// assignment, over up to 10,000 partitions and 1,000 members (issue
	// 17), so it allocates per topic and per member, never per partition.
	topics := spec.sortedTopics()
	index := make(map[topicID]int32, len(topics))
	base := make([]int, len(topics)+1)
	for i, t := range topics {
		index[t] = int32(i)
		base[i+1] = base[i] + int(spec.topics[t])
	}
	total := base[len(topics)]
	owner := make([]int32, total)
	for p := range owner {
		owner[p] = -1
	}
	kept := make([]bool, total)
	count := make([]int, n)

	// memberTopics[i] is member i's subscribed topics that exist, as sorted
	// topic indexes; subscribers[t] is topic t's members, in id order.
	memberTopics := make([][]int32, n)
	subscribers := make([][]int32, len(topics))
	for i, m := range spec.members {
		ts := make([]int32, 0, len(m.topics))
		for _, t := range m.topics {
			if k, ok := index[t]; ok {
				ts = append(ts, k)
			}
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		memberTopics[i] = ts
		for _, k := range ts {
			subscribers[k] = append(subscribers[k], int32(i))
		}
	}

	// 1. Stickiness: keep what is still valid.
	for i, m := range spec.members {
		for t, ps := range m.current {
			k, ok := index[t]
			if !ok {
				continue
			}
			if _, sub := slices.BinarySearch(memberTopics[i], k); !sub {
				continue
			}
			size := int32(base[k+1] - base[k])
			for _, p := range ps {
				if p >= 0 && p < size && owner[base[k]+int(p)] == -1 {
					owner[base[k]+int(p)] = int32(i)
					kept[base[k]+int(p)] = true
					count[i]++
				}
			}
		}
	}

	leastLoaded := func(k int) int32 {
		best := int32(-1)
		for _, i := range subscribers[k] {
			if best == -1 || count[i] < count[best] {
				best = i
			}
		}
		return best
	}

	// 2. Hand out the partitions nobody kept.
	for k := range topics {
		if len(subscribers[k]) == 0 {
			continue
		}
		for p := base[k]; p < base[k+1]; p++ {
			if owner[p] == -1 {
				i := leastLoaded(k)
				owner[p] = i
				count[i]++
			}
		}
	}

	// 3. Balance by single moves from the most loaded members: first the
	// partitions handed out in step 2, then kept ones.
	b := balancer{base: base, owner: owner, count: count, leastLoaded: leastLoaded}
	b.run(func(p int) bool { return !kept[p] })
	b.run(func(int) bool { return true })

	// The result: every member's partitions, topic by topic, carved out of
	// one backing array by a counting sort. Partitions are visited in
	// order, so each list is sorted.
	backing := make([]int32, total)
	next := make([]int, n) // where member i's next partition of the topic goes
	for i, m := range spec.members {
		out[m.id] = make(tpSet, len(memberTopics[i]))
	}
	for k, t := range topics {
		clear(next)
		for p := base[k]; p < base[k+1]; p++ {
			if i := owner[p]; i >= 0 {
				next[i]++
			}
		}
		at := base[k]
		for i, c := range next {
			if c > 0 {
				out[spec.members[i].id][t] = backing[at : at+c : at+c]
			}
			next[i] = at
			at += c
		}
		for p := base[k]; p < base[k+1]; p++ {
			if i := owner[p]; i >= 0 {
				backing[next[i]] = int32(p - base[k])
				next[i]++
			}
		}
	}
	return out
}

// balancer moves partitions between members; partitions are indexes into
// the flat owner slice, topic k holding [base[k], base[k+1]).
type balancer struct {
	base        []int
	owner       []int32
	count       []int
	leastLoaded func(k int) int32
}

// run moves movable partitions from the most loaded members to the least
// loaded member subscribed to their topic, while that lowers the owner's
// count by at least two. A member gives up its last partitions (highest
// topic, highest partition) first, so it keeps the lowest ones.
func (b *balancer) run(movable func(p int) bool) {
	type ref struct {
		k int32 // topic index
		p int32 // index into owner
	}
	owned := make([][]ref, len(b.count))
	k := 0
	for p, i := range b.owner {
		for b.base[k+1] <= p {
			k++
		}
		if i >= 0 && movable(p) {
			owned[i] = append(owned[i], ref{int32(k), int32(p)})
		}
	}
	order := make([]int, len(b.count))
	for i := range order {
		order[i] = i
	}
	// The least loaded subscriber of each topic, found once per pass:
	// counts change only by the one move that ends a pass, and without
	// this the last pass, which moves nothing, asks every partition's
	// topic for it anew, O(members × partitions).
	least := make([]int32, len(b.base)-1)
	for {
		slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(b.count[y], b.count[x]) })
		for t := range least {
			least[t] = -2 // not looked up in this pass
		}
		moved := false
		for _, a := range order {
			refs := owned[a]
			for j := len(refs) - 1; j >= 0; j-- {
				r := refs[j]
				to := least[r.k]
				if to == -2 {
					to = b.leastLoaded(int(r.k))
					least[r.k] = to
				}
				if b.count[to] >= b.count[a]-1 {
					continue
				}
				b.owner[r.p] = to
				b.count[a]--
				b.count[to]++
				owned[a] = slices.Delete(refs, j, j+1)
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			return
		}
	}
}
