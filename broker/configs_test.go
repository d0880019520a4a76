package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func topicConfig(t *testing.T, adm *kadm.Client, topic, name string) (string, bool) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return derefOr(c.Value), c.Source == 1 // DYNAMIC_TOPIC_CONFIG
		}
	}
	t.Fatalf("config %s not described", name)
	return "", false
}

func derefOr(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func TestIncrementalAlterConfigs(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "cfg", 1, nil)
	ctx := testContext(t)
	if v, dyn := topicConfig(t, adm, "cfg", "retention.ms"); v != "604800000" || dyn {
		t.Fatalf("default retention.ms %s dynamic=%v", v, dyn)
	}
	set := "1000"
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: &set},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("compact")},
	}, "cfg")
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	if v, dyn := topicConfig(t, adm, "cfg", "retention.ms"); v != "1000" || !dyn {
		t.Fatalf("retention.ms %s dynamic=%v after SET", v, dyn)
	}
	if v, _ := topicConfig(t, adm, "cfg", "cleanup.policy"); v != "delete,compact" {
		t.Fatalf("cleanup.policy %s after APPEND", v)
	}
	// An invalid value is refused and changes nothing.
	res, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: strp("12")}}, "cfg")
	if res[0].Err != kerr.InvalidConfig {
		t.Fatalf("segment.bytes=12: %v", res[0].Err)
	}
	res, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: strp("5")}}, "cfg")
	if res[0].Err != kerr.InvalidConfig {
		t.Fatalf("APPEND to a non-list: %v", res[0].Err)
	}
	res, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "cfg")
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if v, dyn := topicConfig(t, adm, "cfg", "retention.ms"); v != "604800000" || dyn {
		t.Fatalf("retention.ms %s dynamic=%v after DELETE", v, dyn)
	}
	res, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &set}}, "missing")
	if res[0].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("missing topic: %v", res[0].Err)
	}
	// The legacy AlterConfigs replaces the set: cleanup.policy goes back.
	lres, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: strp("2000")}}, "cfg")
	if err != nil || lres[0].Err != nil {
		t.Fatalf("legacy alter: %v %v", err, lres)
	}
	if v, _ := topicConfig(t, adm, "cfg", "cleanup.policy"); v != "delete" {
		t.Fatalf("cleanup.policy %s after legacy AlterConfigs", v)
	}
	// The new max.message.bytes applies to produce at once.
	cl := ts.client(t, kgo.DefaultProduceTopic("cfg"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	err = cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 5000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("5000-byte record over max.message.bytes=2000: %v", err)
	}
}

func strp(s string) *string { return &s }

func TestDeleteRecords(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "del", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("del"), kgo.ProducerLinger(0))
	ctx := testContext(t)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: 6})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("del", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete records: %+v", r)
	}
	start, _ := adm.ListStartOffsets(ctx, "del")
	if o, _ := start.Lookup("del", 0); o.Offset != 6 {
		t.Fatalf("start offset %d after deleting below 6", o.Offset)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: 11})
	res, _ = adm.DeleteRecords(ctx, os)
	if r, _ := res.Lookup("del", 0); r.Err != kerr.OffsetOutOfRange {
		t.Fatalf("delete past the high watermark: %v", r.Err)
	}
	// Fetching below the start is out of range; a restart keeps the start.
	r := doFetch(t, cl, fetchReq("del", topicID(t, ts, "del"), []int64{2}, 0, -1))
	if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the start: code %d", code)
	}
	cl.Close()
	ts.Close()
	ts = startServer(t, ts.dir)
	start, _ = ts.admin(t).ListStartOffsets(testContext(t), "del")
	if o, _ := start.Lookup("del", 0); o.Offset != 6 {
		t.Fatalf("start offset %d after restart", o.Offset)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "sized", 2, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("sized"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Partition: 1, Value: make([]byte, 10000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dirs, err := adm.DescribeAllLogDirs(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes [2]int64
	found := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil || d.TotalBytes <= 0 {
			t.Errorf("dir %s: err %v total %d", d.Dir, d.Err, d.TotalBytes)
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "sized" {
				sizes[p.Partition] = p.Size
				found++
			}
		})
	})
	if found != 2 || sizes[0] != 0 || sizes[1] < 10000 || sizes[1] > 10200 {
		t.Fatalf("partition sizes %v (found %d)", sizes, found)
	}
}
