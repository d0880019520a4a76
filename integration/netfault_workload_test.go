package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The workloads the network fault tests run through a fault, and what
// each is checked for afterwards. Every client goes through the
// cluster's client links and uses short timeouts, so a connection that
// answers nothing is given up in seconds rather than Kafka's default
// half minute.

// nfCounts is one cell of the fault matrix.
type nfCounts struct {
	acked, lost, duplicated, reordered, truncatedRead, divergent int
	abortedRead                                                  int      // records of acknowledged aborts read at read_committed
	problems                                                     []string // the first few, for the test's log
}

func (n nfCounts) bad() int {
	return n.lost + n.duplicated + n.reordered + n.truncatedRead + n.divergent + n.abortedRead
}

// addProblems sorts the history checker's findings into the columns.
func (n *nfCounts) addProblems(problems []string) {
	for _, p := range problems {
		switch {
		case strings.HasSuffix(p, ", lost") || strings.Contains(p, ", read at "):
			n.lost++
		case strings.Contains(p, "duplicated") || strings.Contains(p, "read twice"):
			n.duplicated++
		case strings.Contains(p, "(reordered)"):
			n.reordered++
		case strings.HasPrefix(p, "consumers read"):
			n.truncatedRead++
		default:
			n.lost++ // a record that is not producer:sequence: the log is wrong
		}
	}
	n.note(problems...)
}

func (n *nfCounts) note(problems ...string) {
	for _, p := range problems {
		if len(n.problems) < 10 {
			n.problems = append(n.problems, p)
		}
	}
}

// nfClientOpts are the options every workload client shares: short
// timeouts on a dead connection, fresh metadata soon after a failover,
// and retries of a connection that ends before its first answer (by
// default franz-go takes that for a TLS mismatch and fails the records,
// but here it is a node killed or a link cut while a connection opens).
func nfClientOpts(c *nfCluster) []kgo.Opt {
	return []kgo.Opt{
		kgo.AlwaysRetryEOF(),
		kgo.SeedBrokers(c.seeds()...),
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.ConnIdleTimeout(5 * time.Second),
		kgo.DialTimeout(2 * time.Second),
	}
}

// nfProducer produces producer:sequence values to topic at about rate
// records a second with an idempotent acks=all producer that retries
// without end, noting each acknowledgement in h, until stop is closed;
// then it flushes. The key spreads records over the partitions.
type nfProducer struct {
	name  string
	h     *history
	errs  *errorCounts
	sent  atomic.Int64
	ended chan struct{}
}

func startNFProducer(t *testing.T, c *nfCluster, name, topic string, rate int, h *history, errs *errorCounts, stop <-chan struct{}) *nfProducer {
	p := &nfProducer{name: name, h: h, errs: errs, ended: make(chan struct{})}
	opts := append(nfClientOpts(c), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30), kgo.ProduceRequestTimeout(3*time.Second), kgo.ProducerLinger(5*time.Millisecond))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.ended)
		defer cl.Close()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		perTick := max(1, rate/50)
		for seq := 0; ; {
			select {
			case <-stop:
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				if err := cl.Flush(ctx); err != nil {
					errs.add(fmt.Errorf("%s: flush: %w (%d records unflushed)", name, err, cl.BufferedProduceRecords()))
				}
				return
			case <-tk.C:
			}
			for range perTick {
				cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(seq % 16)), Value: recordValue(name, seq)}, p.acked)
				seq++
				p.sent.Add(1)
			}
		}
	}()
	return p
}

func (p *nfProducer) acked(r *kgo.Record, err error) {
	if err != nil {
		p.errs.add(err)
		return
	}
	_, seq, _ := parseValue(r.Value)
	p.h.ack(p.name, seq, r.Partition, r.Offset)
}

// nfReaderTo reads topic from the start with no group (read_uncommitted,
// so up to the high watermark) until ctx ends, noting every record in h
// (none may later be truncated) and how far it read each partition in
// readTo.
func nfReaderTo(ctx context.Context, t *testing.T, c *nfCluster, topic string, h *history, errs *errorCounts, readTo []atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	cl, err := kgo.NewClient(append(nfClientOpts(c), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					errs.add(err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				h.consume(r.Partition, r.Offset, r.Value)
				readTo[r.Partition].Store(r.Offset + 1)
			})
		}
	}()
	return done
}

