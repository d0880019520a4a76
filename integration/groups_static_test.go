package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// grpStaticMember is a franz-go member with a group.instance.id whose
// rebalance callbacks are counted.
type grpStaticMember struct {
	instance string
	cl       *kgo.Client

	mu       sync.Mutex
	assigned []int32 // partitions currently held
	calls    int     // assigned, revoked and lost callbacks
}

func (m *grpStaticMember) snapshot() ([]int32, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.assigned), m.calls
}

func grpStartStatic(t *testing.T, addr, group, topic, instance string) *grpStaticMember {
	t.Helper()
	m := &grpStaticMember{instance: instance}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.calls++
			for _, p := range ps[topic] {
				if add {
					m.assigned = append(m.assigned, p)
				} else {
					m.assigned = slices.DeleteFunc(m.assigned, func(q int32) bool { return q == p })
				}
			}
			slices.Sort(m.assigned)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(instance),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID(instance),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)), kgo.OnPartitionsLost(change(false)))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(cl.Close)
	// The group is managed in the background; poll so the client runs
	// as an application would.
	go func() {
		for {
			fs := cl.PollRecords(context.Background(), 100)
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

// TestGroupsStaticMembershipRestart: three static members (KIP-345) share
// a topic; each in turn restarts with its group.instance.id well within
// its session timeout. The restarted member gets its old partitions back
// in the same generation, under a new member id, and the other members
// see no rebalance: none of their callbacks run and their generation does
// not move. One of the three is the group's leader, so both the leader's
// and a follower's rejoin are covered. The replaced member id is fenced.
func TestGroupsStaticMembershipRestart(t *testing.T) {
	t.Parallel()
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	const topic, group = "static", "static-group"
	createTopic(t, p.addr, topic, 6)
	adm := kadm.NewClient(newClient(t, p.addr))

	members := map[string]*grpStaticMember{}
	names := []string{"s-0", "s-1", "s-2"}
	for _, name := range names {
		members[name] = grpStartStatic(t, p.addr, group, topic, name)
	}
	stable := func() bool {
		d := grpDescribe(t, adm, group)
		if d.State != "Stable" || len(d.Members) != 3 {
			return false
		}
		total := 0
		for _, m := range members {
			a, _ := m.snapshot()
			if len(a) != 2 {
				return false
			}
			total += len(a)
		}
		return total == 6
	}
	grpWaitFor(t, 60*time.Second, "three static members with two partitions each", stable)
	// Range assigns by instance id: s-0 gets 0-1, s-1 2-3, s-2 4-5.
	for i, name := range names {
		if a, _ := members[name].snapshot(); !slices.Equal(a, []int32{int32(2 * i), int32(2*i + 1)}) {
			t.Fatalf("%s holds %v", name, a)
		}
	}

	for _, victim := range names {
		oldID, gen := members[victim].cl.GroupMetadata()
		oldAssigned, _ := members[victim].snapshot()
		type before struct {
			gen   int32
			calls int
		}
		others := map[string]before{}
		for _, name := range names {
			if name != victim {
				_, g := members[name].cl.GroupMetadata()
				_, calls := members[name].snapshot()
				others[name] = before{g, calls}
			}
		}

		// A static member's Close sends no LeaveGroup; the new client
		// with the same instance id takes its place.
		members[victim].cl.Close()
		nm := grpStartStatic(t, p.addr, group, topic, victim)
		members[victim] = nm
		grpWaitFor(t, 30*time.Second, victim+" to get its partitions back", func() bool {
			a, _ := nm.snapshot()
			return len(a) > 0
		})
		if a, _ := nm.snapshot(); !slices.Equal(a, oldAssigned) {
			t.Fatalf("%s restarted with %v, held %v before", victim, a, oldAssigned)
		}
		newID, newGen := nm.cl.GroupMetadata()
		if newGen != gen || newID == oldID {
			t.Fatalf("%s restarted as %s in generation %d; was %s in generation %d (want the same generation, a new id)", victim, newID, newGen, oldID, gen)
		}
		// Several heartbeat intervals: a rebalance would have reached
		// the others by now.
		time.Sleep(1500 * time.Millisecond)
		for name, b := range others {
			_, g := members[name].cl.GroupMetadata()
			_, calls := members[name].snapshot()
			if g != b.gen || calls != b.calls {
				t.Fatalf("restarting %s rebalanced %s: generation %d → %d, callbacks %d → %d", victim, name, b.gen, g, b.calls, calls)
			}
		}
		d := grpDescribe(t, adm, group)
		if d.State != "Stable" || len(d.Members) != 3 {
			t.Fatalf("after restarting %s: state %s, %d members", victim, d.State, len(d.Members))
		}
		for _, dm := range d.Members {
			if dm.InstanceID != nil && *dm.InstanceID == victim && dm.MemberID != newID {
				t.Fatalf("DescribeGroups names %s as %s, the client is %s", victim, dm.MemberID, newID)
			}
		}

		// The old member id is fenced (KIP-345).
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = group, oldID, gen
		hb.InstanceID = kmsg.StringPtr(victim)
		resp, err := hb.RequestWith(testContext(t, 10*time.Second), newClient(t, p.addr))
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.FencedInstanceID {
			t.Fatalf("heartbeat of the replaced member %s: %v, want FENCED_INSTANCE_ID", oldID, err)
		}
	}
}
