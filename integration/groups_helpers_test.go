package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
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

// This file holds what the consumer group tests (groups_*_test.go) share:
// gregor started with short group timeouts, members that can be killed
// without leaving, and a ledger of every record processed and every
// commit acknowledged, which checks the at-least-once contract.
//
// Names here start with grp: other files of the package are written
// concurrently by others.

// grpSessionTimeout is the members' session timeout: Kafka's
// group.min.session.timeout.ms default, so a killed member is noticed in
// seconds without lowering the broker's bound.
const grpSessionTimeout = 6 * time.Second

// grpGregorArgs start gregor for group tests: no initial rebalance delay,
// and KIP-848 session and heartbeat settings lowered to match the classic
// members' grpSessionTimeout (Kafka's defaults are 45 s and 5 s).
var grpGregorArgs = []string{
	"--override", "group.initial.rebalance.delay.ms=0",
	"--override", "group.consumer.min.session.timeout.ms=1000",
	"--override", "group.consumer.session.timeout.ms=6000",
	"--override", "group.consumer.min.heartbeat.interval.ms=200",
	"--override", "group.consumer.heartbeat.interval.ms=500",
}

func grpStartGregor(t *testing.T, dir string, port int, extra ...string) *process {
	t.Helper()
	return startGregor(t, dir, port, append(append([]string(nil), grpGregorArgs...), extra...)...)
}

// grpWaitFor polls cond every 20 ms until it holds or d passes.
func grpWaitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grpWaitUntil polls cond every 20 ms until it holds (true) or d passes
// (false).
func grpWaitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// grpProduce writes n records spread evenly over the topic's partitions
// and returns each partition's end offset.
func grpProduce(t *testing.T, addr, topic string, n int) map[int32]int64 {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx := testContext(t, 60*time.Second)
	var failed atomic.Value
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return grpEndOffsets(t, addr, topic)
}

func grpEndOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	ends, err := kadm.NewClient(newClient(t, addr)).ListEndOffsets(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// grpCommitted returns a group's committed offsets of one topic, read back
// with OffsetFetch.
func grpCommitted(t *testing.T, addr, group, topic string) map[int32]int64 {
	t.Helper()
	offs, err := kadm.NewClient(newClient(t, addr)).FetchOffsets(testContext(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := make(map[int32]int64)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// grpKillSwitch is a dialer whose connections can all be cut at once, after
// which it refuses to dial: the client behind it is dead as far as the
// broker can tell, and nothing it does afterwards (a LeaveGroup on close)
// reaches the broker.
type grpKillSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

var errGrpKilled = errors.New("member killed by the test")

func (k *grpKillSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		c.Close()
		return nil, errGrpKilled
	}
	k.conns = append(k.conns, c)
	return c, nil
}

func (k *grpKillSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// grpTPO names one record of the test topic.
type grpTPO struct {
	p int32
	o int64
}

func (r grpTPO) String() string { return fmt.Sprintf("%d/%d", r.p, r.o) }

// grpEvent is one processing of a record by a member. It is covered once
// the member has an acknowledged commit past the record.
type grpEvent struct {
	member  string
	phase   int
	covered bool
	// superseded: the record was processed again before a commit covered
	// this processing (its member died, or its commit failed while the
	// broker was down), so no later commit covers it: it is what the
	// duplicate cost.
	superseded bool
}

// grpLedger records every processing of every record and every
// acknowledged commit, and checks the at-least-once contract as it goes: a
// record may be processed again only while no acknowledged commit covers
// its earlier processings.
type grpLedger struct {
	mu        sync.Mutex
	phase     int // set by the test; stamped on each processing
	events    map[grpTPO][]*grpEvent
	uncovered map[string]map[int32][]grpTPO // member → partition → processed, not yet covered
	acked     map[int32]int64               // partition → highest acknowledged commit
	failed    int                           // commits that failed
	problems  []string
}

func newGrpLedger() *grpLedger {
	return &grpLedger{
		events:    make(map[grpTPO][]*grpEvent),
		uncovered: make(map[string]map[int32][]grpTPO),
		acked:     make(map[int32]int64),
	}
}

func (l *grpLedger) setPhase(p int) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *grpLedger) process(member string, recs []*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		k := grpTPO{r.Partition, r.Offset}
		for _, prev := range l.events[k] {
			if prev.covered {
				l.problems = append(l.problems, fmt.Sprintf("record %v processed again by %s after %s's acknowledged commit covered it", k, member, prev.member))
			}
			prev.superseded = true
		}
		l.events[k] = append(l.events[k], &grpEvent{member: member, phase: l.phase})
		m := l.uncovered[member]
		if m == nil {
			m = make(map[int32][]grpTPO)
			l.uncovered[member] = m
		}
		m[r.Partition] = append(m[r.Partition], k)
	}
}

// ack notes that member's commit of offset on partition p was
// acknowledged: every record it processed below offset is covered.
func (l *grpLedger) ack(member string, p int32, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[p] = max(l.acked[p], offset)
	pending := l.uncovered[member][p]
	keep := pending[:0]
	for _, k := range pending {
		if k.o >= offset {
			keep = append(keep, k)
			continue
		}
		evs := l.events[k]
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].member == member && !evs[i].covered && !evs[i].superseded {
				evs[i].covered = true
				break
			}
		}
	}
	if m := l.uncovered[member]; m != nil {
		m[p] = keep
	}
}

