package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartKeepsEverything closes a server cleanly and starts another in
// the same directory: topics, configs and records are all there and new
// offsets continue without a gap.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir)
	retention := "3600000"
	createTopic(t, ts.admin(t), "kept", 2, map[string]*string{"retention.ms": &retention})
	cl := ts.client(t, kgo.DefaultProduceTopic("kept"))
	acked := produceAll(t, cl, keyedRecords("kept", 500, "first"))
	cl.Close()
	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	ts = startServer(t, dir)
	adm := ts.admin(t)
	cfgs, err := adm.DescribeTopicConfigs(testContext(t), "kept")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On("kept", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = c.Value != nil && *c.Value == retention
		}
	}
	if !found {
		t.Fatalf("retention.ms override lost across restart")
	}
	cl = ts.client(t, kgo.DefaultProduceTopic("kept"))
	more := produceAll(t, cl, keyedRecords("kept", 500, "second"))
	for p, m := range more {
		for off, r := range m {
			if _, clash := acked[p][off]; clash {
				t.Fatalf("offset %d of partition %d reused after restart", off, p)
			}
			acked[p][off] = r
		}
	}
	checkConsumed(t, acked, consumeExactly(t, ts.addr, "kept", 1000))
}
