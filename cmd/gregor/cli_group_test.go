package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCLIGroup: group list, describe (lag per partition and in total),
// reset-offsets (a dry run changes nothing, --execute does; earliest,
// shift-by, to-offset clamped, to-datetime), seek, the refusal while the
// group has a member, delete-offsets and delete, each read back with kadm.
func TestCLIGroup(t *testing.T) {
	addr, cl, adm := cliCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "gt"); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	// Partition 0 gets 10 records, partition 1 gets 6, a second apart in
	// time from base.
	const base = int64(1_700_000_000_000)
	for p, n := range []int{10, 6} {
		for i := range n {
			r := &kgo.Record{Topic: "gt", Partition: int32(p), Value: []byte("v"), Timestamp: time.UnixMilli(base + int64(i)*1000)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(p0, p1 int64) {
		var o kadm.Offsets
		o.AddOffset("gt", 0, p0, -1)
		o.AddOffset("gt", 1, p1, -1)
		if err := adm.CommitAllOffsets(ctx, "g", o); err != nil {
			t.Fatal(err)
		}
	}
	commit(3, 6)

	var listed []struct{ Group, State string }
	cliJSON(t, addr, &listed, "group", "list")
	if len(listed) != 1 || listed[0].Group != "g" || listed[0].State != "Empty" {
		t.Fatalf("group list: %+v", listed)
	}
	// The group's commits made __consumer_offsets: listed with -i only.
	var topics []struct {
		Topic    string `json:"topic"`
		Internal bool   `json:"internal"`
	}
	cliJSON(t, addr, &topics, "topic", "list", "-i")
	if len(topics) != 2 || topics[0].Topic != "__consumer_offsets" || !topics[0].Internal || topics[1].Topic != "gt" {
		t.Errorf("topic list -i: %+v", topics)
	}
	cliJSON(t, addr, &topics, "topic", "list")
	if len(topics) != 1 || topics[0].Topic != "gt" {
		t.Errorf("topic list: %+v", topics)
	}

	var described []groupJSON
	cliJSON(t, addr, &described, "group", "describe", "g")
	if len(described) != 1 || described[0].TotalLag != 7 || len(described[0].Partitions) != 2 {
		t.Fatalf("group describe: %+v\n%s", described, mustCLI(t, addr, "", "group", "describe", "g"))
	}
	if p := described[0].Partitions[0]; *p.CurrentOffset != 3 || *p.LogEndOffset != 10 || *p.Lag != 7 {
		t.Errorf("partition 0 row %+v", p)
	}
	if out := mustCLI(t, addr, "", "groups", "describe", "g"); !strings.Contains(out, "TOTAL-LAG 7") {
		t.Errorf("groups describe (the old name):\n%s", out)
	}

	expect := func(what string, p0, p1 int64) {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		g0, _ := offs.Lookup("gt", 0)
		g1, _ := offs.Lookup("gt", 1)
		if g0.At != p0 || g1.At != p1 {
			t.Errorf("%s: committed %d, %d; want %d, %d", what, g0.At, g1.At, p0, p1)
		}
	}

	dry := runCLI(t, addr, "", "group", "reset-offsets", "g", "--topic", "gt", "--to-earliest")
	if dry.code != 0 || !regexpMatch(`g +gt +0 +3 +0 `, dry.out) || !regexpMatch(`g +gt +1 +6 +0 `, dry.out) || !strings.Contains(dry.err, "Dry run") {
		t.Fatalf("dry run: exit %d\n%s%s", dry.code, dry.out, dry.err)
	}
	expect("after the dry run", 3, 6)
	mustCLI(t, addr, "", "group", "reset-offsets", "--group", "g", "--topic", "gt", "--to-earliest", "--execute")
	expect("--to-earliest --execute", 0, 0)
	mustCLI(t, addr, "", "group", "reset-offsets", "g", "--topic", "gt:0", "--shift-by", "4", "--execute")
	expect("--shift-by 4 on partition 0", 4, 0)
	mustCLI(t, addr, "", "group", "reset-offsets", "g", "--all-topics", "--to-offset", "100", "--execute")
	expect("--to-offset 100, kept at the ends", 10, 6)
	mustCLI(t, addr, "", "group", "reset-offsets", "g", "--topic", "gt", "--to-datetime", "1700000005000", "--execute")
	expect("--to-datetime", 5, 5)
	mustCLI(t, addr, "", "group", "seek", "g", "--to", "start")
	expect("seek --to start", 0, 0)

	// A member in the group: --execute is refused, nothing changes.
	stop := groupMemberClient(t, addr, "g", "gt", false)
	waitClassicStable(t, adm, "g")
	r := runCLI(t, addr, "", "group", "reset-offsets", "g", "--topic", "gt", "--to-latest", "--execute")
	if r.code != 1 || !strings.Contains(r.err, "active members") {
		t.Fatalf("reset with a member: exit %d\n%s%s", r.code, r.out, r.err)
	}
	stop()
	waitGroupEmpty(t, adm, "g")

	mustCLI(t, addr, "", "group", "delete-offsets", "g", "--topic", "gt:1")
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("gt", 1); ok && o.At >= 0 {
		t.Errorf("partition 1 still committed at %d after delete-offsets", o.At)
	}
	mustCLI(t, addr, "", "group", "delete", "g")
	groups, err := adm.ListGroups(ctx)
	if err != nil || len(groups) != 0 {
		t.Errorf("groups after delete: %v %v", groups.Groups(), err)
	}
	if r := runCLI(t, addr, "", "group", "describe", "g"); r.code != 1 || !strings.Contains(r.err, "consumer group g does not exist") {
		t.Errorf("describe a deleted group: exit %d %s", r.code, r.err)
	}
	// A group that never existed can be given offsets, as in Kafka.
	mustCLI(t, addr, "", "group", "reset-offsets", "fresh", "--topic", "gt", "--to-latest", "--execute")
	fresh, err := adm.FetchOffsets(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if o0, _ := fresh.Lookup("gt", 0); o0.At != 10 {
		t.Errorf("new group committed %d on partition 0, want 10", o0.At)
	}
}

// waitGroupEmpty waits until a classic group has no members.
func waitGroupEmpty(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := adm.DescribeGroups(testCtx(t, 10*time.Second), group)
		if err == nil && len(d[group].Members) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s still has members: %v %+v", group, err, d[group])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
