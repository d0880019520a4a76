package broker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroupsAt sends DescribeGroups for group at exactly version v on
// its own connection and decodes the answer.
func describeGroupsAt(t *testing.T, ts *testServer, v int16, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	c := dialFrames(t, ts.addr)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = v
	req.Groups = []string{group}
	req.IncludeAuthorizedOperations = v >= 3
	if err := c.send(req); err != nil {
		t.Fatal(err)
	}
	body, corr, err := c.frame(req.IsFlexible())
	if err != nil || corr != c.corr {
		t.Fatalf("DescribeGroups v%d: frame %v, correlation %d want %d", v, err, corr, c.corr)
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("DescribeGroups v%d answer does not decode: %v", v, err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].Group != group {
		t.Fatalf("DescribeGroups v%d: %+v, want the one group %s", v, resp.Groups, group)
	}
	return resp.Groups[0]
}

// assertNotClassic checks DescribeGroups of a consumer group (KIP-848) at
// every version, as Kafka 4's GroupMetadataManager.describeGroups answers
// it: the API describes classic groups only, so a consumer group is a Dead
// group without members, with GROUP_ID_NOT_FOUND and a message from v6 on.
// Admin tools read consumer groups with ConsumerGroupDescribe instead.
func assertNotClassic(t *testing.T, ts *testServer, group string) {
	t.Helper()
	for v := int16(0); v <= 6; v++ {
		d := describeGroupsAt(t, ts, v, group)
		wantCode, wantMsg := int16(0), ""
		if v >= 6 {
			wantCode, wantMsg = kerr.GroupIDNotFound.Code, "Group "+group+" is not a classic group."
		}
		msg := ""
		if d.ErrorMessage != nil {
			msg = *d.ErrorMessage
		}
		if d.ErrorCode != wantCode || msg != wantMsg || d.State != "Dead" || d.ProtocolType != "" || d.Protocol != "" || len(d.Members) != 0 {
			t.Fatalf("DescribeGroups v%d of consumer group %s: code %d msg %q state %q type %q protocol %q members %d; want code %d msg %q, Dead, no members",
				v, group, d.ErrorCode, msg, d.State, d.ProtocolType, d.Protocol, len(d.Members), wantCode, wantMsg)
		}
	}
	described, err := ts.admin(t).DescribeGroups(testContext(t), group)
	if err != nil {
		t.Fatalf("kadm DescribeGroups: %v", err)
	}
	if g := described[group]; !errors.Is(g.Err, kerr.GroupIDNotFound) || g.State != "Dead" {
		t.Fatalf("kadm DescribeGroups of consumer group %s: err %v state %q, want GROUP_ID_NOT_FOUND and Dead", group, g.Err, g.State)
	}
}

// stableConsumerGroup polls ConsumerGroupDescribe until the group is Stable
// with members of the given types (0 classic, 1 consumer), every member's
// assignment is its target, and the assignments split the topic's
// partitions with none left out or given twice. It returns each member's
// partitions.
func stableConsumerGroup(t *testing.T, ts *testServer, group, topic string, partitions int, types []int8) map[string][]int32 {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var last string
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(testContext(t), ts.client(t))
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
		}
		d := resp.Groups[0]
		owned, ok := splitOf(d, topic, partitions, types)
		if ok {
			return owned
		}
		last = d.State
		if time.Now().After(deadline) {
			t.Fatalf("consumer group %s not stable with members %v: state %s, %+v", group, types, last, d.Members)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// splitOf is the partitions per member of a described consumer group when
// it is stable as stableConsumerGroup wants it.
func splitOf(d kmsg.ConsumerGroupDescribeResponseGroup, topic string, partitions int, types []int8) (map[string][]int32, bool) {
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != len(types) {
		return nil, false
	}
	var got []int8
	owned := make(map[string][]int32)
	seen := make(map[int32]bool)
	for _, m := range d.Members {
		got = append(got, m.MemberType)
		var current, target []int32
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic != topic {
				return nil, false
			}
			current = append(current, tp.Partitions...)
		}
		for _, tp := range m.TargetAssignment.TopicPartitions {
			target = append(target, tp.Partitions...)
		}
		slices.Sort(current)
		slices.Sort(target)
		if len(current) == 0 || !slices.Equal(current, target) {
			return nil, false
		}
		for _, p := range current {
			if seen[p] {
				return nil, false
			}
			seen[p] = true
		}
		owned[m.MemberID] = current
	}
	slices.Sort(got)
	return owned, len(seen) == partitions && slices.Equal(got, types)
}

// TestDescribeGroupsClassicUpgradedConsumer follows one group through the
// three shapes DescribeGroups meets, with franz-go members: a classic group
// of two (described in full: Stable, protocol type "consumer", the chosen
// assignor, each member's subscription and assignment in the consumer
// protocol's encoding, the assignments splitting the partitions); the same
// group upgraded online by two KIP-848 members, classic members inside a
// consumer group; and, once the classic members left, a consumer group of
// the two KIP-848 members. The last two are consumer groups, which
// DescribeGroups does not describe (Kafka's answer, see assertNotClassic)
// while ConsumerGroupDescribe reports every member and its partitions.
func TestDescribeGroupsClassicUpgradedConsumer(t *testing.T) {
	mg := newMigration(t)
	stopA := mg.start("a", false)
	stopB := mg.start("b", false)
	mg.owners("the classic members to share the partitions", "a", "b")

	// The classic group, polled until its assignments are in place.
	deadline := time.Now().Add(45 * time.Second)
	for {
		d := describeGroupsAt(t, mg.ts, 6, "upg-g")
		if classicSplit(t, d) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("classic group never described stable with its partitions split: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}

	mg.start("c", true)
	mg.start("d", true)
	mixed := stableConsumerGroup(t, mg.ts, "upg-g", "upg", migrationPartitions, []int8{0, 0, 1, 1})
	if len(mixed) != 4 {
		t.Fatalf("upgraded group members %v, want 4", mixed)
	}
	assertNotClassic(t, mg.ts, "upg-g")
	mg.produceAndRead("mixed", 1)

	stopA()
	stopB()
	owned := stableConsumerGroup(t, mg.ts, "upg-g", "upg", migrationPartitions, []int8{1, 1})
	assertNotClassic(t, mg.ts, "upg-g")
	// The group described again, after DescribeGroups, is unchanged: the
	// classic API's look did not disturb it.
	again := stableConsumerGroup(t, mg.ts, "upg-g", "upg", migrationPartitions, []int8{1, 1})
	for id, ps := range owned {
		if !slices.Equal(again[id], ps) {
			t.Fatalf("member %s owns %v after DescribeGroups, %v before", id, again[id], ps)
		}
	}
	mg.produceAndRead("consumer", 2)
	mg.noDoubleOwners()
}

// classicSplit reports whether a DescribeGroups answer is the stable
// classic group of two franz-go members over topic "upg", every member's
// metadata and assignment decoding as the consumer protocol's and the
// assignments splitting the partitions. A malformed answer fails the test.
func classicSplit(t *testing.T, d kmsg.DescribeGroupsResponseGroup) bool {
	t.Helper()
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 2 {
		return false
	}
	if d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" || d.AuthorizedOperations == 0 {
		t.Fatalf("classic group type %q protocol %q ops %d, want consumer, cooperative-sticky, authorized operations", d.ProtocolType, d.Protocol, d.AuthorizedOperations)
	}
	seen := make(map[int32]bool)
	for _, m := range d.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil || !slices.Equal(meta.Topics, []string{"upg"}) {
			t.Fatalf("member %s metadata %v: %v, want a subscription to upg", m.MemberID, meta.Topics, err)
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil {
			t.Fatalf("member %s assignment does not decode: %v", m.MemberID, err)
		}
		for _, tp := range a.Topics {
			if tp.Topic != "upg" {
				t.Fatalf("member %s assigned topic %q", m.MemberID, tp.Topic)
			}
			for _, p := range tp.Partitions {
				if seen[p] {
					return false // a rebalance in flight
				}
				seen[p] = true
			}
		}
	}
	return len(seen) == migrationPartitions
}