// nfGroup is a consumer group of members that poll, note each record,
// commit what they polled synchronously and only then allow a rebalance,
// so a partition's next owner starts at the last acknowledged commit. A
// record delivered below an offset whose commit was acknowledged means
// the coordinator lost the commit: it counts as a duplicate.
type nfGroup struct {
	h          *history
	start      time.Time
	mu         sync.Mutex
	committed  map[int32]int64  // highest acknowledged commit per partition
	commitBy   map[int32]string // who made it and when, for the report
	delivered  map[ackedAt]bool
	redelivery []string
	// fencedReads are records below an acknowledged commit read by a
	// member whose commit of them was then refused (reported, not counted).
	fencedReads []string
	commits     atomic.Int64
	errs        *errorCounts
}

func startNFGroup(ctx context.Context, t *testing.T, c *nfCluster, group, topic string, members int, h *history, errs *errorCounts) (*nfGroup, <-chan struct{}) {
	g := &nfGroup{h: h, start: time.Now(), committed: make(map[int32]int64), commitBy: make(map[int32]string),
		delivered: make(map[ackedAt]bool), errs: errs}
	var wg sync.WaitGroup
	for m := range members {
		cl, err := kgo.NewClient(append(nfClientOpts(c), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(300*time.Millisecond),
			kgo.ClientID(fmt.Sprintf("nf-member-%d", m)))...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			g.member(ctx, cl, fmt.Sprintf("member %d", m))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return g, done
}

func (g *nfGroup) member(ctx context.Context, cl *kgo.Client, name string) {
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 500)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				g.errs.add(err)
			}
		})
		recs := fs.Records()
		var below []string
		for _, r := range recs {
			below = append(below, g.deliver(r, name)...)
		}
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			cancel()
			if err == nil {
				g.commitAcked(recs, name)
				g.redelivered(below)
			} else if ctx.Err() == nil {
				g.errs.add(fmt.Errorf("commit: %w", err))
				// A member whose commit is refused was fenced: it read
				// from a fetch issued before it lost the partition, as
				// any client of Kafka may; what it read is not counted.
				g.fenced(below)
			}
		}
		cl.AllowRebalance()
	}
}

// deliver records a delivery and returns it described if it lies below
// an acknowledged commit; the member's commit of it decides whether that
// is a redelivery (the commit is accepted: the group handed the member a
// partition at a stale offset) or a fenced member's read.
func (g *nfGroup) deliver(r *kgo.Record, member string) []string {
	g.h.consume(r.Partition, r.Offset, r.Value)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delivered[ackedAt{r.Partition, r.Offset}] = true
	if c, ok := g.committed[r.Partition]; ok && r.Offset < c {
		return []string{fmt.Sprintf("group: %d/%d delivered to %s at %v (leader epoch %d) after a commit of offset %d was acknowledged (%s)",
			r.Partition, r.Offset, member, time.Since(g.start).Round(time.Millisecond), r.LeaderEpoch, c, g.commitBy[r.Partition])}
	}
	return nil
}

func (g *nfGroup) redelivered(below []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.redelivery = append(g.redelivery, below...)
}

func (g *nfGroup) fenced(below []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fencedReads = append(g.fencedReads, below...)
}

func (g *nfGroup) commitAcked(recs []*kgo.Record, member string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range recs {
		if r.Offset+1 > g.committed[r.Partition] {
			g.committed[r.Partition] = r.Offset + 1
			g.commitBy[r.Partition] = fmt.Sprintf("by %s at %v", member, time.Since(g.start).Round(time.Millisecond))
		}
	}
	g.commits.Add(1)
}

// undelivered lists the acknowledged records of h the group never got.
func (g *nfGroup) undelivered() []string {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for prod, m := range g.h.acked {
		for seq, at := range m {
			if !g.delivered[at] {
				out = append(out, fmt.Sprintf("%s:%d acknowledged at %d/%d, never delivered to the group", prod, seq, at.partition, at.offset))
			}
		}
	}
	return out
}

