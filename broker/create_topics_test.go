package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsReplicaAssignment: a topic created with an explicit
// replica assignment (partitions and replication factor -1, as Kafka
// requires) gets exactly those partitions; naming a count as well is
// refused.
func TestCreateTopicsReplicaAssignment(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for p := int32(0); p < 2; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	bad := rt
	bad.Topic, bad.NumPartitions = "assigned-bad", 2
	req.Topics = append(req.Topics, rt, bad)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.NumPartitions != 2 || got.ReplicationFactor != 1 {
		t.Fatalf("assigned topic: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("assignment with a partition count: code %d", got.ErrorCode)
	}
}

// TestCreateTopicsAnswersConfigs: CreateTopics v5+ answers each created
// topic's configs: the broker's for a topic without overrides (made once
// and shared by the answers, defaultTopicConfigs) and the override with
// its source for one that sets it, in the same order either way.
func TestCreateTopicsAnswersConfigs(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t)
	create := func(name string, retention *string) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		if retention != nil {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = "retention.ms", retention
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", name, err, resp)
		}
		return resp.Topics[0]
	}
	retention := func(st kmsg.CreateTopicsResponseTopic) kmsg.CreateTopicsResponseTopicConfig {
		for _, c := range st.Configs {
			if c.Name == "retention.ms" {
				return c
			}
		}
		t.Fatalf("%s: no retention.ms among %d configs", st.Topic, len(st.Configs))
		return kmsg.CreateTopicsResponseTopicConfig{}
	}
	plain, again := create("plain", nil), create("plain-again", nil)
	tuned := create("tuned", kmsg.StringPtr("1234"))
	want := describeCreated(ts.cfg.DescribeTopic(map[string]string{}))
	if len(want) < 30 || !reflect.DeepEqual(plain.Configs, want) || !reflect.DeepEqual(again.Configs, want) {
		t.Errorf("plain topics' configs: %d and %d, want the broker's %d", len(plain.Configs), len(again.Configs), len(want))
	}
	if c := retention(plain); c.Value == nil || *c.Value != "604800000" || c.Source != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Errorf("plain retention.ms: %v source %d", c.Value, c.Source)
	}
	if c := retention(tuned); c.Value == nil || *c.Value != "1234" || c.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Errorf("tuned retention.ms: %v source %d", c.Value, c.Source)
	}
	if len(tuned.Configs) != len(want) {
		t.Errorf("tuned: %d configs, want %d", len(tuned.Configs), len(want))
	}
	if c := retention(create("plain-third", nil)); *c.Value != "604800000" {
		t.Errorf("a plain topic after a tuned one: retention.ms %s", *c.Value)
	}
}
