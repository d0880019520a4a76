package group

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refUniformAssign is the uniform assignor as it was before its balancer
// kept its order and least loaded subscribers up to date move by move
// (issue 17, session 9), kept to check that the faster form makes the same
// assignments.
func refUniformAssign(spec assignSpec) map[string]tpSet {
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
	b := refBalancer{base: base, owner: owner, count: count, leastLoaded: leastLoaded}
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

// refBalancer is the balancer before it kept its order and least loaded
// subscribers up to date move by move: it sorted the members and scanned
// a topic's subscribers anew after each move.
type refBalancer struct {
	base        []int
	owner       []int32
	count       []int
	leastLoaded func(k int) int32
}

// run moves movable partitions from the most loaded members to the least
// loaded member subscribed to their topic, while that lowers the owner's
// count by at least two. A member gives up its last partitions (highest
// topic, highest partition) first, so it keeps the lowest ones.
func (b *refBalancer) run(movable func(p int) bool) {
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

// TestUniformBalancerSameMoves holds the uniform assignor to the
// assignments of refUniformAssign over random groups: some topics, members
// subscribed to random subsets of them (all to the same, in half the
// cases), and current targets that are a previous assignment with members
// and topics added or removed, or partitions piled on a few members as
// after a burst of joins.
func TestUniformBalancerSameMoves(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 9))
	for c := range 400 {
		nt := 1 + rng.IntN(5)
		topics := map[string]int32{}
		var names []string
		for i := range nt {
			n := fmt.Sprintf("t%d", i)
			topics[n] = int32(1 + rng.IntN(40))
			names = append(names, n)
		}
		same := rng.IntN(2) == 0
		subscribe := func() []string {
			if same {
				return names
			}
			var s []string
			for _, n := range names {
				if rng.IntN(3) > 0 {
					s = append(s, n)
				}
			}
			return s
		}
		members := map[string][]string{}
		for i := range 1 + rng.IntN(30) {
			members[fmt.Sprintf("m%03d", i)] = subscribe()
		}
		current := refUniformAssign(makeSpec(topics, members, nil))
		switch rng.IntN(3) {
		case 0: // members join and leave
			for i := range rng.IntN(10) {
				members[fmt.Sprintf("n%03d", i)] = subscribe()
			}
			for id := range members {
				if rng.IntN(4) == 0 {
					delete(members, id)
				}
			}
		case 1: // a few members hold everything, the others joined since
			var ids []string
			for id := range members {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			pile := map[string]tpSet{}
			for _, s := range current {
				for tid, ps := range s {
					owner := ids[rng.IntN(min(len(ids), 2))]
					if pile[owner] == nil {
						pile[owner] = tpSet{}
					}
					pile[owner].add(tid, ps...)
				}
			}
			current = pile
		case 2: // topics grow
			for n := range topics {
				topics[n] += int32(rng.IntN(10))
			}
		}
		if len(members) == 0 {
			continue
		}
		spec := makeSpec(topics, members, current)
		want := refUniformAssign(spec)
		got := uniformAssignor{}.assign(spec)
		if len(got) != len(want) {
			t.Fatalf("case %d: %d members assigned, want %d", c, len(got), len(want))
		}
		for id, w := range want {
			if !got[id].equal(w) {
				t.Fatalf("case %d: %s got %v, want %v", c, id, got[id], w)
			}
		}
	}
}
