package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterRealClients: franz-go, sarama and kcat (librdkafka) against
// a three-node cluster. Each produces idempotently with acks=all and each
// consumes the whole topic in a consumer group of its own, while the
// leader of partition 0 is killed (a failover), brought back, and given
// its leadership back with ElectLeaders (a preferred election): two
// leader moves and the metadata changes around them mid-stream. Every
// acknowledged record is in the log once, in its producer's order, and
// every group has read every one of them.
func TestClusterRealClients(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed: run make compat-deps")
	}
	const topic = "clients"
	c := cuStartCluster(t, 3, 0)
	cl := c.client(nil)
	cuCreateAssigned(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	for p := range int32(3) {
		cuWaitISR(t, cl, topic, p, []int32{1, 2, 3})
	}
	seeds := c.seeds()

	// The clients' goroutines report to errs, not to t: they may outlive a
	// test that failed.
	errs := &cuErrs{}
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	var stopOnce sync.Once
	var producers, consumers sync.WaitGroup
	defer func() {
		stopOnce.Do(func() { close(stop) })
		cancel()
		cuWaitGroup(&producers, 90*time.Second)
		cuWaitGroup(&consumers, 30*time.Second)
	}()
	groups := map[string]*cuSeen{"franz-go": newCuSeen(), "sarama": newCuSeen(), "kcat": newCuSeen()}
	for m := range 2 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			cuFranzConsume(ctx, errs, seeds, topic, fmt.Sprintf("franz-go-%d", m), groups["franz-go"])
		}()
	}
	consumers.Add(2)
	go func() {
		defer consumers.Done()
		cuSaramaConsume(ctx, errs, seeds, topic, groups["sarama"])
	}()
	go func() {
		defer consumers.Done()
		cuKcatConsume(ctx, errs, seeds, topic, groups["kcat"])
	}()

	h := newHistory()
	var sent [3]atomic.Int64 // acknowledged so far: franz-go, sarama, kcat (written to its stdin)
	var kcatLines []string
	producers.Add(3)
	go func() {
		defer producers.Done()
		cuFranzProduce(ctx, errs, seeds, topic, h, &sent[0], stop)
	}()
	go func() {
		defer producers.Done()
		cuSaramaProduce(errs, seeds, topic, h, &sent[1], stop)
	}()
	go func() {
		defer producers.Done()
		kcatLines = cuKcatProduce(errs, seeds, topic, &sent[2], stop)
	}()
	progress := func(what string, more int64) {
		t.Helper()
		var want [3]int64
		for i := range sent {
			want[i] = sent[i].Load() + more
		}
		cuWait(t, 60*time.Second, what, func() error {
			if err := errs.first(); err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"franz-go", "sarama", "kcat"} {
				if n := sent[i].Load(); n < want[i] {
					return fmt.Errorf("%s at %d of %d", name, n, want[i])
				}
			}
			return nil
		})
	}
	progress("records flowing", 100)

	// A failover: SIGKILL partition 0's leader.
	c.kill(1)
	live := c.client(c.seedsExcept(1))
	cuWait(t, 30*time.Second, "partition 0 led elsewhere", func() error {
		st, err := cuPartitionState(live, topic, 0)
		if err == nil && (st.leader == 1 || st.leader < 0) {
			err = fmt.Errorf("leader %d", st.leader)
		}
		return err
	})
	progress("records flowing with broker 1 down", 100)

	// Back, caught up, and leading partition 0 again by a preferred
	// election.
	c.restart(1)
	cuWaitISR(t, cl, topic, 0, []int32{1, 2, 3})
	// PREFERRED_LEADER_NOT_AVAILABLE is retriable (Kafka's admin client
	// retries it): broker 1 may be fenced for a moment after its restart,
	// or the controller may be moving, so the election is asked again
	// until it is done. ELECTION_NOT_NEEDED on a retry means an earlier
	// attempt's election went through.
	admin := kadm.NewClient(cl)
	retried := false
	cuWait(t, 30*time.Second, "a preferred election for partition 0", func() error {
		res, err := admin.ElectLeaders(testContext(t, 30*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		if err != nil {
			t.Fatalf("ElectLeaders: %v", err)
		}
		for p := range int32(3) {
			r, ok := res[topic][p]
			switch {
			case !ok:
				t.Fatalf("ElectLeaders answered nothing for %s-%d", topic, p)
			case p == 0 && errors.Is(r.Err, kerr.PreferredLeaderNotAvailable):
				retried = true
				return fmt.Errorf("ElectLeaders %s-0: %v (%s)", topic, r.Err, r.ErrMessage)
			case p == 0 && r.Err != nil && !(retried && errors.Is(r.Err, kerr.ElectionNotNeeded)):
				t.Fatalf("ElectLeaders %s-0: %v (%s)", topic, r.Err, r.ErrMessage)
			case p != 0 && !errors.Is(r.Err, kerr.ElectionNotNeeded):
				t.Fatalf("ElectLeaders %s-%d led by its preferred replica: %v, want ELECTION_NOT_NEEDED", topic, p, r.Err)
			}
		}
		return nil
	})
	cuWait(t, 30*time.Second, "partition 0 led by broker 1 again", func() error {
		st, err := cuPartitionState(cl, topic, 0)
		if err == nil && st.leader != 1 {
			err = fmt.Errorf("leader %d", st.leader)
		}
		return err
	})
	progress("records flowing after the preferred election", 100)
	stopOnce.Do(func() { close(stop) })
	producers.Wait()
	if err := errs.first(); err != nil {
		t.Fatal(err)
	}

	// The log: every acknowledged record once, in order per producer.
	var log []readRecord
	inLog := make(map[string]int)
	for p, recs := range readAllFrom(t, c.seeds(), topic) {
		for _, r := range recs {
			log = append(log, readRecord{p, r.Offset, r.Value})
			inLog[string(r.Value)]++
		}
	}
	if problems := h.check(log); len(problems) > 0 {
		if len(problems) > 20 {
			problems = problems[:20]
		}
		t.Fatalf("history check failed:\n%s", strings.Join(problems, "\n"))
	}
	for _, v := range kcatLines {
		if inLog[v] != 1 {
			t.Fatalf("kcat record %s is in the log %d times", v, inLog[v])
		}
	}

	// The groups: each has read everything acknowledged.
	var acked []string
	where := make(map[string]readRecord)
	for _, r := range log {
		acked = append(acked, string(r.value))
		where[string(r.value)] = r
	}
	cuWait(t, 60*time.Second, "every group read every record", func() error {
		if err := errs.first(); err != nil {
			t.Fatal(err)
		}
		for name, g := range groups {
			if missing := g.missing(acked); len(missing) > 0 {
				return fmt.Errorf("group %s has not read %d records: %s", name, len(missing), cuDescribeMissing(missing, where))
			}
		}
		return nil
	})
	cancel()
	consumers.Wait()
	if err := errs.first(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records in the log (franz-go %d, sarama %d, kcat %d acknowledged); every group read them all",
		len(log), sent[0].Load(), sent[1].Load(), sent[2].Load())
}

// cuDescribeMissing says where in the log unread records lie: per
// partition, how many and the offsets of the first and last.
func cuDescribeMissing(missing []string, where map[string]readRecord) string {
	type span struct{ n, lo, hi int64 }
	spans := make(map[int32]*span)
	for _, v := range missing {
		r := where[v]
		sp := spans[r.partition]
		if sp == nil {
			sp = &span{lo: r.offset, hi: r.offset}
			spans[r.partition] = sp
		}
		sp.n++
		sp.lo, sp.hi = min(sp.lo, r.offset), max(sp.hi, r.offset)
	}
	var out []string
	for p, sp := range spans {
		out = append(out, fmt.Sprintf("partition %d: %d between offsets %d and %d", p, sp.n, sp.lo, sp.hi))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// cuErrs collects the errors of client goroutines.
type cuErrs struct {
	mu   sync.Mutex
	errs []error
}

func (e *cuErrs) add(format string, args ...any) {
	e.mu.Lock()
	e.errs = append(e.errs, fmt.Errorf(format, args...))
	e.mu.Unlock()
}

func (e *cuErrs) first() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return nil
	}
	return e.errs[0]
}

// cuWaitGroup waits for wg at most d: a client stuck on a broken cluster
// must not hold the test past its failure.
func cuWaitGroup(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// cuSeen is the set of values a consumer group has read.
type cuSeen struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newCuSeen() *cuSeen { return &cuSeen{seen: make(map[string]bool)} }

func (s *cuSeen) add(v string) {
	s.mu.Lock()
	s.seen[v] = true
	s.mu.Unlock()
}

func (s *cuSeen) missing(vals []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, v := range vals {
		if !s.seen[v] {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// cuPace is the producers' rate: one record per producer every 3 ms at
// most, so that a race-built cluster on a shared machine keeps up.
const cuPace = 3 * time.Millisecond

// cuFranzProduce produces idempotently (franz-go's default) with acks=all
// until stop, then flushes.
func cuFranzProduce(ctx context.Context, errs *cuErrs, seeds []string, topic string, h *history, sent *atomic.Int64, stop <-chan struct{}) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1<<30),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		errs.add("franz-go producer: %w", err)
		return
	}
	defer cl.Close()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			if err := cl.Flush(ctx); err != nil {
				errs.add("franz-go flush: %w", err)
			}
			return
		case <-time.After(cuPace):
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(seq % 10)), Value: recordValue("franz-go", seq)}, func(r *kgo.Record, err error) {
			if err != nil {
				errs.add("franz-go produce: %w", err)
				return
			}
			_, s, _ := parseValue(r.Value)
			h.ack("franz-go", s, r.Partition, r.Offset)
			sent.Add(1)
		})
	}
}

func cuSaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "gregor-cluster-test"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 1000
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.Retry.Max = 1000
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Return.Errors = false
	return cfg
}

// cuSaramaProduce sends one record at a time with a SyncProducer, which
// retries through the leader moves.
func cuSaramaProduce(errs *cuErrs, seeds []string, topic string, h *history, sent *atomic.Int64, stop <-chan struct{}) {
	prod, err := sarama.NewSyncProducer(seeds, cuSaramaConfig())
	if err != nil {
		errs.add("sarama producer: %w", err)
		return
	}
	defer prod.Close()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-time.After(cuPace):
		}
		p, o, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(seq % 10)),
			Value: sarama.ByteEncoder(recordValue("sarama", seq))})
		if err != nil {
			errs.add("sarama produce %d: %w", seq, err)
			return
		}
		h.ack("sarama", seq, p, o)
		sent.Add(1)
	}
}

// cuKcatProduce feeds kcat -P key|value lines until stop, closes its
// input and waits for it to deliver everything; it returns the values
// sent. librdkafka retries each record for message.timeout.ms (5 min), so
// a clean exit means every record was acknowledged.
func cuKcatProduce(errs *cuErrs, seeds []string, topic string, sent *atomic.Int64, stop <-chan struct{}) []string {
	cmd := exec.Command("kcat", "-b", strings.Join(seeds, ","), "-P", "-t", topic, "-K", "|",
		"-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5")
	in, err := cmd.StdinPipe()
	if err != nil {
		errs.add("kcat producer: %w", err)
		return nil
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		errs.add("start kcat: %w", err)
		return nil
	}
	var vals []string
	w := bufio.NewWriter(in)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			w.Flush()
			in.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil || strings.Contains(stderr.String(), "Delivery failed") {
					errs.add("kcat producer: %v: %s", err, stderr.String())
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				errs.add("kcat producer did not finish: %s", stderr.String())
			}
			return vals
		case <-time.After(cuPace):
		}
		v := string(recordValue("kcat", seq))
		fmt.Fprintf(w, "%d|%s\n", seq%10, v)
		vals = append(vals, v)
		// kcat reads its input as it comes; what is written counts as sent
		// for the progress checks, and is verified in the log at the end.
		if seq%20 == 19 {
			w.Flush()
		}
		sent.Add(1)
	}
}

