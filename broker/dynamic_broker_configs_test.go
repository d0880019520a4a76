package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterBroker sends one IncrementalAlterConfigs for a broker resource and
// returns its error code and message.
func alterBroker(t *testing.T, ts *testServer, name string, legacy bool, cfgs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	cl := ts.client(t)
	if legacy {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		for _, c := range cfgs {
			rc := kmsg.NewAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value = c.Name, c.Value
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode, derefOr(resp.Resources[0].ErrorMessage)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, name, cfgs
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode, derefOr(resp.Resources[0].ErrorMessage)
}

func incOp(name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, op, value
	return c
}

// describeConfig describes one config of a resource with its synonyms.
func describeConfig(t *testing.T, ts *testServer, typ kmsg.ConfigResourceType, name, key string) (kmsg.DescribeConfigsResponseResourceConfig, int) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testContext(t), ts.client(t))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %d %q: %v %+v", typ, name, err, resp)
	}
	for _, c := range resp.Resources[0].Configs {
		if c.Name == key {
			return c, len(resp.Resources[0].Configs)
		}
	}
	return kmsg.DescribeConfigsResponseResourceConfig{}, len(resp.Resources[0].Configs)
}

func synonymsString(c kmsg.DescribeConfigsResponseResourceConfig) string {
	var parts []string
	for _, s := range c.ConfigSynonyms {
		parts = append(parts, s.Source.String()+":"+derefOr(s.Value))
	}
	return strings.Join(parts, ",")
}

// TestDynamicBrokerConfigs: unclean.leader.election.enable, the dynamic
// broker config Gregor applies, is set per broker and cluster-wide,
// described with Kafka's sources and synonyms, seen by topics, kept
// across a restart; configs Gregor does not change at run time are
// refused with Kafka's INVALID_REQUEST message, and deleting unset ones
// (kafka-reassign-partitions --verify's throttle clean-up) succeeds.
func TestDynamicBrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir)
	const key = "unclean.leader.election.enable"
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete

	if code, msg := alterBroker(t, ts, "1", false, incOp(key, set, strp("true"))); code != 0 {
		t.Fatalf("set %s on broker 1: %d %s", key, code, msg)
	}
	if code, msg := alterBroker(t, ts, "", false, incOp(key, set, strp("false"))); code != 0 {
		t.Fatalf("set %s cluster-wide: %d %s", key, code, msg)
	}
	c, _ := describeConfig(t, ts, kmsg.ConfigResourceTypeBroker, "1", key)
	if derefOr(c.Value) != "true" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || c.ReadOnly ||
		synonymsString(c) != "DYNAMIC_BROKER_CONFIG:true,DYNAMIC_DEFAULT_BROKER_CONFIG:false,DEFAULT_CONFIG:false" {
		t.Errorf("broker 1 %s = %s from %v, synonyms %s", key, derefOr(c.Value), c.Source, synonymsString(c))
	}
	c, n := describeConfig(t, ts, kmsg.ConfigResourceTypeBroker, "", key)
	if n != 1 || derefOr(c.Value) != "false" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		synonymsString(c) != "DYNAMIC_DEFAULT_BROKER_CONFIG:false" {
		t.Errorf("cluster defaults: %d configs, %s = %s from %v, synonyms %s", n, key, derefOr(c.Value), c.Source, synonymsString(c))
	}
	createTopic(t, ts.admin(t), "dyn", 1, nil)
	c, _ = describeConfig(t, ts, kmsg.ConfigResourceTypeTopic, "dyn", key)
	if derefOr(c.Value) != "true" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("topic dyn %s = %s from %v; want the broker's dynamic true", key, derefOr(c.Value), c.Source)
	}

	// Refusals, each changing nothing.
	for _, tc := range []struct {
		name, resource string
		legacy         bool
		cfgs           []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code           int16
		msg            string
	}{
		{"throttle", "1", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{incOp("leader.replication.throttled.rate", set, strp("1000"))},
			kerr.InvalidRequest.Code, "Cannot update these configs dynamically: [leader.replication.throttled.rate] (Gregor does not throttle replication;"},
		{"static", "", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{incOp("log.dirs", set, strp("/x")), incOp("foo.bar", set, strp("1"))},
			kerr.InvalidRequest.Code, "Cannot update these configs dynamically: [foo.bar, log.dirs]"},
		{"value", "1", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{incOp(key, set, strp("maybe"))},
			kerr.InvalidRequest.Code, "Invalid value maybe for configuration unclean.leader.election.enable: Expected value to be either true or false"},
		{"append", "1", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{incOp(key, kmsg.IncrementalAlterConfigOpAppend, strp("true"))},
			kerr.InvalidConfig.Code, "Config value append is not allowed for config key: unclean.leader.election.enable"},
		{"legacy-throttle", "1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{incOp("follower.replication.throttled.rate", set, strp("1"))},
			kerr.InvalidRequest.Code, "Cannot update these configs dynamically: [follower.replication.throttled.rate]"},
	} {
		code, msg := alterBroker(t, ts, tc.resource, tc.legacy, tc.cfgs...)
		if code != tc.code || !strings.HasPrefix(msg, tc.msg) {
			t.Errorf("%s: %d %q; want %d %q...", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	// What kafka-reassign-partitions --verify sends to each broker.
	if code, msg := alterBroker(t, ts, "1", false, incOp("leader.replication.throttled.rate", del, nil),
		incOp("follower.replication.throttled.rate", del, nil), incOp("replica.alter.log.dirs.io.max.bytes.per.second", del, nil)); code != 0 {
		t.Errorf("deleting the unset throttles: %d %s", code, msg)
	}

	// Kept in the metadata log: the values survive a restart.
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir)
	c, _ = describeConfig(t, ts, kmsg.ConfigResourceTypeBroker, "1", key)
	if derefOr(c.Value) != "true" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("after restart, broker 1 %s = %s from %v", key, derefOr(c.Value), c.Source)
	}
	// The legacy AlterConfigs replaces the resource's set: naming nothing
	// removes the broker's own value, leaving the cluster default.
	if code, msg := alterBroker(t, ts, "1", true); code != 0 {
		t.Fatalf("legacy empty alter: %d %s", code, msg)
	}
	c, _ = describeConfig(t, ts, kmsg.ConfigResourceTypeBroker, "1", key)
	if derefOr(c.Value) != "false" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("after the legacy alter, broker 1 %s = %s from %v", key, derefOr(c.Value), c.Source)
	}
}
