package group

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// countingTopics counts how often the coordinator takes a snapshot.
type countingTopics struct {
	*fakeTopics
	calls atomic.Int64
}

func (c *countingTopics) Topics() map[string]TopicInfo {
	c.calls.Add(1)
	return c.fakeTopics.Topics()
}

// TestTopicsChangedTakesNoSnapshot: the metadata watcher reports every
// topic created, and a snapshot is a pass over every topic, so a change
// only marks the shards' snapshots stale. The first heartbeat after the
// changes takes one (on its shard) and sees the latest topics.
func TestTopicsChangedTakesNoSnapshot(t *testing.T) {
	view := &countingTopics{fakeTopics: newFakeTopics()}
	cfg := testConfig()
	cfg.Topics = view
	h := newHarness(t, cfg)
	start := view.calls.Load()
	for i := range 100 {
		if i == 99 {
			view.set("late:3")
		}
		h.c.TopicsChanged()
	}
	if n := view.calls.Load() - start; n != 0 {
		t.Fatalf("100 topic changes took %d snapshots, want none before a group needs one", n)
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID = "g", "m1"
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{"late"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := h.c.ConsumerGroupHeartbeat(context.Background(), ClientInfo{ClientID: "c"}, req)()
	if r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %s", coordtest.ErrName(r.ErrorCode))
	}
	if n := view.calls.Load() - start; n != 1 {
		t.Fatalf("the heartbeat after the changes took %d snapshots, want 1", n)
	}
	if r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("assignment %+v, want the 3 partitions of the topic made before the last change", r.Assignment)
	}
}
