package integration

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterDivergence: a partition leader appends records its followers
// never get (acks=1 while they are frozen with SIGSTOP), then dies. The
// followers come back, one of them is elected from the ISR and takes
// acks=all writes; the old leader returns as a follower, truncates its
// unreplicated tail (OffsetForLeaderEpoch) and fetches the new records.
// In the end the three nodes hold the partition byte for byte alike, and
// the unreplicated records are in none of them.
//
// The partition's leader is made the active controller too, so that
// freezing the followers leaves no controller able to change the ISR while
// they are gone, and the controller elected afterwards starts every
// broker's session afresh: only the dead leader is fenced.
func TestClusterDivergence(t *testing.T) {
	const topic = "div"
	c := cuStartCluster(t, 3, 0, "replica.fetch.wait.max.ms=200")
	cl := c.client(nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))

	var leader int32
	cuWait(t, 30*time.Second, "an active controller", func() error {
		var err error
		leader, _, err = cuQuorumLeader(cl)
		if err == nil && leader < 1 {
			err = fmt.Errorf("leader %d", leader)
		}
		return err
	})
	var followers []int32
	for _, n := range c.nodes {
		if n.id != leader {
			followers = append(followers, n.id)
		}
	}
	cuCreateAssigned(t, cl, topic, [][]int32{append([]int32{leader}, followers...)}, nil)
	st := cuWaitISR(t, cl, topic, 0, []int32{1, 2, 3})
	if st.leader != leader {
		t.Fatalf("%s-0 is led by %d, not its preferred replica %d", topic, st.leader, leader)
	}

	var committed []string
	for i := range 10 {
		committed = append(committed, fmt.Sprintf("committed-%d", i))
	}
	cuProduceSync(t, cl, topic, 0, committed...)
	settled := cuWaitSameLog(t, c, topic, 10, "committed-9")
	t.Logf("leader %d (also the active controller) and followers %v hold %d committed records, %d bytes each",
		leader, followers, len(committed), len(settled))

	// Freeze the followers, then let any fetch of theirs that the leader
	// still held run out (replica.fetch.wait.max.ms), so nothing written
	// next reaches them, not even through a socket buffer.
	if now, _, err := cuQuorumLeader(cl); err != nil || now != leader {
		t.Fatalf("the active controller moved from %d to %d (%v) before the followers were frozen", leader, now, err)
	}
	for _, f := range followers {
		c.pause(f)
	}
	time.Sleep(time.Second)
	solo := newClient(t, c.node(leader).addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	var divergent []string
	for i := range 5 {
		divergent = append(divergent, fmt.Sprintf("divergent-%d", i))
	}
	for i, r := range cuProduceSync(t, solo, topic, 0, divergent...) {
		if r.Offset != int64(len(committed)+i) {
			t.Fatalf("acks=1 record %d landed at offset %d, want %d", i, r.Offset, len(committed)+i)
		}
	}
	solo.Close()
	old, err := cuLogBytes(c.node(leader), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte("divergent-4")) {
		t.Fatalf("the leader's log lacks the acks=1 records it acknowledged")
	}
	c.kill(leader)
	for _, f := range followers {
		c.resume(f)
	}

	// One of the followers leads now, in a later epoch, and takes writes.
	live := c.client(c.seedsExcept(leader), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(100))
	cuWait(t, 60*time.Second, "a new leader for "+topic, func() error {
		s, err := cuPartitionState(live, topic, 0)
		if err == nil && (!slices.Contains(followers, s.leader) || s.epoch <= st.epoch) {
			err = fmt.Errorf("leader %d in epoch %d (old leader %d in epoch %d)", s.leader, s.epoch, leader, st.epoch)
		}
		return err
	})
	var fresh []string
	for i := range 10 {
		fresh = append(fresh, fmt.Sprintf("new-leader-%d", i))
	}
	for i, r := range cuProduceSync(t, live, topic, 0, fresh...) {
		if r.Offset != int64(len(committed)+i) {
			t.Fatalf("record %d of the new leader landed at offset %d, want %d", i, r.Offset, len(committed)+i)
		}
	}

	// The old leader returns as a follower: same bytes everywhere, the
	// unreplicated records nowhere.
	c.restart(leader)
	final := cuWaitSameLog(t, c, topic, int64(len(committed)+len(fresh)), "new-leader-9")
	for _, n := range c.nodes {
		b, err := cuLogBytes(n, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("divergent-")) {
			t.Fatalf("node %d still holds unreplicated records", n.id)
		}
	}
	if !bytes.Equal(final[:len(settled)], settled) {
		t.Fatalf("the committed prefix changed: %d bytes before, now %x", len(settled), final[:len(settled)])
	}
	batches, _ := cuBatches(final)
	if last := batches[len(batches)-1]; last.epoch <= batches[0].epoch {
		t.Fatalf("the new leader's batches carry epoch %d, the old leader's %d", last.epoch, batches[0].epoch)
	}
	cuWaitISR(t, live, topic, 0, []int32{1, 2, 3})
	var read []string
	for _, r := range readAllFrom(t, c.seeds(), topic)[0] {
		read = append(read, string(r.Value))
	}
	if want := append(slices.Clone(committed), fresh...); !slices.Equal(read, want) {
		t.Fatalf("read back %q, want %q", read, want)
	}
	t.Logf("old leader %d truncated %d unreplicated records; all three nodes hold the same %d bytes (%d batches)",
		leader, len(divergent), len(final), len(batches))
}

// cuWaitSameLog waits until every node of c holds the same whole batches
// of topic-0, ending at offset end and containing marker, and returns those
// bytes.
func cuWaitSameLog(t *testing.T, c *cuCluster, topic string, end int64, marker string) []byte {
	t.Helper()
	var same []byte
	cuWait(t, 60*time.Second, fmt.Sprintf("%s-0 alike on every node up to offset %d", topic, end), func() error {
		var first []byte
		for i, n := range c.nodes {
			b, err := cuLogBytes(n, topic, 0)
			if err != nil {
				return err
			}
			batches, err := cuBatches(b)
			if err != nil {
				return fmt.Errorf("node %d: %w", n.id, err)
			}
			if len(batches) == 0 || batches[len(batches)-1].last+1 != end {
				return fmt.Errorf("node %d: %d batches, last %+v", n.id, len(batches), batches)
			}
			if !bytes.Contains(b, []byte(marker)) {
				return fmt.Errorf("node %d lacks %q", n.id, marker)
			}
			if i == 0 {
				first = b
			} else if !bytes.Equal(b, first) {
				return fmt.Errorf("node %d's %d bytes differ from node %d's %d", n.id, len(b), c.nodes[0].id, len(first))
			}
		}
		same = first
		return nil
	})
	return same
}
