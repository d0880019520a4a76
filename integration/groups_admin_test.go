package integration

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupsAdmin drives group administration through kadm against a
// group with a live member and then without: ListGroups (with a state
// filter), DescribeGroups, Lag (and CalculateGroupLag from its parts),
// DeleteGroups (NON_EMPTY_GROUP while a member is in, GROUP_ID_NOT_FOUND
// for no group), OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC while the group
// consumes the topic), each checked against what was produced and
// committed.
func TestGroupsAdmin(t *testing.T) {
	t.Parallel()
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	const topic, other, group = "adm", "adm-other", "adm-group"
	createTopic(t, p.addr, topic, 4)
	createTopic(t, p.addr, other, 1)
	ends := grpProduce(t, p.addr, topic, 400) // 100 per partition
	grpProduce(t, p.addr, other, 10)
	adm := kadm.NewClient(newClient(t, p.addr))
	ctx := testContext(t, 60*time.Second)

	// One member consumes the topic and commits chosen offsets.
	assignedCh := make(chan struct{}, 1)
	cl := newClient(t, p.addr, kgo.ClientID("adm-member"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.SessionTimeout(grpSessionTimeout),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			select {
			case assignedCh <- struct{}{}:
			default:
			}
		}))
	go func() {
		for !cl.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	select {
	case <-assignedCh:
	case <-time.After(30 * time.Second):
		t.Fatal("the member got no assignment")
	}
	commits := map[int32]int64{0: 100, 1: 50, 2: 10} // partition 3: nothing committed
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for part, o := range commits {
		offsets[topic][part] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				commitErr = errors.Join(commitErr, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	// A second group that only ever committed (no members): Empty.
	if _, err := adm.CommitOffsets(ctx, "adm-simple", kadm.OffsetsFromRecords(kgo.Record{Topic: other, Partition: 0, Offset: 4})); err != nil {
		t.Fatalf("commit for adm-simple: %v", err)
	}

	// ListGroups, unfiltered and by state.
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg := listed[group]; lg.State != "Stable" || lg.ProtocolType != "consumer" || lg.GroupType != "classic" {
		t.Fatalf("ListGroups %s: %+v", group, lg)
	}
	if lg := listed["adm-simple"]; lg.State != "Empty" {
		t.Fatalf("ListGroups adm-simple: %+v", lg)
	}
	for _, tc := range []struct {
		state string
		want  []string
	}{{"Stable", []string{group}}, {"Empty", []string{"adm-simple"}}, {"Dead", nil}} {
		got, err := adm.ListGroups(ctx, tc.state)
		if err != nil {
			t.Fatal(err)
		}
		if names := got.Groups(); !slices.Equal(names, tc.want) {
			t.Fatalf("ListGroups(%s) = %v, want %v", tc.state, names, tc.want)
		}
	}

	// DescribeGroups: the member, its client id and its assignment.
	d := grpDescribe(t, adm, group)
	if d.Err != nil || d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 1 {
		t.Fatalf("DescribeGroups: %+v", d)
	}
	m := d.Members[0]
	ca, ok := m.Assigned.AsConsumer()
	if m.ClientID != "adm-member" || !ok || len(ca.Topics) != 1 || !slices.Equal(ca.Topics[0].Partitions, []int32{0, 1, 2, 3}) {
		t.Fatalf("DescribeGroups member: %+v, assignment %+v", m, ca)
	}
	if j, ok := m.Join.AsConsumer(); !ok || !slices.Equal(j.Topics, []string{topic}) {
		t.Fatalf("DescribeGroups member subscription: %+v", j)
	}

	// Lag: produced minus committed, with no commit counting from the
	// start; kadm's Lag and CalculateGroupLag from the parts agree. Lag
	// must cover every partition while a member is assigned them, and
	// those with commits after it left.
	checkLag := func(commits map[int32]int64, members bool) {
		t.Helper()
		lags, err := adm.Lag(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		gl := lags[group]
		if gl.DescribeErr != nil || gl.FetchErr != nil {
			t.Fatalf("Lag: %v %v", gl.DescribeErr, gl.FetchErr)
		}
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		listedEnds, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		calc := kadm.CalculateGroupLag(grpDescribe(t, adm, group), fetched, listedEnds)
		for part, end := range ends {
			want := end - commits[part] // a missing commit is 0
			_, committed := commits[part]
			got, ok := gl.Lag.Lookup(topic, part)
			if (ok || committed || members) && (!ok || got.Err != nil || got.Lag != want || got.End.Offset != end) {
				t.Fatalf("Lag of %s/%d: %+v (present %v), want lag %d", topic, part, got, ok, want)
			}
			c, ok := calc.Lookup(topic, part)
			if (ok || committed || members) && (!ok || c.Lag != want) {
				t.Fatalf("CalculateGroupLag of %s/%d: %+v (present %v), want %d", topic, part, c, ok, want)
			}
		}
	}
	checkLag(commits, true)

	// While the member is in: the group cannot be deleted, nor the
	// offsets of the topic it consumes; another topic's offsets can.
	del, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := del[group].Err; err != kerr.NonEmptyGroup {
		t.Fatalf("DeleteGroups with a member: %v, want NON_EMPTY_GROUP", err)
	}
	odel, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := odel.Lookup(topic, 1); err != kerr.GroupSubscribedToTopic {
		t.Fatalf("OffsetDelete while subscribed: %v, want GROUP_SUBSCRIBED_TO_TOPIC", err)
	}
	checkLag(commits, true) // nothing was deleted

	// The member leaves: now the offsets and then the group go.
	cl.Close()
	grpWaitFor(t, 30*time.Second, "the group to be empty", func() bool { return grpDescribe(t, adm, group).State == "Empty" })
	odel, err = adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, ok := odel.Lookup(topic, 1); !ok || err != nil {
		t.Fatalf("OffsetDelete of an empty group: %v (present %v)", err, ok)
	}
	delete(commits, 1)
	if got := grpCommitted(t, p.addr, group, topic); len(got) != 2 || got[0] != 100 || got[2] != 10 {
		t.Fatalf("after OffsetDelete of partition 1: committed %v", got)
	}
	checkLag(commits, false)

	del, err = adm.DeleteGroups(ctx, group, "adm-simple", "adm-never")
	if err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]error{group: nil, "adm-simple": nil, "adm-never": kerr.GroupIDNotFound} {
		if err := del[g].Err; err != want {
			t.Fatalf("DeleteGroups %s: %v, want %v", g, err, want)
		}
	}
	listed, err = adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 0 {
		t.Fatalf("ListGroups after deleting every group: %v", listed.Groups())
	}
	if got := grpCommitted(t, p.addr, group, topic); len(got) != 0 {
		t.Fatalf("offsets of a deleted group: %v", got)
	}
	if d := grpDescribe(t, adm, group); d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("DescribeGroups of a deleted group: %+v", d)
	}
}
