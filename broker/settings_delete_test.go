package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregorbroker/gregor/config"
)

// TestDeleteTopicDisabled: with delete.topic.enable=false DeleteTopics
// answers TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3) by name and
// by id, and the topic and its records stay.
func TestDeleteTopicDisabled(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.DeleteTopicEnable = false })
	adm := ts.admin(t)
	createTopic(t, adm, "keep", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("keep"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("still here")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	resps, err := adm.DeleteTopics(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["keep"]; r.Err != kerr.TopicDeletionDisabled {
		t.Fatalf("DeleteTopics by name: %v, want TOPIC_DELETION_DISABLED", r.Err)
	}
	td, err := adm.ListTopics(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	id := td["keep"].ID

	byID := kmsg.NewPtrDeleteTopicsRequest()
	byID.Version = 6
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = id
	byID.Topics = append(byID.Topics, rt)
	byID.TimeoutMillis = 5000
	resp, err := byID.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicDeletionDisabled.Code || resp.Topics[0].TopicID != id {
		t.Fatalf("DeleteTopics v6 by id: %+v, want one topic %x with code 73", resp.Topics, id)
	}

	old := ts.client(t, kgo.MaxVersions(kversion.V2_0_0()))
	v2 := kmsg.NewPtrDeleteTopicsRequest()
	v2.TopicNames = []string{"keep"}
	v2.TimeoutMillis = 5000
	resp, err = v2.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || resp.Version >= 3 {
		t.Fatalf("DeleteTopics v%d: %+v, want INVALID_REQUEST", resp.Version, resp.Topics)
	}

	td, err = adm.ListTopics(ctx, "keep")
	if err != nil || td["keep"].Err != nil || len(td["keep"].Partitions) != 1 {
		t.Fatalf("topic after refused deletions: %+v, %v", td["keep"], err)
	}
	consumer := ts.client(t, kgo.ConsumeTopics("keep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "still here" {
		t.Fatalf("records after refused deletions: %v (%v)", recs, fs.Errors())
	}
}
