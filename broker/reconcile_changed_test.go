package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregorbroker/gregor/broker/group"
)

// TestReconcileChangedTopicsOnly: reconcile looks only at the topics that
// changed since the last complete one (image.ChangedTopicNames), and the
// table it leaves after a deletion, a deletion and creation under the
// same name, new partitions and a config override is the one a reconcile
// of every topic makes: the same partitions, a log for each and no
// other, a new topic id for the recreated topic.
func TestReconcileChangedTopicsOnly(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	ctx := testContext(t)
	for _, name := range []string{"keep", "gone", "again", "grow"} {
		createTopic(t, adm, name, 2, nil)
	}
	keep0 := ts.parts.get("keep", 0)
	oldAgain := ts.parts.topic("again").id

	if _, err := adm.DeleteTopics(ctx, "gone", "again"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, adm, "again", 1, nil)
	if _, err := adm.CreatePartitions(ctx, 2, "grow"); err != nil {
		t.Fatal(err)
	}
	if resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("654321")}}, "grow"); err != nil || resp[0].Err != nil {
		t.Fatalf("alter grow: %v %v", err, resp)
	}
	want := ts.meta.Image()
	waitFor(t, "the watcher reconciling the last change", func() bool {
		ts.reconcileMu.Lock()
		defer ts.reconcileMu.Unlock()
		return ts.reconciled != nil && ts.reconciled.Offset() >= want.Offset()
	})
	if got := ts.parts.get("keep", 0); got != keep0 {
		t.Errorf("keep-0 was made again (%p, was %p) though keep never changed", got, keep0)
	}
	if g := ts.parts.get("grow", 3); g == nil || g.Cfg.Load().RetentionMs != 654321 || ts.parts.get("grow", 0).Cfg.Load().RetentionMs != 654321 {
		t.Errorf("grow: partition 3 %v, or the override did not reach every partition", g)
	}
	if tp := ts.parts.topic("again"); tp == nil || tp.id == oldAgain || len(tp.parts) != 1 {
		t.Errorf("again after its re-creation: %+v, old id %x", tp, oldAgain)
	}
	incremental := tableOf(ts)
	checkLogsMatchTable(t, ts, incremental)

	// One more topic next to 60: the watcher looks at it alone.
	var many []string
	for i := range 60 {
		many = append(many, fmt.Sprintf("many-%d", i))
	}
	if resp, err := adm.CreateTopics(ctx, 1, 1, nil, many...); err != nil || resp.Error() != nil {
		t.Fatalf("create 60 topics: %v %v", err, resp.Error())
	}
	waitReconciled := func() {
		t.Helper()
		want := ts.meta.Image()
		waitFor(t, "the watcher reconciling the last change", func() bool {
			ts.reconcileMu.Lock()
			defer ts.reconcileMu.Unlock()
			return ts.reconciled != nil && ts.reconciled.Offset() >= want.Offset()
		})
	}
	waitReconciled()
	createTopic(t, adm, "one-more", 1, nil)
	waitReconciled()
	ts.reconcileMu.Lock()
	looked := ts.reconcileLooked
	ts.reconcileMu.Unlock()
	if looked < 1 || looked > 2 {
		t.Errorf("the reconcile of one new topic next to %d looked at %d topics", ts.meta.Image().NumTopics(), looked)
	}
	incremental = tableOf(ts)

	// A reconcile of every topic finds nothing to change.
	ts.reconcileMu.Lock()
	ts.reconciled = nil
	ts.reconcileMu.Unlock()
	if err := ts.reconcile(ts.meta.Image()); err != nil {
		t.Fatal(err)
	}
	if full := tableOf(ts); !maps.Equal(full, incremental) {
		t.Errorf("the changed topics' reconcile left\n%v\na full one\n%v", incremental, full)
	}
}

// tableOf describes the hosted partition table: each topic's id and its
// partitions (their pointers).
func tableOf(ts *testServer) map[string]string {
	out := map[string]string{}
	for name, tp := range ts.parts.all() {
		out[name] = fmt.Sprintf("%x %p failed=%v", tp.id, tp.parts, tp.failed)
		for i, p := range tp.parts {
			out[fmt.Sprintf("%s-%d", name, i)] = fmt.Sprintf("%p", p)
		}
	}
	return out
}

// checkLogsMatchTable: the log manager holds a log for every hosted
// partition and for nothing else.
func checkLogsMatchTable(t *testing.T, ts *testServer, table map[string]string) {
	t.Helper()
	var logs, hosted []string
	for tp := range ts.logs.Logs() {
		logs = append(logs, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	for name, tp := range ts.parts.all() {
		for i, p := range tp.parts {
			if p != nil {
				hosted = append(hosted, fmt.Sprintf("%s-%d", name, i))
			}
		}
	}
	slices.Sort(logs)
	slices.Sort(hosted)
	if !slices.Equal(logs, hosted) {
		t.Errorf("logs %v, hosted partitions %v", logs, hosted)
	}
}

// TestImageTopicsFollowsChanges: the group coordinator's topic view,
// made from the previous one and the topics changed since, is the one a
// walk of every topic gives after creations, new partitions and a
// deletion, and a map it returned earlier is left as it was.
func TestImageTopicsFollowsChanges(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	ctx := testContext(t)
	createTopic(t, adm, "first", 1, nil)
	createTopic(t, adm, "second", 1, nil)
	v := newImageTopics(ts.Server)
	before := v.Topics()
	snapshot := maps.Clone(before)
	createTopic(t, adm, "third", 2, nil)
	if _, err := adm.CreatePartitions(ctx, 3, "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	after := v.Topics()
	img := ts.meta.Image()
	want := map[string]group.TopicInfo{}
	for tp := range img.AllTopics() {
		want[tp.Name] = group.TopicInfo{ID: tp.ID, Partitions: int32(len(tp.Partitions))}
	}
	if !maps.Equal(after, want) {
		t.Errorf("view after the changes %v, want %v", after, want)
	}
	if after["first"].Partitions != 4 || after["third"].Partitions != 2 {
		t.Errorf("first %+v, third %+v", after["first"], after["third"])
	}
	if _, ok := after["second"]; ok {
		t.Error("the deleted topic is still in the view")
	}
	if !maps.Equal(before, snapshot) {
		t.Error("an earlier view was written")
	}
	_, names := v.TopicsAndNames()
	wantNames := map[[16]byte]string{}
	for name, info := range want {
		wantNames[info.ID] = name
	}
	if !maps.Equal(names, wantNames) {
		t.Errorf("names by id %v, want %v", names, wantNames)
	}
}
