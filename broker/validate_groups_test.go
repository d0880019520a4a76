package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's request validation for the group and transaction APIs that
// KafkaApis does before the coordinators see a request.

func TestValidateInitProducerID(t *testing.T) {
	ts := startServer(t, "")
	for _, tc := range []struct {
		name      string
		pid       int64
		epoch     int16
		wantCode  int16
		wantFresh bool
	}{
		{"new producer", -1, -1, 0, true},
		{"id without epoch", 5, -1, kerr.InvalidRequest.Code, false},
		{"epoch without id", -1, 3, kerr.InvalidRequest.Code, false},
		{"bump of an idempotent producer", 5, 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = 4
			req.TransactionTimeoutMillis = 60000
			req.ProducerID, req.ProducerEpoch = tc.pid, tc.epoch
			resp := pipeline(t, ts.addr, []kmsg.Request{req})[0].(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != tc.wantCode {
				t.Fatalf("error %d, want %d", resp.ErrorCode, tc.wantCode)
			}
			if fresh := resp.ProducerID >= 0 && resp.ProducerEpoch == 0; fresh != tc.wantFresh {
				t.Fatalf("answered producer %d epoch %d; a fresh id: %v, want %v", resp.ProducerID, resp.ProducerEpoch, fresh, tc.wantFresh)
			}
		})
	}
}

func TestValidateOffsetDelete(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "od-known", 2, nil)
	readyGroupCoordinator(t, adm, "od-group", "od-known")

	request := func(group string, topics map[string][]int32) *kmsg.OffsetDeleteRequest {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, name := range []string{"od-known", "od-missing"} {
			ps, ok := topics[name]
			if !ok {
				continue
			}
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = name
			for _, p := range ps {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	codes := func(resp *kmsg.OffsetDeleteResponse) map[string]map[int32]int16 {
		out := make(map[string]map[int32]int16)
		for _, t := range resp.Topics {
			if out[t.Topic] == nil {
				out[t.Topic] = make(map[int32]int16)
			}
			for _, p := range t.Partitions {
				out[t.Topic][p.Partition] = p.ErrorCode
			}
		}
		return out
	}
	unknown := kerr.UnknownTopicOrPartition.Code

	// An unknown topic and an unknown partition of a known topic answer
	// UNKNOWN_TOPIC_OR_PARTITION; the known partition is deleted.
	resp := pipeline(t, ts.addr, []kmsg.Request{request("od-group", map[string][]int32{"od-known": {0, 7}, "od-missing": {0, 1}})})[0].(*kmsg.OffsetDeleteResponse)
	got := codes(resp)
	if resp.ErrorCode != 0 || got["od-known"][0] != 0 || got["od-known"][7] != unknown || got["od-missing"][0] != unknown || got["od-missing"][1] != unknown || len(got["od-known"]) != 2 {
		t.Fatalf("mixed request answered %d %v", resp.ErrorCode, got)
	}
	offs, err := adm.FetchOffsets(testContext(t), "od-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("od-known", 0); ok {
		t.Fatalf("od-known-0 still committed at %d after its deletion", o.At)
	}

	// A group-level error replaces the per-partition answers.
	resp = pipeline(t, ts.addr, []kmsg.Request{request("od-no-such-group", map[string][]int32{"od-missing": {0}})})[0].(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != kerr.GroupIDNotFound.Code || len(resp.Topics) != 0 {
		t.Fatalf("unknown group answered %d with topics %v, want GROUP_ID_NOT_FOUND alone", resp.ErrorCode, codes(resp))
	}
}
