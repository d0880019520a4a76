package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReconcileSkipsUnchangedTopics: a metadata change that leaves a topic
// as it was (another topic created) does not walk that topic's partitions
// again (its partitions keep the config and assignment they had, the very
// same values), while a change to the topic itself (a config override)
// reaches every one of its partitions, and the topic keeps serving.
func TestReconcileSkipsUnchangedTopics(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "steady", 3, nil)
	cfgs := make([]any, 3)
	assigns := make([]any, 3)
	for i := range 3 {
		p := ts.parts.get("steady", int32(i))
		cfgs[i], assigns[i] = p.Cfg.Load(), p.Assign.Load()
	}

	createTopic(t, adm, "newcomer", 2, nil)
	for i := range 3 {
		p := ts.parts.get("steady", int32(i))
		if any(p.Cfg.Load()) != cfgs[i] || any(p.Assign.Load()) != assigns[i] {
			t.Errorf("steady-%d was applied again when another topic was created", i)
		}
	}
	if ts.parts.get("newcomer", 1) == nil {
		t.Fatal("newcomer-1 is not hosted")
	}

	resp, err := adm.AlterTopicConfigs(testContext(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("123456")}}, "steady")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter steady: %v %v", err, resp)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := range 3 {
		for ts.parts.get("steady", int32(i)).Cfg.Load().RetentionMs != 123456 {
			if time.Now().After(deadline) {
				t.Fatalf("steady-%d: retention.ms %d after the override, want 123456", i, ts.parts.get("steady", int32(i)).Cfg.Load().RetentionMs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	cl := ts.client(t, kgo.DefaultProduceTopic("steady"))
	if err := cl.ProduceSync(testContext(t), kgo.StringRecord("still served")).FirstErr(); err != nil {
		t.Fatalf("produce to steady after the changes: %v", err)
	}
}
