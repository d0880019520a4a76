package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// simMember is one member of rebalanceSim: what it last heard and when it
// heartbeats next.
type simMember struct {
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
	// ack is set when its last answer changed its assignment: it
	// heartbeats again at once with what it now owns, as the Java consumer
	// after reconciling (and benchcompare -groups).
	ack  bool
	next time.Duration
}

// rebalanceSim drives a group's members through the coordinator on the
// fake clock as benchcompare -groups drives them over the wire: all join
// at time 0, then each heartbeats every interval (their phases spread
// evenly over it), and again at once after an answer that changed its
// assignment. Only the coordinator's own pacing (assignment interval,
// revocation before assignment) shapes the timeline; no CPU or network
// wait does.
type rebalanceSim struct {
	t        testing.TB
	h        *harness
	topics   []string
	members  []*simMember
	hb       time.Duration
	now      time.Duration
	beats    int
	epochsOf map[int32]bool // the member epochs answered
}

func newRebalanceSim(t testing.TB, members, topics, partitions int, interval, hb time.Duration) *rebalanceSim {
	cfg := testConfig()
	cfg.ConsumerGroupAssignmentIntervalMs = int32(interval.Milliseconds())
	cfg.ConsumerGroupHeartbeatIntervalMs = int32(hb.Milliseconds())
	s := &rebalanceSim{t: t, h: newHarness(t, cfg), hb: hb, epochsOf: map[int32]bool{}}
	var spec []string
	for i := range topics {
		s.topics = append(s.topics, fmt.Sprintf("t%d", i))
		spec = append(spec, fmt.Sprintf("t%d:%d", i, partitions/topics))
	}
	s.h.topics.set(strings.Join(spec, ","))
	s.h.c.TopicsChanged()
	for i := range members {
		// Phases spread over the interval, as members that joined in
		// one burst at random moments.
		s.members = append(s.members, &simMember{id: fmt.Sprintf("m%05d", i), next: hb * time.Duration(i) / time.Duration(members)})
	}
	return s
}

// beat sends one member's heartbeat and takes in the answer.
func (s *rebalanceSim) beat(m *simMember) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", m.id, m.epoch
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 60000
		req.SubscribedTopicNames = s.topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else if m.ack {
		req.Topics = m.owned
	}
	r := s.h.c.ConsumerGroupHeartbeat(context.Background(), ClientInfo{ClientID: "c"}, req)()
	s.beats++
	if r.ErrorCode != 0 {
		s.t.Fatalf("heartbeat of %s at %v: %s", m.id, s.now, coordtest.ErrName(r.ErrorCode))
	}
	m.epoch, m.ack = r.MemberEpoch, false
	s.epochsOf[r.MemberEpoch] = true
	if r.Assignment != nil {
		m.owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range r.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		m.ack = true
	}
}

// epochs lists the member epochs answered, in order.
func (s *rebalanceSim) epochs() []int32 {
	return slices.Sorted(maps.Keys(s.epochsOf))
}

// stable reports whether ConsumerGroupDescribe says what Kafka's tools
// call a stable group: state Stable, the target at the group epoch, every
// member at it and every partition assigned once.
func (s *rebalanceSim) stable(partitions int) bool {
	// The members' own view first, which costs no request: one epoch,
	// each member holding some of the partitions, all of them held.
	held := 0
	for _, m := range s.members {
		if m.epoch != s.members[0].epoch || len(m.owned) == 0 {
			return false
		}
		for _, t := range m.owned {
			held += len(t.Partitions)
		}
	}
	if held != partitions {
		return false
	}
	d := s.h.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})()
	g := d.Groups[0]
	if g.State != "Stable" || g.Epoch != g.AssignmentEpoch || len(g.Members) != len(s.members) {
		return false
	}
	n := 0
	for _, m := range g.Members {
		if m.MemberEpoch != g.Epoch {
			return false
		}
		for _, t := range m.Assignment.TopicPartitions {
			n += len(t.Partitions)
		}
	}
	return n == partitions
}