func (l *grpLedger) commitFailed() {
	l.mu.Lock()
	l.failed++
	l.mu.Unlock()
}

// committedTo reports whether acknowledged commits reached ends.
func (l *grpLedger) committedTo(ends map[int32]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, end := range ends {
		if l.acked[p] < end {
			return false
		}
	}
	return true
}

func (l *grpLedger) ackedCopy() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]int64, len(l.acked))
	for p, o := range l.acked {
		out[p] = o
	}
	return out
}

// grpSummary is what a finished run of the ledger found.
type grpSummary struct {
	distinct   int            // records processed at least once
	events     int            // processings in all
	dups       int            // processings beyond the first
	perMember  map[string]int // processings by member
	uncovered  map[string]int // processings never covered by their member's commit, by member
	failed     int            // failed commits
	dupRecords map[grpTPO]bool
}

// verify checks the whole run against the topic's end offsets: every
// record processed, the last processing of each covered by an
// acknowledged commit, and no record processed again after a commit
// covered it. It returns what it counted.
func (l *grpLedger) verify(t *testing.T, ends map[int32]int64) grpSummary {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := grpSummary{perMember: make(map[string]int), uncovered: make(map[string]int), failed: l.failed, dupRecords: make(map[grpTPO]bool)}
	problems := append([]string(nil), l.problems...)
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			k := grpTPO{p, o}
			evs := l.events[k]
			if len(evs) == 0 {
				problems = append(problems, fmt.Sprintf("record %v never processed", k))
				continue
			}
			if !evs[len(evs)-1].covered {
				problems = append(problems, fmt.Sprintf("record %v: its last processing (by %s) was never committed", k, evs[len(evs)-1].member))
			}
			if len(evs) > 1 {
				s.dupRecords[k] = true
			}
		}
	}
	for k, evs := range l.events {
		if end, ok := ends[k.p]; !ok || k.o >= end {
			problems = append(problems, fmt.Sprintf("record %v processed but lies past the end offsets", k))
		}
		s.distinct++
		s.events += len(evs)
		s.dups += len(evs) - 1
		for _, e := range evs {
			s.perMember[e.member]++
			if !e.covered {
				s.uncovered[e.member]++
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Fatalf("%d at-least-once violations, first: %s", len(problems), strings.Join(problems[:min(len(problems), 10)], "; "))
	}
	return s
}

// grpMember is one franz-go group member run by a test: it polls with
// rebalances blocked, processes (records into the ledger), commits what it
// processed, and only then allows a rebalance, so that only a member that
// dies between processing and committing leaves records to be processed
// twice.
type grpMember struct {
	t      *testing.T
	name   string
	cl     *kgo.Client
	ks     *grpKillSwitch
	ledger *grpLedger

	quota     atomic.Int64 // stop processing (but stay in the group) at this many records
	processed atomic.Int64
	pause     time.Duration // sleep after each batch, to slow the member down
	maxPoll   int

	stop     chan struct{} // leave cleanly
	killNext atomic.Bool   // die after processing the next batch, before committing it
	done     chan struct{}

	mu     sync.Mutex
	killed []grpTPO // the batch processed and never committed
	// unsent holds offsets whose commit never reached the broker (it
	// was down); the next commit carries them, as an application that
	// commits its position would. Offsets refused by the coordinator
	// (a rebalance, a fenced member) are dropped: the partition may be
	// another member's by then.
	unsent map[string]map[int32]kgo.EpochOffset
}

// grpNewMember makes a member of group on topic, with extra client
// options; start runs it.
func grpNewMember(t *testing.T, addr, name, group, topic string, l *grpLedger, extra ...kgo.Opt) *grpMember {
	t.Helper()
	m := &grpMember{t: t, name: name, ks: &grpKillSwitch{}, ledger: l, maxPoll: 200, stop: make(chan struct{}), done: make(chan struct{})}
	m.quota.Store(math.MaxInt64)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID(name), kgo.Dialer(m.ks.dial),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(grpSessionTimeout), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.RebalanceTimeout(15 * time.Second),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	return m
}

// start runs the member's poll loop until it leaves, dies or the test
// ends.
func (m *grpMember) start() *grpMember {
	go m.run()
	m.t.Cleanup(func() {
		// Whatever the test left running dies without a LeaveGroup,
		// which the dead dialer could only retry.
		m.ks.kill()
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		m.cl.AllowRebalance()
		m.cl.LeaveGroupContext(canceled)
		m.cl.CloseAllowingRebalance()
		<-m.done
	})
	return m
}

func (m *grpMember) run() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			m.cl.AllowRebalance()
			m.cl.Close() // leaves the group
			return
		default:
		}
		if m.ks.isDead() {
			return
		}
		if !m.killNext.Load() && m.processed.Load() >= m.quota.Load() {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		recs := m.cl.PollRecords(ctx, m.maxPoll).Records()
		cancel()
		if len(recs) == 0 {
			if m.hasUnsent() {
				m.commit(nil)
			}
			m.cl.AllowRebalance()
			continue
		}
		m.ledger.process(m.name, recs)
		m.processed.Add(int64(len(recs)))
		if m.killNext.Load() {
			m.die(recs)
			return
		}
		m.commit(recs)
		m.cl.AllowRebalance()
		if m.pause > 0 {
			time.Sleep(m.pause)
		}
	}
}

