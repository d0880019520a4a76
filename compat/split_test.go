package compat

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// group.split: two members of one group, running at the same time, share
// a 4-partition topic. Every client does the same: start both members,
// wait until each holds a non-empty part of an assignment that covers
// the topic without overlap, only then write splitCount records (value
// "i" to partition i % splitPartitions), and consume with a commit after
// each record is processed until all are committed. Writing after the
// group is stable makes the check sharp: with no rebalance while
// consuming, a partition read by both members, or a record read twice,
// is a fault, not a client's at-least-once window. A rebalance while
// consuming (on an idle loopback broker with 30 s session timeouts) fails
// the scenario as well. The scripts under python/ and node/ follow the
// same definitions.
const (
	splitPartitions = 4
	splitCount      = 200
	// splitSessionMs is every member's session timeout: generous, so
	// that a loaded machine does not expire a member mid-run.
	splitSessionMs = 30000
)

// splitGroup is the group a client's group.split members join.
func splitGroup(topic string) string { return topic + "-group" }

// splitAssign tracks each member's current assignment as its client
// reports it (assigned, revoked, lost), and how often it changed.
type splitAssign struct {
	mu      sync.Mutex
	parts   [2]map[int32]bool
	changes int
}

// add records partitions assigned to member m (incremental under a
// cooperative protocol, the whole assignment under an eager one).
func (a *splitAssign) add(m int, ps []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parts[m] == nil {
		a.parts[m] = map[int32]bool{}
	}
	for _, p := range ps {
		if !a.parts[m][p] {
			a.parts[m][p] = true
			a.changes++
		}
	}
}

// remove records partitions revoked from or lost by member m.
func (a *splitAssign) remove(m int, ps []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ps {
		if a.parts[m][p] {
			delete(a.parts[m], p)
			a.changes++
		}
	}
}

// set replaces member m's assignment (a client that reports whole
// assignments per generation).
func (a *splitAssign) set(m int, ps []int32) {
	a.mu.Lock()
	old := a.parts[m]
	a.mu.Unlock()
	var gone []int32
	for p := range old {
		if !slices.Contains(ps, p) {
			gone = append(gone, p)
		}
	}
	a.remove(m, gone)
	a.add(m, ps)
}

// snapshot returns both members' assignments, sorted, and the number of
// changes so far.
func (a *splitAssign) snapshot() ([2][]int32, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [2][]int32
	for m, ps := range a.parts {
		for p := range ps {
			out[m] = append(out[m], p)
		}
		slices.Sort(out[m])
	}
	return out, a.changes
}

// validSplit says why two assignments are not yet a split of the topic:
// both non-empty, disjoint, and together every partition.
func validSplit(sets [2][]int32) error {
	owner := map[int32]int{}
	for m, ps := range sets {
		if len(ps) == 0 {
			return fmt.Errorf("member %d has no partitions (assignments %v)", m, sets)
		}
		for _, p := range ps {
			if o, ok := owner[p]; ok {
				return fmt.Errorf("partition %d assigned to members %d and %d (assignments %v)", p, o, m, sets)
			}
			owner[p] = m
		}
	}
	for p := int32(0); p < splitPartitions; p++ {
		if _, ok := owner[p]; !ok {
			return fmt.Errorf("partition %d assigned to neither member (assignments %v)", p, sets)
		}
	}
	return nil
}

// waitSplit polls the clients' own view of their assignments until they
// split the topic, and returns it with the change count at that point.
func (a *splitAssign) waitSplit(ctx context.Context) ([2][]int32, int, error) {
	var sets [2][]int32
	var changes int
	err := waitFor(ctx, "wait for both members to hold a part of the topic", func() error {
		sets, changes = a.snapshot()
		return validSplit(sets)
	})
	return sets, changes, err
}

// stillSplit fails when the assignment changed after the group was
// stable at (want, changes): a rebalance while consuming.
func (a *splitAssign) stillSplit(want [2][]int32, changes int) error {
	got, now := a.snapshot()
	if now != changes {
		return fmt.Errorf("the group rebalanced while consuming: assignments %v when the records were written, %v at the end (%d changes)",
			want, got, now-changes)
	}
	return nil
}

