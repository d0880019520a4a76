package group

import (
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

	// 2. Hand out the partitions nobody kept, each to the least loaded
	// subscriber of its topic (the balancer's trees name it).
	b := balancer{base: base, owner: owner, count: count, subscribers: subscribers, memberTopics: memberTopics}
	b.buildTrees()
	for k := range topics {
		if len(subscribers[k]) == 0 {
			continue
		}
		for p := base[k]; p < base[k+1]; p++ {
			if owner[p] == -1 {
				i := b.trees[b.group[k]].least()
				owner[p] = i
				count[i]++
				b.counted(i)
			}
		}
	}

	// 3. Balance by single moves from the most loaded members: first the
	// partitions handed out in step 2, then kept ones.
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
	base         []int
	owner        []int32
	count        []int
	subscribers  [][]int32 // topic k's members, in index order
	memberTopics [][]int32 // member i's topics, in index order

	// Built before step 2 and kept up to date by every count change: topic k's
	// least loaded subscriber is trees[group[k]].least(); topics with the
	// same subscribers share a tree, so members that all subscribe to the
	// same topics (the usual case) have one. member i's trees are
	// memberTrees[treesFrom[i]:treesFrom[i+1]].
	group       []int32
	trees       []leastTree
	treesFrom   []int
	memberTrees []int32
}

// run moves movable partitions from the most loaded members to the least
// loaded member subscribed to their topic, while that lowers the owner's
// count by at least two. A member gives up its last partitions (highest
// topic, highest partition) first, so it keeps the lowest ones. Each pass
// looks at the members from the most loaded, ties in the order of the pass
// before (a stable sort, from member index order), and makes the first
// move it finds.
//
// The members' order and each topic's least loaded subscriber are kept up
// to date move by move, in O(1) and O(log members): sorting the members
// and scanning a topic's subscribers anew after each move cost 181 ms for
// the second target of a burst of 1,000 joins over 10,000 partitions, when
// the first member holds all of them and gives 9,990 away one by one
// (issue 17). TestUniformBalancerSameMoves checks that the moves are those
// of that simpler form.
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
	o := newCountOrder(b.count)
	for {
		// No move raises the highest count, so lowering it here past
		// the lists a move emptied costs O(counts) over the whole run.
		for o.top >= 0 && o.head[o.top] == -1 {
			o.top--
		}
		moved := false
		for c := o.top; c >= 0 && !moved; c-- {
			for a := o.head[c]; a != -1 && !moved; a = o.next[a] {
				refs := owned[a]
				for j := len(refs) - 1; j >= 0; j-- {
					r := refs[j]
					to := b.trees[b.group[r.k]].least()
					if b.count[to] >= b.count[a]-1 {
						continue
					}
					b.owner[r.p] = to
					owned[a] = slices.Delete(refs, j, j+1)
					// a was before every member of its new count,
					// to after every member of its new one.
					o.unlink(a, b.count[a])
					o.unlink(to, b.count[to])
					b.count[a]--
					b.count[to]++
					o.pushFront(a, b.count[a])
					o.pushBack(to, b.count[to])
					b.counted(a)
					b.counted(to)
					moved = true
					break
				}
			}
		}
		if !moved {
			return
		}
	}
}

// countOrder is the members sorted by count, most first, as lists per
// count: moving a member to the front or back of its count's list is the
// stable sort of the whole order after its count changed by one.
type countOrder struct {
	head, tail []int32 // per count: first and last member, -1 for none
	next, prev []int32 // per member
	top        int     // no member has a higher count; -1 when none
}

func newCountOrder(count []int) *countOrder {
	most := 0
	for _, c := range count {
		most = max(most, c)
	}
	o := &countOrder{head: make([]int32, most+2), tail: make([]int32, most+2), next: make([]int32, len(count)), prev: make([]int32, len(count)), top: -1}
	for c := range o.head {
		o.head[c], o.tail[c] = -1, -1
	}
	for i, c := range count {
		o.pushBack(int32(i), c)
	}
	return o
}