func (k *grpKillSwitch) isDead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// die cuts the member off between processing recs and committing them, as
// a crash would; the client is closed in the background, its LeaveGroup
// refused by the dead dialer.
func (m *grpMember) die(recs []*kgo.Record) {
	m.ks.kill()
	m.mu.Lock()
	for _, r := range recs {
		m.killed = append(m.killed, grpTPO{r.Partition, r.Offset})
	}
	m.mu.Unlock()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	m.cl.AllowRebalance()
	m.cl.LeaveGroupContext(canceled)
}

// commit commits the offsets after recs and notes the acknowledgements.
func (m *grpMember) commit(recs []*kgo.Record) {
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	m.mu.Lock()
	if len(m.unsent) > 0 {
		offsets, m.unsent = m.unsent, nil
	}
	m.mu.Unlock()
	for _, r := range recs {
		ps := offsets[r.Topic]
		if ps == nil {
			ps = make(map[int32]kgo.EpochOffset)
			offsets[r.Topic] = ps
		}
		if cur, ok := ps[r.Partition]; !ok || cur.Offset < r.Offset+1 {
			ps[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			m.t.Logf("%s: commit: %v", m.name, err)
			m.ledger.commitFailed()
			var dial *net.OpError
			if errors.As(err, &dial) && dial.Op == "dial" {
				m.keepUnsent(offsets)
			}
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					m.t.Logf("%s: commit %s/%d: %v", m.name, rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					m.ledger.commitFailed()
					continue
				}
				m.ledger.ack(m.name, rp.Partition, offsets[rt.Topic][rp.Partition].Offset)
			}
		}
	})
}

// keepUnsent keeps offsets for the next commit, each partition's
// highest.
func (m *grpMember) keepUnsent(offsets map[string]map[int32]kgo.EpochOffset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unsent == nil {
		m.unsent = make(map[string]map[int32]kgo.EpochOffset)
	}
	for topic, ps := range offsets {
		if m.unsent[topic] == nil {
			m.unsent[topic] = make(map[int32]kgo.EpochOffset)
		}
		for p, o := range ps {
			if cur, ok := m.unsent[topic][p]; !ok || cur.Offset < o.Offset {
				m.unsent[topic][p] = o
			}
		}
	}
}

func (m *grpMember) hasUnsent() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.unsent) > 0
}

// leave makes the member leave the group cleanly and waits for it.
func (m *grpMember) leave(t *testing.T) {
	t.Helper()
	close(m.stop)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not leave within 30 s", m.name)
	}
}

func (m *grpMember) killedBatch() []grpTPO {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]grpTPO(nil), m.killed...)
}

// grpRawBroker returns a direct connection to the single broker at addr,
// for raw requests that must not go through coordinator lookup or
// retries.
func grpRawBroker(t *testing.T, addr string) (*kgo.Client, *kgo.Broker) {
	t.Helper()
	cl := newClient(t, addr)
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(testContext(t, 30*time.Second), cl)
	if err != nil || len(meta.Brokers) == 0 {
		t.Fatalf("metadata: %v", err)
	}
	return cl, cl.Broker(int(meta.Brokers[0].NodeID))
}

// grpWaitCoordinator creates __consumer_offsets (FindCoordinator) and
// waits until the coordinator of group has loaded.
func grpWaitCoordinator(t *testing.T, b *kgo.Broker, group string) {
	t.Helper()
	grpWaitFor(t, 30*time.Second, "the group coordinator", func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = group
		fc.CoordinatorKeys = []string{group}
		fresp, err := b.Request(context.Background(), fc)
		if err != nil {
			return false
		}
		r := fresp.(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 || len(r.Coordinators) > 0 && r.Coordinators[0].ErrorCode != 0 {
			return false
		}
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{group}
		dresp, err := b.Request(context.Background(), d)
		if err != nil {
			return false
		}
		gs := dresp.(*kmsg.DescribeGroupsResponse).Groups
		return len(gs) == 1 && gs[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code && gs[0].ErrorCode != kerr.CoordinatorNotAvailable.Code &&
			gs[0].ErrorCode != kerr.NotCoordinator.Code
	})
}

// grpDescribe describes one classic group.
func grpDescribe(t *testing.T, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	ds, err := adm.DescribeGroups(testContext(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	return ds[group]
}
