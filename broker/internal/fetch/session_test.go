package fetch

import (
	"testing"
	"time"
)

// TestSessionStats: the cache's figures are what Kafka's FetchSessionCache
// reports: sessions cached, the partitions they hold as of their last
// use, and the evictions made to let new sessions in (a follower's
// session evicts a consumer's at any age; a consumer's cannot evict a
// young one, and gets no session).
func TestSessionStats(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	parts := func(n int) []Part {
		out := make([]Part, n)
		for i := range out {
			out[i] = Part{Topic: "t", Partition: int32(i)}
		}
		return out
	}
	c := NewSessions(2)
	a := c.Create(now, false, parts(3))
	c.Create(now, false, parts(2))
	if st := c.Stats(); st != (SessionStats{Sessions: 2, PartitionsCached: 5}) {
		t.Fatalf("two consumer sessions: %+v", st)
	}
	c.Touch(a, now.Add(time.Second), 4) // a grew to 4 partitions
	if s := c.Create(now.Add(2*time.Second), false, parts(1)); s != nil {
		t.Fatal("a consumer's new session evicted a young one")
	}
	if st := c.Stats(); st != (SessionStats{Sessions: 2, PartitionsCached: 6}) {
		t.Fatalf("after a refused session: %+v", st)
	}
	// A follower's evicts the smallest consumer session (2 partitions).
	if s := c.Create(now.Add(3*time.Second), true, parts(7)); s == nil {
		t.Fatal("a follower's session found no room")
	}
	if st := c.Stats(); st != (SessionStats{Sessions: 2, PartitionsCached: 11, Evictions: 1}) {
		t.Fatalf("after a follower's session: %+v", st)
	}
	c.Remove(a.ID())
	if st := c.Stats(); st != (SessionStats{Sessions: 1, PartitionsCached: 7, Evictions: 1}) {
		t.Fatalf("after a session closed: %+v", st)
	}
}
