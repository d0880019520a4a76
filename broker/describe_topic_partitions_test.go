package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeTopicPartitions sends one DescribeTopicPartitions request.
func describeTopicPartitions(t *testing.T, cl *kgo.Client, topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	req.ResponsePartitionLimit = limit
	req.Cursor = cursor
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("describe topic partitions: %v", err)
	}
	return resp
}

func dtpName(dt kmsg.DescribeTopicPartitionsResponseTopic) string {
	if dt.Topic == nil {
		return "<nil>"
	}
	return *dt.Topic
}

// TestDescribeTopicPartitions: every topic or the named ones, sorted, each
// partition described as Metadata describes it, unknown and illegal names
// answered with their errors, and ApiVersions advertising the key.
func TestDescribeTopicPartitions(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	for _, name := range []string{"dtp-b", "dtp-c", "dtp-a"} {
		createTopic(t, adm, name, 4, nil)
	}
	cl := ts.client(t)
	ctx := testContext(t)

	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, k := range versions.ApiKeys {
		if k.ApiKey == 75 {
			advertised = k.MinVersion == 0 && k.MaxVersion == 0
		}
	}
	if !advertised {
		t.Fatal("ApiVersions does not advertise DescribeTopicPartitions v0")
	}

	mreq := kmsg.NewPtrMetadataRequest()
	mreq.IncludeTopicAuthorizedOperations = true
	md, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	mdTopics := make(map[string]kmsg.MetadataResponseTopic)
	var mdNames []string
	for _, mt := range md.Topics {
		mdTopics[*mt.Topic] = mt
		mdNames = append(mdNames, *mt.Topic)
	}
	slices.Sort(mdNames)

	// Every topic: the same topics as Metadata, sorted, all partitions,
	// no next page.
	all := describeTopicPartitions(t, cl, nil, 2000, nil)
	var names []string
	for _, dt := range all.Topics {
		names = append(names, dtpName(dt))
	}
	if !slices.Equal(names, mdNames) {
		t.Fatalf("all topics: %q, Metadata has %q", names, mdNames)
	}
	if all.NextCursor != nil {
		t.Errorf("all topics: next cursor %+v", *all.NextCursor)
	}
	for _, dt := range all.Topics {
		mt := mdTopics[dtpName(dt)]
		if dt.ErrorCode != 0 || dt.TopicID != mt.TopicID || dt.IsInternal != mt.IsInternal || dt.AuthorizedOperations != mt.AuthorizedOperations {
			t.Errorf("topic %s: error %d id %x internal %v ops %d; Metadata: id %x internal %v ops %d",
				dtpName(dt), dt.ErrorCode, dt.TopicID, dt.IsInternal, dt.AuthorizedOperations, mt.TopicID, mt.IsInternal, mt.AuthorizedOperations)
		}
		if len(dt.Partitions) != len(mt.Partitions) {
			t.Fatalf("topic %s: %d partitions, Metadata %d", dtpName(dt), len(dt.Partitions), len(mt.Partitions))
		}
		for i, dp := range dt.Partitions {
			mp := mt.Partitions[i]
			if dp.Partition != mp.Partition || dp.ErrorCode != mp.ErrorCode || dp.LeaderID != mp.Leader || dp.LeaderEpoch != mp.LeaderEpoch ||
				!slices.Equal(dp.Replicas, mp.Replicas) || !slices.Equal(dp.ISR, mp.ISR) || !slices.Equal(dp.OfflineReplicas, mp.OfflineReplicas) {
				t.Errorf("%s-%d: %+v, Metadata %+v", dtpName(dt), i, dp, mp)
			}
			if dp.LeaderID != ts.cfg.NodeID || len(dp.Replicas) != 1 || dp.LeaderEpoch < 0 {
				t.Errorf("%s-%d: leader %d epoch %d replicas %v on a one-broker cluster", dtpName(dt), i, dp.LeaderID, dp.LeaderEpoch, dp.Replicas)
			}
			// Empty, not null: Kafka prints "Elr: " and not "Elr: N/A".
			if dp.EligibleLeaderReplicas == nil || len(dp.EligibleLeaderReplicas) != 0 || dp.LastKnownELR == nil || len(dp.LastKnownELR) != 0 {
				t.Errorf("%s-%d: ELR %v last known %v, want empty lists", dtpName(dt), i, dp.EligibleLeaderReplicas, dp.LastKnownELR)
			}
		}
	}

	// Named topics: each once, sorted, unknown and illegal names with
	// their errors.
	named := describeTopicPartitions(t, cl, []string{"dtp-c", "no-such-topic", "dtp-a", "dtp-c", "bad name"}, 2000, nil)
	type answer struct {
		name       string
		code       int16
		partitions int
	}
	var got []answer
	for _, dt := range named.Topics {
		got = append(got, answer{dtpName(dt), dt.ErrorCode, len(dt.Partitions)})
		if dt.ErrorCode != 0 && (dt.TopicID != [16]byte{} || dt.IsInternal) {
			t.Errorf("%s: error answer with id %x internal %v", dtpName(dt), dt.TopicID, dt.IsInternal)
		}
	}
	want := []answer{
		{"bad name", kerr.InvalidTopicException.Code, 0},
		{"dtp-a", 0, 4},
		{"dtp-c", 0, 4},
		{"no-such-topic", kerr.UnknownTopicOrPartition.Code, 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("named topics: %+v, want %+v", got, want)
	}
	if named.NextCursor != nil {
		t.Errorf("named topics: next cursor %+v", *named.NextCursor)
	}
	// An internal name is flagged even when the topic does not exist.
	internal := describeTopicPartitions(t, cl, []string{"__transaction_state"}, 2000, nil)
	if len(internal.Topics) != 1 || !internal.Topics[0].IsInternal {
		t.Errorf("__transaction_state: %+v", internal.Topics)
	}
}

// TestDescribeTopicPartitionsPaging pages through 3 topics of 4
// partitions with small limits, following NextCursor, and reads every
// partition back exactly once, in order; then the cursor checks Kafka's
// handler makes.
func TestDescribeTopicPartitionsPaging(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	topics := []string{"page-a", "page-b", "page-c"}
	for _, name := range topics {
		createTopic(t, adm, name, 4, nil)
	}
	cl := ts.client(t)
	var want []string
	for _, name := range topics {
		for p := range 4 {
			want = append(want, fmt.Sprintf("%s-%d", name, p))
		}
	}
	for _, tc := range []struct {
		limit   int32
		all     bool
		pages   int
		cursors []string // each page's NextCursor
	}{
		{limit: 5, pages: 3, cursors: []string{"page-b-1", "page-c-2", ""}},
		{limit: 4, pages: 3, cursors: []string{"page-b-0", "page-c-0", ""}},
		{limit: 3, pages: 4, cursors: []string{"page-a-3", "page-b-2", "page-c-1", ""}},
		{limit: 1, pages: 12},
		{limit: 0, pages: 12}, // raised to 1, as Kafka does
		{limit: 12, pages: 1, cursors: []string{""}},
		{limit: 5, all: true, pages: 3, cursors: []string{"page-b-1", "page-c-2", ""}},
	} {
		t.Run(fmt.Sprintf("limit=%d/all=%v", tc.limit, tc.all), func(t *testing.T) {
			var read, cursors []string
			var cursor *kmsg.DescribeTopicPartitionsRequestCursor
			pages := 0
			for {
				pages++
				if pages > 20 {
					t.Fatalf("no end after %d pages: %q", pages, read)
				}
				names := topics
				if tc.all {
					names = nil
				}
				resp := describeTopicPartitions(t, cl, names, tc.limit, cursor)
				n := 0
				for _, dt := range resp.Topics {
					if dt.ErrorCode != 0 {
						t.Fatalf("page %d: %s error %d", pages, dtpName(dt), dt.ErrorCode)
					}
					for _, dp := range dt.Partitions {
						read = append(read, fmt.Sprintf("%s-%d", dtpName(dt), dp.Partition))
						n++
					}
				}
				if n > int(max(tc.limit, 1)) {
					t.Errorf("page %d: %d partitions, limit %d", pages, n, tc.limit)
				}
				if resp.NextCursor == nil {
					cursors = append(cursors, "")
					break
				}
				cursors = append(cursors, fmt.Sprintf("%s-%d", resp.NextCursor.Topic, resp.NextCursor.Partition))
				cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
			}
			if !slices.Equal(read, want) {
				t.Errorf("read %q, want %q", read, want)
			}
			if pages != tc.pages {
				t.Errorf("%d pages, want %d", pages, tc.pages)
			}
			if tc.cursors != nil && !slices.Equal(cursors, tc.cursors) {
				t.Errorf("next cursors %q, want %q", cursors, tc.cursors)
			}
		})
	}

	// A cursor inside a topic skips the partitions before it; one past the
	// topic's end answers the topic with no partitions.
	resp := describeTopicPartitions(t, cl, topics, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "page-b", Partition: 6})
	if len(resp.Topics) != 2 || dtpName(resp.Topics[0]) != "page-b" || len(resp.Topics[0].Partitions) != 0 || len(resp.Topics[1].Partitions) != 4 {
		t.Errorf("cursor past page-b's end: %+v", resp.Topics)
	}

	// The cursor's topic must be among the named ones, and its partition
	// must not be negative: INVALID_REQUEST on every named topic.
	for _, tc := range []struct {
		names  []string
		cursor kmsg.DescribeTopicPartitionsRequestCursor
	}{
		{[]string{"page-a", "page-c"}, kmsg.DescribeTopicPartitionsRequestCursor{Topic: "page-b"}},
		{[]string{"page-a", "page-b"}, kmsg.DescribeTopicPartitionsRequestCursor{Topic: "page-b", Partition: -1}},
	} {
		resp := describeTopicPartitions(t, cl, tc.names, 2000, &tc.cursor)
		if len(resp.Topics) != len(tc.names) || resp.NextCursor != nil {
			t.Errorf("cursor %+v: %+v", tc.cursor, resp)
			continue
		}
		for i, dt := range resp.Topics {
			if dtpName(dt) != tc.names[i] || dt.ErrorCode != kerr.InvalidRequest.Code || len(dt.Partitions) != 0 {
				t.Errorf("cursor %+v: topic %s error %d partitions %d", tc.cursor, dtpName(dt), dt.ErrorCode, len(dt.Partitions))
			}
		}
	}
	// Every topic from a negative cursor partition: nothing named, so an
	// empty answer.
	resp = describeTopicPartitions(t, cl, nil, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "page-a", Partition: -1})
	if len(resp.Topics) != 0 || resp.NextCursor != nil {
		t.Errorf("all topics, negative cursor partition: %+v", resp)
	}
}
