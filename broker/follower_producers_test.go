package broker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/replica"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// leaderIdempotentBatch is one record of producer pid (epoch 0) with
// sequence seq, at offset base in leader epoch epoch, as a follower
// fetches it.
func leaderIdempotentBatch(t *testing.T, base int64, epoch int32, pid int64, seq int32, value string) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{BaseOffset: base, PartitionLeaderEpoch: epoch, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}, []protocol.Record{{Value: []byte(value)}}, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFollowerKeepsProducerState: a follower brings its producer state up
// to date with each fetched append, as Kafka's follower does, so it
// snapshots that state when its log rolls. Promoted, it needs no replay
// of its log to know the producer's sequence, and a retry of the
// producer's last batch is answered as the duplicate it is, at the
// batch's first offset.
func TestFollowerKeepsProducerState(t *testing.T) {
	ts := startServer(t, "")
	seg := "1048576"
	createTopic(t, ts.admin(t), "fprod", 1, map[string]*string{"segment.bytes": &seg})
	p := ts.parts.get("fprod", 0)
	if p == nil {
		t.Fatal("partition fprod-0 is not hosted here")
	}
	self, other := ts.cfg.NodeID, ts.cfg.NodeID+1
	a := p.Assign.Load()
	epoch := a.LeaderEpoch + 1
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{self, other}, ISR: []int32{self, other},
		Leader: other, LeaderEpoch: epoch, PartitionEpoch: a.PartitionEpoch + 1})

	// Four batches of 400 KiB: the third does not fit the 1 MiB segment,
	// so the log rolls at offset 2.
	const pid = 7000
	pad := strings.Repeat("x", 400<<10)
	var last []byte
	for i := range 4 {
		last = leaderIdempotentBatch(t, int64(i), epoch, pid, int32(i), pad)
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LogStartOffset = int64(i+1), 0
		rp.RecordBatches = last
		if err := ts.fetchers.ApplyFetched(p, &replica.FollowState{Epoch: epoch, Truncated: true}, &rp); err != nil {
			t.Fatalf("apply fetched batch %d: %v", i, err)
		}
	}
	if leo := p.Log.LogEndOffset(); leo != 4 {
		t.Fatalf("follower log end %d, want 4", leo)
	}
	snaps, err := filepath.Glob(filepath.Join(p.Log.Dir(), "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(p.Log.Dir(), producerstate.SnapshotFileName(2))
	found := false
	for _, s := range snaps {
		found = found || s == want
	}
	if !found {
		t.Fatalf("snapshots %v: want one at the roll to offset 2 (%s)", snaps, filepath.Base(want))
	}
	p.Mu.Lock()
	st := p.Producers
	p.Mu.Unlock()
	if st == nil {
		t.Fatal("the follower dropped its producer state")
	}
	if bs := st.Batches(pid); len(bs) == 0 || bs[len(bs)-1].LastSeq != 3 || bs[len(bs)-1].LastOffset != 3 {
		t.Fatalf("follower's batches of producer %d: %+v, want the last at sequence 3, offset 3", pid, bs)
	}

	// Promoted, alone in the ISR: the producer retries its last batch.
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{self, other}, ISR: []int32{self},
		Leader: self, LeaderEpoch: epoch + 1, PartitionEpoch: a.PartitionEpoch + 2})
	retry := idempotentBatch(t, pid, 0, 3, pad)
	got := <-produceAsync(ts.addr, "fprod", retry, 5*time.Second)
	if got.ErrorCode != 0 || got.BaseOffset != 3 {
		t.Fatalf("retry of the last batch: code %d at offset %d, want a duplicate answered at offset 3", got.ErrorCode, got.BaseOffset)
	}
	if leo := p.Log.LogEndOffset(); leo != 4 {
		t.Fatalf("log end %d after the retry, want 4: the duplicate was appended", leo)
	}
}