func (o *countOrder) unlink(i int32, c int) {
	if o.prev[i] == -1 {
		o.head[c] = o.next[i]
	} else {
		o.next[o.prev[i]] = o.next[i]
	}
	if o.next[i] == -1 {
		o.tail[c] = o.prev[i]
	} else {
		o.prev[o.next[i]] = o.prev[i]
	}
}

func (o *countOrder) pushFront(i int32, c int) {
	o.prev[i], o.next[i] = -1, o.head[c]
	if o.head[c] == -1 {
		o.tail[c] = i
	} else {
		o.prev[o.head[c]] = i
	}
	o.head[c] = i
	o.top = max(o.top, c)
}

func (o *countOrder) pushBack(i int32, c int) {
	o.next[i], o.prev[i] = -1, o.tail[c]
	if o.tail[c] == -1 {
		o.head[c] = i
	} else {
		o.next[o.tail[c]] = i
	}
	o.tail[c] = i
	o.top = max(o.top, c)
}

// buildTrees makes one leastTree per distinct subscriber list.
func (b *balancer) buildTrees() {
	b.group = make([]int32, len(b.subscribers))
	seen := make(map[uint64][]int32) // hash of a subscriber list -> trees
	for k, subs := range b.subscribers {
		b.group[k] = -1
		if len(subs) == 0 {
			continue
		}
		h := uint64(14695981039346656037)
		for _, i := range subs {
			h = (h ^ uint64(i)) * 1099511628211
		}
		for _, g := range seen[h] {
			if slices.Equal(b.trees[g].subs, subs) {
				b.group[k] = g
				break
			}
		}
		if b.group[k] == -1 {
			g := int32(len(b.trees))
			b.trees = append(b.trees, newLeastTree(subs, b.count))
			seen[h] = append(seen[h], g)
			b.group[k] = g
		}
	}
	b.treesFrom = make([]int, len(b.count)+1)
	for i, ts := range b.memberTopics {
		from := len(b.memberTrees)
		for _, k := range ts {
			if g := b.group[k]; g >= 0 && !slices.Contains(b.memberTrees[from:], g) {
				b.memberTrees = append(b.memberTrees, g)
			}
		}
		b.treesFrom[i+1] = len(b.memberTrees)
	}
}

// counted updates the trees of member i after its count changed.
func (b *balancer) counted(i int32) {
	for _, g := range b.memberTrees[b.treesFrom[i]:b.treesFrom[i+1]] {
		b.trees[g].update(i, b.count)
	}
}

// leastTree is a tournament tree over a set of members that names the
// least loaded one (fewest partitions, then lowest index) in O(1), and
// follows a change of one member's count in O(log members).
type leastTree struct {
	subs []int32 // the members, in index order
	// node[1] is the least loaded member; node[len(subs)+j] is subs[j],
	// and every other node is the lesser of its two children.
	node []int32
}

func newLeastTree(subs []int32, count []int) leastTree {
	t := leastTree{subs: subs, node: make([]int32, 2*len(subs))}
	copy(t.node[len(subs):], subs)
	for n := len(subs) - 1; n >= 1; n-- {
		t.node[n] = lesser(t.node[2*n], t.node[2*n+1], count)
	}
	return t
}

func lesser(x, y int32, count []int) int32 {
	if count[y] < count[x] || count[y] == count[x] && y < x {
		return y
	}
	return x
}

func (t *leastTree) least() int32 { return t.node[1] }

// update follows a change of member i's count.
func (t *leastTree) update(i int32, count []int) {
	j, ok := slices.BinarySearch(t.subs, i)
	if !ok {
		return
	}
	for n := (j + len(t.subs)) / 2; n >= 1; n /= 2 {
		t.node[n] = lesser(t.node[2*n], t.node[2*n+1], count)
	}
}
