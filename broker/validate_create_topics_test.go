package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestValidateCreateTopics: a topic named twice is answered once with
// INVALID_REQUEST, and a negative timeout answers REQUEST_TIMED_OUT, each
// creating nothing, as Kafka's ControllerApis and controller do.
func TestValidateCreateTopics(t *testing.T) {
	ts := startServer(t, "")
	create := func(timeout int32, names ...string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = timeout
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	resps := pipeline(t, ts.addr, []kmsg.Request{
		create(10000, "ct-dup", "ct-ok", "ct-dup"),
		create(-1, "ct-late"),
		md,
	})

	dup := resps[0].(*kmsg.CreateTopicsResponse)
	answers := make(map[string][]int16)
	for _, tr := range dup.Topics {
		answers[tr.Topic] = append(answers[tr.Topic], tr.ErrorCode)
		if tr.Topic == "ct-dup" && (tr.ErrorMessage == nil || *tr.ErrorMessage != "Duplicate topic name.") {
			t.Errorf("ct-dup message %v", tr.ErrorMessage)
		}
	}
	if len(answers["ct-dup"]) != 1 || answers["ct-dup"][0] != kerr.InvalidRequest.Code || len(answers["ct-ok"]) != 1 || answers["ct-ok"][0] != 0 {
		t.Fatalf("answers %v, want ct-dup once INVALID_REQUEST and ct-ok created", answers)
	}
	if code := resps[1].(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.RequestTimedOut.Code {
		t.Fatalf("negative timeout answered %d, want REQUEST_TIMED_OUT", code)
	}
	exists := make(map[string]bool)
	for _, tr := range resps[2].(*kmsg.MetadataResponse).Topics {
		if tr.Topic != nil && tr.ErrorCode == 0 {
			exists[*tr.Topic] = true
		}
	}
	if exists["ct-dup"] || exists["ct-late"] || !exists["ct-ok"] {
		t.Fatalf("topics after the requests: %v, want ct-ok alone", exists)
	}
}
