package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestValidateDeleteTopics: what Kafka's ControllerApis.deleteTopics
// refuses is answered INVALID_REQUEST once and deletes nothing; the rest
// of the request still runs.
func TestValidateDeleteTopics(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	for _, name := range []string{"dt-dup", "dt-both", "dt-byid", "dt-ok"} {
		createTopic(t, adm, name, 1, nil)
	}
	details, err := adm.ListTopics(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	id := func(name string) [16]byte { return details[name].ID }
	topic := func(name *string, id [16]byte) kmsg.DeleteTopicsRequestTopic {
		tt := kmsg.NewDeleteTopicsRequestTopic()
		tt.Topic, tt.TopicID = name, id
		return tt
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.TimeoutMillis = 10000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		topic(kmsg.StringPtr("dt-dup"), [16]byte{}),
		topic(kmsg.StringPtr("dt-dup"), [16]byte{}),
		topic(kmsg.StringPtr("dt-both"), id("dt-both")),
		topic(nil, id("dt-byid")),
		topic(nil, id("dt-byid")),
		topic(nil, [16]byte{}),
		topic(kmsg.StringPtr("dt-ok"), [16]byte{}),
	}
	resp := pipeline(t, ts.addr, []kmsg.Request{req})[0].(*kmsg.DeleteTopicsResponse)
	type answer struct {
		code int16
		msg  string
	}
	got := make(map[string][]answer)
	for _, tr := range resp.Topics {
		key := "<none>"
		switch {
		case tr.Topic != nil:
			key = *tr.Topic
		case tr.TopicID == id("dt-byid"):
			key = "dt-byid"
		}
		msg := ""
		if tr.ErrorMessage != nil {
			msg = *tr.ErrorMessage
		}
		got[key] = append(got[key], answer{tr.ErrorCode, msg})
	}
	invalid := kerr.InvalidRequest.Code
	for key, want := range map[string]answer{
		"dt-dup":  {invalid, "Duplicate topic name."},
		"dt-both": {invalid, "You may not specify both topic name and topic id."},
		"dt-byid": {invalid, "Duplicate topic id."},
		"<none>":  {invalid, "Neither topic name nor id were specified."},
		"dt-ok":   {0, ""},
	} {
		if len(got[key]) != 1 || got[key][0].code != want.code || (want.msg != "" && got[key][0].msg != want.msg) {
			t.Errorf("%s answered %+v, want once %+v", key, got[key], want)
		}
	}
	// Read back with a raw Metadata request: franz-go answers
	// ListTopics from its recent metadata.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = nil
	exists := make(map[string]bool)
	for _, tr := range pipeline(t, ts.addr, []kmsg.Request{md})[0].(*kmsg.MetadataResponse).Topics {
		if tr.Topic != nil && tr.ErrorCode == 0 {
			exists[*tr.Topic] = true
		}
	}
	for _, name := range []string{"dt-dup", "dt-both", "dt-byid"} {
		if !exists[name] {
			t.Errorf("%s was deleted by a refused request entry", name)
		}
	}
	if exists["dt-ok"] {
		t.Error("dt-ok was not deleted")
	}
}