// cuFranzConsume is one member of the franz-go group, committing with
// franz-go's autocommit.
func cuFranzConsume(ctx context.Context, errs *cuErrs, seeds []string, topic, member string, seen *cuSeen) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("g-franz-go"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(member))
	if err != nil {
		errs.add("franz-go consumer: %w", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { seen.add(string(r.Value)) })
	}
}

type cuSaramaHandler struct{ seen *cuSeen }

func (cuSaramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (cuSaramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h cuSaramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.seen.add(string(m.Value))
		s.MarkMessage(m, "")
	}
	return nil
}

// cuSaramaConsume is the sarama group's one member.
func cuSaramaConsume(ctx context.Context, errs *cuErrs, seeds []string, topic string, seen *cuSeen) {
	g, err := sarama.NewConsumerGroup(seeds, "g-sarama", cuSaramaConfig())
	if err != nil {
		errs.add("sarama consumer group: %w", err)
		return
	}
	defer g.Close()
	for ctx.Err() == nil {
		// Consume returns at each rebalance (and on errors while the
		// cluster moves): join again.
		if err := g.Consume(ctx, []string{topic}, cuSaramaHandler{seen}); err != nil && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// cuKcatConsume runs kcat as a balanced consumer (-G) until ctx ends,
// with unbuffered output (-u) so that each record shows when it is read.
func cuKcatConsume(ctx context.Context, errs *cuErrs, seeds []string, topic string, seen *cuSeen) {
	cmd := exec.CommandContext(ctx, "kcat", "-u", "-b", strings.Join(seeds, ","), "-G", "g-kcat", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", topic)
	out, err := cmd.StdoutPipe()
	if err != nil {
		errs.add("kcat consumer: %w", err)
		return
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		errs.add("start kcat consumer: %w", err)
		return
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		seen.add(sc.Text())
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		errs.add("kcat consumer: %v: %s", err, stderr.String())
	}
}
