package group

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// nopStore acknowledges appends at once, so benchmarks measure the
// coordinator, not a log.
type nopStore struct{ records atomic.Int64 }

func (s *nopStore) Append(_ context.Context, _ int32, recs []Record) error {
	s.records.Add(int64(len(recs)))
	return nil
}

// AppendTxn implements TxnStore.
func (s *nopStore) AppendTxn(_ context.Context, _ int32, _ TxnAppend, recs []Record) error {
	s.records.Add(int64(len(recs)))
	return nil
}

// AppendMarker implements TxnStore.
func (s *nopStore) AppendMarker(context.Context, int32, TxnMarker) error {
	s.records.Add(1)
	return nil
}

// nopPlainStore is a Store without transactions.
type nopPlainStore struct{ inner nopStore }

func (s *nopPlainStore) Append(ctx context.Context, p int32, recs []Record) error {
	return s.inner.Append(ctx, p, recs)
}

func benchCoordinator(b *testing.B) *Coordinator {
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	c, err := New(cfg, &nopStore{}, SystemClock{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	for p := range cfg.OffsetsTopicPartitions {
		if err := c.Load(context.Background(), p, coordtest.SeqOf(nil)); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

func commitRequest(group string, partitions int) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = group
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "events"
	for p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Offset = 1000
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// BenchmarkOffsetCommit is one group committing 12 partitions per request.
func BenchmarkOffsetCommit(b *testing.B) {
	c := benchCoordinator(b)
	req := commitRequest("bench", 12)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := c.OffsetCommit(ctx, req)(); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
}

// BenchmarkOffsetCommitGroups is commits from many goroutines spread over
// 100 groups, which land on every shard.
func BenchmarkOffsetCommitGroups(b *testing.B) {
	c := benchCoordinator(b)
	reqs := make([]*kmsg.OffsetCommitRequest, 100)
	for i := range reqs {
		reqs[i] = commitRequest(fmt.Sprintf("group-%d", i), 1)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			req := reqs[next.Add(1)%int64(len(reqs))]
			if resp := c.OffsetCommit(ctx, req)(); resp.Topics[0].Partitions[0].ErrorCode != 0 {
				b.Error(resp.Topics[0].Partitions[0].ErrorCode)
				return
			}
		}
	})
}

// BenchmarkTxnOffsetCommit is one transaction's offsets (12 partitions)
// committed with TxnOffsetCommit and then its COMMIT marker, as a
// consume-transform-produce loop does per transaction.
func BenchmarkTxnOffsetCommit(b *testing.B) {
	c := benchCoordinator(b)
	offsets := make(map[tp]int64)
	for p := range 12 {
		offsets[tp{"events", int32(p)}] = 1000
	}
	req := txnCommitRequest(4, "bench", 1, offsets)
	partition := c.PartitionFor("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := c.TxnOffsetCommit(ctx, req)(); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if err := c.CompleteTransaction(ctx, partition, TxnMarker{ProducerID: 1, Commit: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeat is a stable member's heartbeat.
func BenchmarkHeartbeat(b *testing.B) {
	cfg := testConfig()
	cfg.GroupInitialRebalanceDelayMs = 0
	h := newHarness(b, cfg)
	ctx := context.Background()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group = "bench"
	join.SessionTimeoutMillis = 30000
	join.RebalanceTimeoutMillis = 30000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jr := h.c.JoinGroup(ctx, ClientInfo{ClientID: "c"}, join)()
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "bench", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	if sr := h.c.SyncGroup(ctx, sync)(); sr.ErrorCode != 0 {
		b.Fatal(sr.ErrorCode)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "bench", jr.MemberID, jr.Generation
	b.ReportAllocs()
	for b.Loop() {
		if code := h.c.Heartbeat(ctx, hb)().ErrorCode; code != 0 {
			b.Fatal(code)
		}
	}
}

// BenchmarkReplay is loading a partition of 100,000 committed offsets.
func BenchmarkReplay(b *testing.B) {
	var recs []Record
	for g := range 100 {
		for p := range 1000 {
			recs = append(recs, offsetCommitRecord(fmt.Sprintf("group-%d", g), tp{"events", int32(p)}, offsetValue{offset: int64(p), leaderEpoch: 1, commitTimestamp: 1, expireTimestamp: -1}))
		}
	}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		groups, err := replay(0, coordtest.SeqOf(recs), 0, log)
		if err != nil || len(groups.classic) != 100 {
			b.Fatal(err, len(groups.classic))
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