// splitTally counts what both members processed and committed.
type splitTally struct {
	mu        sync.Mutex
	seen      map[string]int
	read      [2]map[int32]int
	committed int
}

func newSplitTally() *splitTally {
	return &splitTally{seen: map[string]int{}, read: [2]map[int32]int{{}, {}}}
}

// record notes that member m processed value from partition p.
func (t *splitTally) record(m int, p int32, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[value]++
	t.read[m][p]++
}

// commit notes that n processed records were committed.
func (t *splitTally) commit(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.committed += n
}

// waitCommitted waits until every record written was processed and
// committed, or until errc delivers a member's failure.
func (t *splitTally) waitCommitted(ctx context.Context, errc <-chan error) error {
	for {
		t.mu.Lock()
		c := t.committed
		t.mu.Unlock()
		if c >= splitCount {
			return nil
		}
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%d of %d records processed and committed: %w", c, splitCount, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// check wants each member to have read a non-empty set of partitions
// within its assignment, the two sets disjoint, and every record read
// exactly once across both.
func (t *splitTally) check(assigned [2][]int32) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var note []string
	for m, parts := range t.read {
		if len(parts) == 0 {
			return "", fmt.Errorf("member %d read nothing (assigned %v)", m, assigned[m])
		}
		var ps []string
		for p, n := range parts {
			if !slices.Contains(assigned[m], p) {
				return "", fmt.Errorf("member %d read %d records of partition %d, outside its assignment %v", m, n, p, assigned[m])
			}
			if o := t.read[1-m][p]; o > 0 {
				return "", fmt.Errorf("partition %d read by both members (%d and %d records) without a rebalance", p, t.read[0][p], t.read[1][p])
			}
			ps = append(ps, strconv.Itoa(int(p)))
		}
		slices.Sort(ps)
		note = append(note, fmt.Sprintf("member %d read partitions %s", m, strings.Join(ps, ",")))
	}
	total := 0
	for v, n := range t.seen {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= splitCount {
			return "", fmt.Errorf("read a record %q that was not written", v)
		}
		total += n
	}
	for i := 0; i < splitCount; i++ {
		if n := t.seen[strconv.Itoa(i)]; n != 1 {
			return "", fmt.Errorf("record %d read %d times across the two members", i, n)
		}
	}
	if total != splitCount {
		return "", fmt.Errorf("read %d records, want %d", total, splitCount)
	}
	return strings.Join(note, "; "), nil
}

// splitPostCheck wants the group's committed offsets at the end of every
// partition: each member committed what it processed before it left.
func splitPostCheck(ctx context.Context, e *env, topic string) error {
	ends, err := e.endOffsets(ctx, topic)
	if err != nil {
		return err
	}
	group := splitGroup(topic)
	offs, err := e.adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	for p := int32(0); p < splitPartitions; p++ {
		o, ok := offs.Lookup(topic, p)
		switch {
		case !ok:
			return fmt.Errorf("group %s has no committed offset for partition %d (end %d)", group, p, ends[p])
		case o.Err != nil:
			return fmt.Errorf("group %s partition %d: %w", group, p, o.Err)
		case o.At != ends[p] || ends[p] != splitCount/splitPartitions:
			return fmt.Errorf("group %s committed %d on partition %d, want its end %d (%d records)", group, o.At, p, ends[p], splitCount/splitPartitions)
		}
	}
	return nil
}

// describeSplit is the broker's view of the group's assignment, for a
// client that does not expose its own (kafka-go's Reader): DescribeGroups
// must show the group Stable with two members, told apart by client id.
// It also returns the member ids, to notice a rebalance later.
func (e *env) describeSplit(ctx context.Context, group, topic string, clientIDs [2]string) ([2][]int32, [2]string, error) {
	var sets [2][]int32
	var ids [2]string
	dg, err := e.adm.DescribeGroups(ctx, group)
	if err != nil {
		return sets, ids, fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := dg[group]
	switch {
	case !ok:
		return sets, ids, fmt.Errorf("describe group %s: not in the answer", group)
	case g.Err != nil:
		return sets, ids, fmt.Errorf("describe group %s: %w", group, g.Err)
	case g.State != "Stable" || len(g.Members) != 2:
		return sets, ids, fmt.Errorf("group %s is %s with %d members, want Stable with 2", group, g.State, len(g.Members))
	}
	for _, mem := range g.Members {
		m := slices.Index(clientIDs[:], mem.ClientID)
		if m < 0 || ids[m] != "" {
			return sets, ids, fmt.Errorf("group %s: member %s has client id %q, want one each of %v", group, mem.MemberID, mem.ClientID, clientIDs)
		}
		ids[m] = mem.MemberID
		a, ok := mem.Assigned.AsConsumer()
		if !ok {
			return sets, ids, fmt.Errorf("group %s: member %s's assignment is not a consumer assignment", group, mem.MemberID)
		}
		for _, t := range a.Topics {
			if t.Topic == topic {
				sets[m] = append(sets[m], t.Partitions...)
			}
		}
		slices.Sort(sets[m])
	}
	return sets, ids, validSplit(sets)
}

// TestSplitChecks feeds group.split's checks the faults they exist to
// catch, without a broker.
func TestSplitChecks(t *testing.T) {
	for _, c := range []struct {
		sets [2][]int32
		ok   bool
	}{
		{[2][]int32{{0, 1}, {2, 3}}, true},
		{[2][]int32{{0, 2, 3}, {1}}, true},
		{[2][]int32{{0, 1, 2, 3}, nil}, false},    // one member idle
		{[2][]int32{{0, 1, 2}, {2, 3}}, false},    // overlap
		{[2][]int32{{0}, {2, 3}}, false},          // partition 1 unowned
		{[2][]int32{{0, 1, 2, 3}, {0, 1}}, false}, // an eager member's stale full set
		{[2][]int32{{}, {0, 1, 2, 3}}, false},
	} {
		if err := validSplit(c.sets); (err == nil) != c.ok {
			t.Errorf("validSplit(%v) = %v, want ok=%v", c.sets, err, c.ok)
		}
	}

	a := &splitAssign{}
	a.add(0, []int32{0, 1, 2, 3}) // the first member alone
	if _, _, err := a.waitSplit(canceled()); err == nil {
		t.Fatal("one member holding everything is a split")
	}
	a.remove(0, []int32{2, 3}) // cooperative: revoke two
	a.add(1, []int32{2, 3})
	sets, changes, err := a.waitSplit(context.Background())
	if err != nil || changes != 8 {
		t.Fatalf("split %v after %d changes: %v", sets, changes, err)
	}
	if err := a.stillSplit(sets, changes); err != nil {
		t.Fatal(err)
	}
	a.set(1, nil) // an eager rebalance handing back the same partitions
	a.set(1, []int32{2, 3})
	if err := a.stillSplit(sets, changes); err == nil {
		t.Fatal("a rebalance while consuming went unnoticed")
	}

	fill := func(skip int, dup int, member1 int32) *splitTally {
		tl := newSplitTally()
		for i := 0; i < splitCount; i++ {
			p := int32(i % splitPartitions)
			m := 0
			if p >= 2 {
				m = 1
			}
			if i == skip {
				continue
			}
			tl.record(m, p, strconv.Itoa(i))
			if i == dup {
				tl.record(m, p, strconv.Itoa(i))
			}
		}
		if member1 >= 0 {
			tl.record(1, member1, "3")
		}
		return tl
	}
	split := [2][]int32{{0, 1}, {2, 3}}
	if _, err := fill(-1, -1, -1).check(split); err != nil {
		t.Fatalf("a clean run fails: %v", err)
	}
	for name, tl := range map[string]*splitTally{
		"a record missing":                   fill(7, -1, -1),
		"a record read twice":                fill(-1, 9, -1),
		"member 1 read a member 0 partition": fill(-1, -1, 0),
		"no member read anything":            newSplitTally(),
	} {
		if _, err := tl.check(split); err == nil {
			t.Errorf("%s passes the check", name)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
