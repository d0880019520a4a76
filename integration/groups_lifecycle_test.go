package integration

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	grpLifecycleRecords    = 50_000
	grpLifecyclePartitions = 12
)

// TestGroupsClassicLifecycle runs franz-go groups of the classic protocol,
// eager (range) and cooperative (cooperative-sticky), through a member's
// whole life: three join, one leaves cleanly, one is killed (its session
// times out), one joins late; see grpLifecycle.
func TestGroupsClassicLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		protocol string
	}{
		{"eager-range", kgo.RangeBalancer(), "range"},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			grpLifecycle(t, "classic", tc.protocol, kgo.Balancers(tc.balancer))
		})
	}
}

// TestGroupsKIP848Lifecycle is TestGroupsClassicLifecycle with the KIP-848
// consumer protocol: the broker assigns, members reconcile through
// ConsumerGroupHeartbeat, and the killed member is fenced after
// group.consumer.session.timeout.ms.
func TestGroupsKIP848Lifecycle(t *testing.T) {
	t.Parallel()
	grpLifecycle(t, "consumer", "", kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
}

// grpLifecycle: 50,000 records over 12 partitions; members a, b and c join
// and each processes its share, b leaves cleanly, c is killed between
// processing a batch and committing it, and d joins while c's session is
// still running. Every record must be processed and committed; a record
// may be processed twice only if the processing before was never covered
// by an acknowledged commit (the ledger checks each one), and the records
// c processed last must be processed again by the survivors. groupType is
// the type ListGroups must report; protocol, if set, the classic protocol
// DescribeGroups must report.
func grpLifecycle(t *testing.T, groupType, protocol string, opts ...kgo.Opt) {
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	topic, group := "life", "life-group"
	createTopic(t, p.addr, topic, grpLifecyclePartitions)
	ends := grpProduce(t, p.addr, topic, grpLifecycleRecords)
	adm := kadm.NewClient(newClient(t, p.addr))
	start := time.Now()

	l := newGrpLedger()
	member := func(name string, quota int64) *grpMember {
		m := grpNewMember(t, p.addr, name, group, topic, l, opts...)
		m.quota.Store(quota)
		return m.start()
	}
	atLeast := func(n int64, ms ...*grpMember) func() bool {
		return func() bool {
			for _, m := range ms {
				if m.processed.Load() < n {
					return false
				}
			}
			return true
		}
	}

	// 1. Three members join; each processes some records. A quota per
	// member keeps the first to join from taking everything alone.
	a, b, c := member("a", 1500), member("b", 1500), member("c", 1500)
	grpWaitFor(t, 60*time.Second, "a, b and c to process 1,500 records each", atLeast(1500, a, b, c))
	if groupType == "classic" {
		d := grpDescribe(t, adm, group)
		if d.State != "Stable" && d.State != "PreparingRebalance" && d.State != "CompletingRebalance" || len(d.Members) != 3 {
			t.Fatalf("group with a, b, c: state %s, %d members", d.State, len(d.Members))
		}
	}

	// 2. b leaves cleanly; a and c take over its partitions.
	b.leave(t)
	a.quota.Store(4000)
	c.quota.Store(4000)
	grpWaitFor(t, 60*time.Second, "a and c to process 4,000 records each", atLeast(4000, a, c))

	// 3. c dies between processing a batch and committing it, and d
	// joins late, while c's session still runs.
	c.killNext.Store(true)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("c did not get a batch to die with")
	}
	killed := c.killedBatch()
	if len(killed) == 0 {
		t.Fatal("c died with no batch")
	}
	d := member("d", math.MaxInt64)
	a.quota.Store(math.MaxInt64)

	// 4. Everything is processed and committed, c's last batch by a or d
	// after c's session ran out.
	grpWaitFor(t, 90*time.Second, "commits to reach the end offsets", func() bool { return l.committedTo(ends) })
	elapsed := time.Since(start)

	// ListGroups reports the protocol the members used.
	listed, err := adm.ListGroups(testContext(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || lg.GroupType != groupType || lg.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v (present %v), want group type %s, protocol type consumer", lg, ok, groupType)
	}
	if protocol != "" {
		if desc := grpDescribe(t, adm, group); desc.Protocol != protocol || desc.State != "Stable" || len(desc.Members) != 2 {
			t.Fatalf("DescribeGroups after c's session ran out: protocol %q, state %s, %d members; want %s, Stable, 2 (a and d)",
				desc.Protocol, desc.State, len(desc.Members), protocol)
		}
	}
	if groupType == "consumer" {
		// c's session has run out: a and d own every partition.
		grpWaitFor(t, 30*time.Second, "the consumer group to settle on a and d", func() bool {
			dcg, err := adm.DescribeConsumerGroups(testContext(t, 30*time.Second), group)
			if err != nil {
				return false
			}
			g := dcg[group]
			return g.Err == nil && len(g.Members) == 2 && len(g.AssignedPartitions()[topic]) == grpLifecyclePartitions
		})
	}
	a.leave(t)
	d.leave(t)

	s := l.verify(t, ends)
	if s.distinct != grpLifecycleRecords {
		t.Fatalf("%d distinct records processed, want %d", s.distinct, grpLifecycleRecords)
	}
	for _, k := range killed {
		if !s.dupRecords[k] {
			t.Fatalf("record %v, processed by c and never committed, was not processed again", k)
		}
	}
	// The window: each duplicate is a processing no acknowledged commit
	// covered (verify checked that), so duplicates are bounded by c's lost
	// batch plus the records of commits that failed.
	if s.dups != s.uncovered["a"]+s.uncovered["b"]+s.uncovered["c"]+s.uncovered["d"] {
		t.Fatalf("%d duplicates but %v processings uncovered by commits", s.dups, s.uncovered)
	}
	if s.uncovered["c"] < len(killed) {
		t.Fatalf("c's lost batch is %d records but only %d of c's processings are uncovered", len(killed), s.uncovered["c"])
	}
	if s.perMember["d"] == 0 {
		t.Fatal("d, the late joiner, processed nothing")
	}
	if got := grpCommitted(t, p.addr, group, topic); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Fatalf("committed offsets %v, end offsets %v", got, ends)
	}
	t.Logf("%s: %d records in %v; processed by member %v; duplicates %d (c's lost batch %d, uncovered %v, failed commits %d)",
		t.Name(), s.distinct, elapsed.Round(time.Millisecond), s.perMember, s.dups, len(killed), s.uncovered, s.failed)
	if groupType == "classic" {
		if desc := grpDescribe(t, adm, group); desc.State != "Empty" || len(desc.Members) != 0 {
			t.Fatalf("after everyone left: state %s, %d members", desc.State, len(desc.Members))
		}
	}
}
