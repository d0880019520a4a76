package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestPhases are the RequestMetrics histograms splitting a request's
// time, whose sum is its total (docs/operations.md).
var requestPhases = []string{"requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems"}

// phase returns a request metrics histogram's series for request.
func phase(m map[string]float64, name, suffix, request string) float64 {
	return m[fmt.Sprintf(`kafka_network_requestmetrics_%s_%s{request="%s"}`, name, suffix, request)]
}

// waitScrape scrapes addr until ok accepts the values, and fails the
// test with what it saw last after d.
func waitScrape(t *testing.T, addr string, d time.Duration, what string, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := scrape(t, addr)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			var lines []string
			for k, v := range m {
				if strings.HasPrefix(k, "kafka_") {
					lines = append(lines, fmt.Sprintf("%s %v", k, v))
				}
			}
			t.Fatalf("%s: not seen on %s within %v; last scrape:\n%s", what, addr, d, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetricsStateAfterWorkload checks, on one real gregor scraped over
// HTTP, the request time split, the fetch session cache, the producer id
// count and the transaction counts against a known workload:
//   - every Produce request lands once in each phase's histogram and the
//     phases add up to the total;
//   - a Fetch at the log end with a 600 ms max wait adds at least 500 ms
//     of remote time (the long poll) and little local time;
//   - two consumers polling make two incremental fetch sessions, each
//     caching the topic's one partition;
//   - a transactional producer committing 3 and aborting 2 transactions
//     is counted as exactly that, one open transaction shows as ongoing,
//     and its producer id adds one to ProducerIdCount.
func TestMetricsStateAfterWorkload(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0",
		"--override", "transaction.state.log.num.partitions=1")
	web := httpAddr(t, p)
	const topic, n = "phased", 50
	mustCLI(t, p.addr, "", "topic", "create", topic, "-p", "1")
	produceStrings(t, p.addr, topic, 0, n)

	m := scrape(t, web)
	produces := m[`kafka_network_requestmetrics_requests_total{request="Produce"}`]
	if produces < n {
		t.Fatalf("Produce requests %v, want at least %d", produces, n)
	}
	var phaseSum float64
	for _, ph := range append(requestPhases, "totaltimems") {
		if c := phase(m, ph, "count", "Produce"); c != produces {
			t.Errorf("%s{Produce} count %v, want the %v requests", ph, c, produces)
		}
		if ph != "totaltimems" {
			phaseSum += phase(m, ph, "sum", "Produce")
		}
	}
	if total := phase(m, "totaltimems", "sum", "Produce"); total <= 0 || math.Abs(phaseSum-total) > 1e-6*total+1e-9 {
		t.Errorf("Produce phases add up to %v ms, total %v ms", phaseSum, total)
	}
	if phase(m, "localtimems", "sum", "Produce") <= 0 || phase(m, "responsesendtimems", "sum", "Produce") <= 0 {
		t.Errorf("Produce local %v ms, send %v ms: want both above 0",
			phase(m, "localtimems", "sum", "Produce"), phase(m, "responsesendtimems", "sum", "Produce"))
	}

	// A fetch at the log end waits out its max wait: remote time.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetchRemote := phase(m, "remotetimems", "sum", "Fetch")
	fetchLocal := phase(m, "localtimems", "sum", "Fetch")
	fetches := phase(m, "totaltimems", "count", "Fetch")
	tds, err := kadm.NewClient(cl).ListTopics(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	// kgo sends its newest Fetch version, which names topics by id.
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 600
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1 // no session: this one fetch only
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = tds[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = n
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch at the log end: %v %+v", err, resp)
	}
	t.Logf("fetch at the log end answered after %v", time.Since(start))
	m = scrape(t, web)
	if c := phase(m, "totaltimems", "count", "Fetch"); c != fetches+1 {
		t.Fatalf("Fetch requests %v, want %v", c, fetches+1)
	}
	if d := phase(m, "remotetimems", "sum", "Fetch") - fetchRemote; d < 500 || d > 2000 {
		t.Errorf("a 600 ms long poll added %v ms of Fetch remote time", d)
	}
	if d := phase(m, "localtimems", "sum", "Fetch") - fetchLocal; d > 100 {
		t.Errorf("a long poll added %v ms of Fetch local time, want it in remote", d)
	}

	// Two consumers, two incremental fetch sessions of one partition each.
	sessions := m["kafka_server_fetchsessioncache_numincrementalfetchsessions"]
	cached := m["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"]
	for i := range 2 {
		c, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := testCtx(t, 20*time.Second)
		got := 0
		for got < n && ctx.Err() == nil {
			got += c.PollFetches(ctx).NumRecords()
		}
		if got < n {
			t.Fatalf("consumer %d read %d of %d", i, got, n)
		}
	}
	waitScrape(t, web, 10*time.Second, "two more fetch sessions of one partition each", func(m map[string]float64) bool {
		return m["kafka_server_fetchsessioncache_numincrementalfetchsessions"] == sessions+2 &&
			m["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"] == cached+2
	})
	if m["kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"] != 0 {
		t.Errorf("fetch session evictions with the cache far from full")
	}

	// Transactions: 3 committed, 2 aborted, one open in between.
	const txTopic, commits, aborts = "transacted", 3, 2
	mustCLI(t, p.addr, "", "topic", "create", txTopic, "-p", "1")
	pids := scrape(t, web)["kafka_server_replicamanager_produceridcount"]
	tx, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.TransactionalID("metered-tx"), kgo.DefaultProduceTopic(txTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := testCtx(t, 60*time.Second)
	for i := range commits + aborts {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("tx", i))).FirstErr(); err != nil {
			t.Fatalf("transactional produce %d: %v", i, err)
		}
		if i == 1 {
			m := scrape(t, web)
			if got := m["kafka_server_transaction_coordinator_metrics_ongoing_transactions"]; got != 1 {
				t.Errorf("ongoing transactions with one open: %v", got)
			}
			if got := m["kafka_server_replicamanager_produceridcount"]; got != pids+1 {
				t.Errorf("producer ids %v after a transactional producer wrote, want %v", got, pids+1)
			}
		}
		end := kgo.TryCommit
		if i >= commits {
			end = kgo.TryAbort
		}
		if err := tx.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	// The outcome is recorded once the markers are written, after
	// EndTxn's answer.
	m = waitScrape(t, web, 20*time.Second, "3 commits and 2 aborts", func(m map[string]float64) bool {
		return m["kafka_server_transaction_coordinator_metrics_transactions_committed_total"] == commits &&
			m["kafka_server_transaction_coordinator_metrics_transactions_aborted_total"] == aborts &&
			m["kafka_server_transaction_coordinator_metrics_ongoing_transactions"] == 0
	})
	if got := m["kafka_server_replicamanager_produceridcount"]; got != pids+1 {
		t.Errorf("producer ids %v after 5 transactions of one producer, want %v", got, pids+1)
	}
}

// metricsCluster is three `gregor serve` processes, each broker and
// controller with an HTTP listener, whose nodes can be killed and started
// again on their data dirs.
type metricsCluster struct {
	t     *testing.T
	args  [3][]string
	nodes [3]*serveProcess
	web   [3]string
}

func startMetricsCluster(t *testing.T, props ...string) *metricsCluster {
	t.Helper()
	client, ctrl, web := freePorts(t, 3), freePorts(t, 3), freePorts(t, 3)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	c := &metricsCluster{t: t}
	for i := range 3 {
		c.args[i] = []string{"--data-dir", t.TempDir()}
		for _, p := range append([]string{
			fmt.Sprintf("node.id=%d", i+1),
			"process.roles=broker,controller",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", client[i], ctrl[i]),
			fmt.Sprintf("http.listener=127.0.0.1:%d", web[i]),
			"cluster.id=TWV0cmljc0NsdXN0ZXIxMQ",
			"offsets.topic.replication.factor=3",
			"transaction.state.log.replication.factor=3",
		}, props...) {
			c.args[i] = append(c.args[i], "--override", p)
		}
		c.web[i] = fmt.Sprintf("127.0.0.1:%d", web[i])
		c.nodes[i] = launchServe(t, c.args[i]...)
	}
	for i := range 3 {
		c.waitStarted(i)
	}
	return c
}

func (c *metricsCluster) waitStarted(i int) {
	c.t.Helper()
	p := c.nodes[i]
	select {
	case p.addr = <-p.started:
	case <-p.done:
		c.t.Fatalf("node %d exited:\n%s", i+1, p.log())
	case <-time.After(60 * time.Second):
		c.t.Fatalf("node %d did not start:\n%s", i+1, p.log())
	}
}

// TestMetricsCluster: in a three-node cluster, acks=all produce requests
// spend remote time on the leader (waiting for the followers' fetches);
// a follower killed with SIGKILL leaves the ISR by the leader's own
// shrink (replica.lag.time.max.ms is 2 s, well before the controller
// fences it after broker.session.timeout.ms, 9 s), counted once in
// IsrShrinksPerSec; started again, it catches up and rejoins, counted in
// IsrExpandsPerSec.
func TestMetricsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	// The shrink counted below is the leader's own, after
	// replica.lag.time.max.ms: the controller's fence of a killed node on
	// its closed connection (broker.disconnect.grace.ms) would take the
	// follower out of the ISR first.
	c := startMetricsCluster(t, "replica.lag.time.max.ms=2000", "broker.disconnect.grace.ms=0")
	const topic, n = "replicated", 30
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[0].addr, c.nodes[1].addr, c.nodes[2].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t, 90*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var leader int32
	waitFor(t, 20*time.Second, "a leader with three in-sync replicas", func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		pd := md.Topics[topic].Partitions[0]
		leader = pd.Leader
		if pd.Err != nil || leader <= 0 || len(pd.ISR) != 3 {
			return fmt.Errorf("leader %d, ISR %v, err %v", leader, pd.ISR, pd.Err)
		}
		return nil
	})
	lweb := c.web[leader-1]
	before := scrape(t, lweb)
	produceStrings(t, c.nodes[leader-1].addr, topic, 0, n)
	m := scrape(t, lweb)
	produces := phase(m, "remotetimems", "count", "Produce") - phase(before, "remotetimems", "count", "Produce")
	remote := phase(m, "remotetimems", "sum", "Produce") - phase(before, "remotetimems", "sum", "Produce")
	if produces < n || remote <= 0 {
		t.Errorf("leader: %v acks=all Produce requests with %v ms remote time, want %d with some", produces, remote, n)
	}
	t.Logf("%v acks=all produces: %.3f ms remote time on average", produces, remote/produces)
	// The records reached the followers: the leader counts them out, a
	// follower in, and the follower has applied the metadata log.
	fm := waitScrape(t, c.web[leader%3], 20*time.Second, "a follower's replication bytes in", func(m map[string]float64) bool {
		return m["kafka_server_brokertopicmetrics_replicationbytesin_total"] > 0
	})
	if out := m["kafka_server_brokertopicmetrics_replicationbytesout_total"]; out <= 0 {
		t.Errorf("leader's replication bytes out %v", out)
	}
	if hw := fm["kafka_server_raft_metrics_high_watermark"]; hw <= 0 {
		t.Errorf("follower's metadata high watermark %v", hw)
	}
	shrinks := m["kafka_server_replicamanager_isrshrinks_total"]
	expands := m["kafka_server_replicamanager_isrexpands_total"]

	follower := leader%3 + 1 // another node
	c.nodes[follower-1].kill()
	m = waitScrape(t, lweb, 20*time.Second, "the killed follower's ISR shrink", func(m map[string]float64) bool {
		return m["kafka_server_replicamanager_isrshrinks_total"] >= shrinks+1
	})
	// The only partition (no internal topic exists yet) lost one
	// follower: exactly one shrink.
	if got := m["kafka_server_replicamanager_isrshrinks_total"]; got != shrinks+1 {
		t.Errorf("ISR shrinks %v, want %v", got, shrinks+1)
	}
	if m["kafka_server_replicamanager_underreplicatedpartitions"] != 1 {
		t.Errorf("under-replicated partitions %v after the shrink, want 1", m["kafka_server_replicamanager_underreplicatedpartitions"])
	}

	c.nodes[follower-1] = launchServe(t, c.args[follower-1]...)
	c.waitStarted(int(follower - 1))
	m = waitScrape(t, lweb, 30*time.Second, "the restarted follower's ISR expansion", func(m map[string]float64) bool {
		return m["kafka_server_replicamanager_isrexpands_total"] >= expands+1 &&
			m["kafka_server_replicamanager_underreplicatedpartitions"] == 0
	})
	if got := m["kafka_server_replicamanager_isrexpands_total"]; got != expands+1 {
		t.Errorf("ISR expansions %v, want %v", got, expands+1)
	}
}