// caughtUp reports whether the group has committed up to ends.
func (g *nfGroup) caughtUp(ends map[int32]int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, end := range ends {
		if end > 0 && g.committed[p] < end {
			return false
		}
	}
	return true
}

func (g *nfGroup) committedCopy() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int32]int64, len(g.committed))
	for p, o := range g.committed {
		out[p] = o
	}
	return out
}

// nfEndOffsets lists topic's end offsets.
func nfEndOffsets(c *nfCluster, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
		}
		out[o.Partition] = o.Offset
	})
	return out, ferr
}

// nfLog reads the whole topic as readRecords.
func nfLog(t *testing.T, c *nfCluster, topic string) []readRecord {
	var log []readRecord
	for part, recs := range readAllFrom(t, c.seeds(), topic) {
		for _, r := range recs {
			log = append(log, readRecord{part, r.Offset, r.Value})
		}
	}
	return log
}

// nfDirect is a client of node id alone, over its listener rather than
// its client link, so it answers while the link is cut.
func nfDirect(n *nfNode) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", n.ext)), kgo.RequestRetries(0))
}

// nfPartitions asks node n alone what its metadata says of topic.
func nfPartitions(n *nfNode, topic string) (map[int32]cuPart, error) {
	cl, err := nfDirect(n)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := cuCtx()
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, fmt.Errorf("metadata from node %d: %w", n.id, err)
	}
	out := make(map[int32]cuPart)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata from node %d: %d topics", n.id, len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		st, err := cuFindPartition(resp, topic, p.Partition)
		if err != nil {
			return nil, err
		}
		out[p.Partition] = st
	}
	return out, nil
}

// leader is the partition's leader by the newest view (highest leader
// epoch) among the nodes in ids (every node when empty).
func (c *nfCluster) leader(topic string, partition int32, ids ...int32) (leader, epoch int32) {
	leader, epoch = -1, -1
	for _, n := range c.nodes {
		if len(ids) > 0 && !containsID(ids, n.id) {
			continue
		}
		view, err := nfPartitions(n, topic)
		if err != nil {
			continue
		}
		if p, ok := view[partition]; ok && p.epoch > epoch {
			leader, epoch = p.leader, p.epoch
		}
	}
	return leader, epoch
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// fullISR reports whether every node sees every partition of the topics
// led by a live node with its whole replica set in sync.
func (c *nfCluster) fullISR(topics ...string) error {
	for _, n := range c.nodes {
		for _, topic := range topics {
			view, err := nfPartitions(n, topic)
			if err != nil {
				return err
			}
			for p, st := range view {
				if st.leader < 0 || len(st.isr) != len(st.replicas) {
					return fmt.Errorf("node %d sees %s-%d led by %d with ISR %v", n.id, topic, p, st.leader, st.isr)
				}
			}
		}
	}
	return nil
}

// controller asks node n which node leads the metadata quorum.
func (c *nfCluster) controller(id int32) (int32, error) {
	cl, err := nfDirect(c.node(id))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	leader, _, err := cuQuorumLeader(cl)
	return leader, err
}

// activeController is the controller every node that answers agrees on.
func (c *nfCluster) activeController() (int32, error) {
	var got int32 = -1
	for _, n := range c.nodes {
		l, err := c.controller(n.id)
		if err != nil {
			return -1, err
		}
		if got >= 0 && l != got {
			return -1, fmt.Errorf("node %d names controller %d, another node %d", n.id, l, got)
		}
		got = l
	}
	return got, nil
}

// probeProduce sends one acks=all produce of value straight to node id's
// listener and returns the partition's base offset and error: a node cut
// off from its followers must not answer it without an error.
func (c *nfCluster) probeProduce(t *testing.T, id int32, topic string, topicID [16]byte, partition int32, value string) (int64, error) {
	cl, err := nfDirect(c.node(id))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, cuPlainBatch(t, value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return -1, fmt.Errorf("produce to node %d: %w", id, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("produce to node %d answered %d topics", id, len(resp.Topics))
	}
	pr := resp.Topics[0].Partitions[0]
	return pr.BaseOffset, kerr.ErrorForCode(pr.ErrorCode)
}