// run joins every member at time 0 and heartbeats them in time order
// until the group is stable, returning the simulated time it took.
func (s *rebalanceSim) run(partitions int, limit time.Duration) time.Duration {
	for _, m := range s.members {
		s.beat(m)
	}
	for s.now <= limit {
		// Everyone due now, in phase order; an acknowledging member goes
		// again at once, before the clock moves.
		due := slices.Clone(s.members)
		slices.SortStableFunc(due, func(a, b *simMember) int { return int(a.next - b.next) })
		for _, m := range due {
			if m.next > s.now {
				break
			}
			for {
				s.beat(m)
				if !m.ack {
					break
				}
			}
			m.next += s.hb
		}
		if s.stable(partitions) {
			return s.now
		}
		next := s.members[0].next
		for _, m := range s.members {
			next = min(next, m.next)
		}
		s.h.advance(next - s.now)
		s.now = next
	}
	s.t.Fatalf("not stable after %v", limit)
	return 0
}

// TestConsumerRebalanceTimeline is the protocol's own floor for a burst of
// joins, free of the machine: 1,000 members over 10,000 partitions with a
// 500 ms heartbeat. The first member gets everything at once (the group had
// no target); the next target, for all 1,000, is computed by the first
// heartbeat after the assignment interval; the first member revokes at its
// next heartbeat and the others take their partitions at their next
// heartbeat after that. So the group is stable by the interval plus two
// heartbeat intervals, with two targets computed.
func TestConsumerRebalanceTimeline(t *testing.T) {
	// On a simulated clock: under a second of CPU, so it runs in -short too.
	for _, c := range []struct {
		interval time.Duration
		within   time.Duration
	}{
		{time.Second, 2 * time.Second},
		{200 * time.Millisecond, 1200 * time.Millisecond},
	} {
		s := newRebalanceSim(t, 1000, 10, 10000, c.interval, 500*time.Millisecond)
		took := s.run(10000, time.Minute)
		t.Logf("interval %v: stable at %v after %d heartbeats, member epochs %v", c.interval, took, s.beats, s.epochs())
		if took > c.within {
			t.Errorf("interval %v: stable at %v, want within %v", c.interval, took, c.within)
		}
		// Epoch 1 is the first member's target; the burst's joins take
		// epochs 2-1000; the second target is at the group epoch then.
		if want := []int32{1, 1000}; !slices.Equal(s.epochs(), want) {
			t.Errorf("interval %v: member epochs %v, want %v (two targets)", c.interval, s.epochs(), want)
		}
	}
}

// BenchmarkConsumerSteadyHeartbeat is a heartbeat that changes nothing, the
// most common one: a member of a stable group of 1,000 over 10,000
// partitions, keeping alive (no owned partitions sent) or acknowledging
// its assignment (owned partitions sent, as after a change).
func BenchmarkConsumerSteadyHeartbeat(b *testing.B) {
	s := newRebalanceSim(b, 1000, 10, 10000, 0, 500*time.Millisecond)
	s.run(10000, time.Minute)
	m := s.members[len(s.members)/2]
	for _, ack := range []bool{false, true} {
		b.Run(fmt.Sprintf("ack=%v", ack), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.ack = ack
				s.beat(m)
			}
		})
	}
}

// BenchmarkNextAssignmentLarge is the reconciliation of the first member of
// a burst of joins, which holds 10,000 partitions of ten topics: taking
// them all (the first target), then revoking all but ten (the second).
func BenchmarkNextAssignmentLarge(b *testing.B) {
	all, ten := tpSet{}, tpSet{}
	for t := range 10 {
		id := testTopicID(fmt.Sprintf("t%d", t))
		for p := range int32(1000) {
			all[id] = append(all[id], p)
		}
		ten[id] = []int32{0}
	}
	g := newConsumerGroup("g", 0)
	joiner := &consumerMember{id: "m", assigned: tpSet{}, revoking: tpSet{}}
	holder := &consumerMember{id: "m", epoch: 1, assigned: all, revoking: tpSet{}}
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if next := nextAssignment(g, joiner, 1, 1, all, tpSet{}); next.assigned.size() != 10000 {
				b.Fatalf("took %d partitions, want 10000", next.assigned.size())
			}
		}
	})
	b.Run("revoke", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if next := nextAssignment(g, holder, 1, 2, ten, all); next.revoking.size() != 9990 {
				b.Fatalf("revoking %d partitions, want 9990", next.revoking.size())
			}
		}
	})
}
