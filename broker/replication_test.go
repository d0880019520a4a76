package broker

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/replica"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// produceAsync sends one acks=all produce of records to topic/0 on its own
// connection and delivers the partition's answer (or an error) on the
// channel.
func produceAsync(addr, topic string, records []byte, timeout time.Duration) <-chan kmsg.ProduceResponseTopicPartition {
	out := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() {
		fail := kmsg.NewProduceResponseTopicPartition()
		fail.ErrorCode = -2 // no answer
		defer func() { out <- fail }()
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(timeout + 10*time.Second))
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = -1
		req.TimeoutMillis = int32(timeout / time.Millisecond)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := nc.Write(encodeRequest(req, 7)); err != nil {
			return
		}
		frame, err := protocol.ReadFrame(nc, 1<<20, nil)
		if err != nil || len(frame) < 5 || binary.BigEndian.Uint32(frame) != 7 {
			return
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		if err := resp.ReadFrom(frame[5:]); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return
		}
		fail = resp.Topics[0].Partitions[0]
	}()
	return out
}

// leaderBatch is a batch as a leader wrote it: base offset and leader
// epoch set, as a follower fetches it.
func leaderBatch(t *testing.T, base int64, epoch int32, values ...string) []byte {
	t.Helper()
	var recs []protocol.Record
	for i, v := range values {
		recs = append(recs, protocol.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{BaseOffset: base, PartitionLeaderEpoch: epoch, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeposedLeaderAnswersNotLeader: an acks=all produce waiting for its
// followers when its leader steps down must not be acknowledged. The
// deposed leader truncates its unreplicated tail as a follower and takes
// the new leader's high watermark, which soon passes the offset the
// produce waited for, but at that offset lies another record: the answer
// is NOT_LEADER_OR_FOLLOWER, at once, as Kafka completes delayed produces
// when a leader becomes a follower.
func TestDeposedLeaderAnswersNotLeader(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "deposed", 1, nil)
	p := ts.parts.get("deposed", 0)
	if p == nil || !p.IsLeader(ts.cfg.NodeID) {
		t.Fatal("partition deposed-0 is not hosted and led here")
	}
	self := ts.cfg.NodeID
	other := self + 1
	a := p.Assign.Load()
	// A follower that has never fetched holds the high watermark back, so
	// the produce below waits.
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{self, other}, ISR: []int32{self, other},
		Leader: self, LeaderEpoch: a.LeaderEpoch + 1, PartitionEpoch: a.PartitionEpoch + 1})

	answer := produceAsync(ts.addr, "deposed", testBatch(t, "never-replicated"), 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for p.Log.LogEndOffset() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the produce was not appended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the follower fetched", hw)
	}

	// The other replica becomes leader without the record; this node
	// follows it: it truncates, fetches the new leader's records and its
	// high watermark.
	newEpoch := a.LeaderEpoch + 2
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{self, other}, ISR: []int32{self, other},
		Leader: other, LeaderEpoch: newEpoch, PartitionEpoch: a.PartitionEpoch + 2})
	if err := ts.fetchers.TruncateFollower(p, 0); err != nil {
		t.Fatal(err)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LogStartOffset = 3, 0
	rp.RecordBatches = leaderBatch(t, 0, newEpoch, "new-0", "new-1", "new-2")
	if err := ts.fetchers.ApplyFetched(p, &replica.FollowState{Epoch: newEpoch, Truncated: true}, &rp); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("follower high watermark %d, want 3", hw)
	}

	start := time.Now()
	got := <-answer
	if got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("deposed leader answered code %d at offset %d (%v), want NOT_LEADER_OR_FOLLOWER: the record at that offset is another",
			got.ErrorCode, got.BaseOffset, kerr.ErrorForCode(got.ErrorCode))
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("the answer came after %v: stepping down must complete waiting produces at once", waited)
	}
}

// TestFollowerRefusesLateAppend: a produce checks leadership without the
// partition lock, then appends under it; if the node became a follower in
// between, the append must be refused, or the produce's batch would sit in
// the follower's log at offsets where the new leader has other records.
func TestFollowerRefusesLateAppend(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "late", 1, nil)
	p := ts.parts.get("late", 0)
	if p == nil || !p.IsLeader(ts.cfg.NodeID) {
		t.Fatal("partition late-0 is not hosted and led here")
	}
	a := p.Assign.Load()
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{ts.cfg.NodeID, ts.cfg.NodeID + 1}, ISR: []int32{ts.cfg.NodeID, ts.cfg.NodeID + 1},
		Leader: ts.cfg.NodeID + 1, LeaderEpoch: a.LeaderEpoch + 1, PartitionEpoch: a.PartitionEpoch + 1})
	_, err := p.AppendLocal(testBatch(t, "late"), time.Now().UnixMilli())
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if leo := p.Log.LogEndOffset(); leo != 0 {
		t.Fatalf("follower log end %d after a refused append, want 0", leo)
	}
}

// TestAppendToRemovedLogIsNotADiskError: a produce that passed the
// leadership check while its partition was being removed from this node
// (deleted, or moved away by a reassignment) meets a closed log. That is
// NOT_LEADER_OR_FOLLOWER for the client, not a disk error: taking the log
// dir offline for it would take every other partition there down too.
func TestAppendToRemovedLogIsNotADiskError(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "gone", 1, nil)
	createTopic(t, ts.admin(t), "stays", 1, nil)
	p := ts.parts.get("gone", 0)
	if p == nil {
		t.Fatal("partition gone-0 is not hosted here")
	}
	// Deleted with its directory, and at a new leader epoch, so the
	// append first writes the leader-epoch checkpoint into the removed
	// directory (ENOENT), as a produce racing a DeleteTopics does.
	if err := ts.logs.DeleteLog("gone", 0); err != nil {
		t.Fatal(err)
	}
	p.LeaderEpoch.Add(1)
	_, err := p.AppendLocal(testBatch(t, "gone"), time.Now().UnixMilli())
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append to a deleted log: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	p.LeaderEpoch.Add(-1)
	_, err = p.AppendLocal(testBatch(t, "gone"), time.Now().UnixMilli())
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append to a closed log: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if ts.dirOffline(p) {
		t.Fatal("a removed log took its log dir offline")
	}
	stays := ts.parts.get("stays", 0)
	if _, err := stays.AppendLocal(testBatch(t, "stays"), time.Now().UnixMilli()); err != nil {
		t.Fatalf("append to another partition of the same dir: %v", err)
	}
}
