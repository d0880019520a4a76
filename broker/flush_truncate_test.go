package broker

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// TestTruncationLowersFlushTarget: a leader's appends under
// flush.messages=1 leave FlushTarget at their end; deposed and truncated
// below it, the partition's FlushTarget comes down to the log's end, so
// that it is not left above the recovery point the truncation lowered,
// which would hold CommittableEnd (and the high watermark, once this node
// leads again) at the recovery point until a flush passed the removed
// appends.
func TestTruncationLowersFlushTarget(t *testing.T) {
	ts := startServer(t, "")
	one := "1"
	createTopic(t, ts.admin(t), "flush-trunc", 1, map[string]*string{"flush.messages": &one})
	p := ts.parts.get("flush-trunc", 0)
	if p == nil || !p.IsLeader(ts.cfg.NodeID) {
		t.Fatal("partition flush-trunc-0 is not hosted and led here")
	}
	for i, v := range []string{"a", "b", "c"} {
		if got := <-produceAsync(ts.addr, "flush-trunc", testBatch(t, v), 5*time.Second); got.ErrorCode != 0 || got.BaseOffset != int64(i) {
			t.Fatalf("produce %d: code %d at offset %d", i, got.ErrorCode, got.BaseOffset)
		}
	}
	if ft, rp := p.FlushTarget.Load(), p.Log.RecoveryPoint(); ft != 3 || rp < 3 {
		t.Fatalf("after 3 flushed appends: FlushTarget %d, recovery point %d, want 3 and at least 3", ft, rp)
	}

	self, other := ts.cfg.NodeID, ts.cfg.NodeID+1
	a := p.Assign.Load()
	ts.applyAssignment(p, image.PartitionImage{Replicas: []int32{self, other}, ISR: []int32{self, other},
		Leader: other, LeaderEpoch: a.LeaderEpoch + 1, PartitionEpoch: a.PartitionEpoch + 1})
	if err := ts.fetchers.TruncateFollower(p, 1); err != nil {
		t.Fatal(err)
	}
	leo, rp, ft := p.Log.LogEndOffset(), p.Log.RecoveryPoint(), p.FlushTarget.Load()
	if leo != 1 || rp > 1 {
		t.Fatalf("after truncating to 1: log end %d, recovery point %d", leo, rp)
	}
	if ft > leo {
		t.Fatalf("FlushTarget %d above the truncated log's end %d (recovery point %d)", ft, leo, rp)
	}
	p.Mu.Lock()
	ce := p.CommittableEnd()
	p.Mu.Unlock()
	if ce != leo {
		t.Fatalf("CommittableEnd %d, want the log end %d", ce, leo)
	}
}
