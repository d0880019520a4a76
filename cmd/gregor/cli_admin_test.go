package main

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCLIClusterQuorumConfig: cluster info and health, quorum describe,
// and config get/set on a topic and a broker, compared with what kadm
// reads.
func TestCLIClusterQuorumConfig(t *testing.T) {
	addr, _, adm := cliCluster(t)
	ctx := testCtx(t, 2*time.Minute)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)

	var info struct {
		ClusterID  string          `json:"cluster_id"`
		Controller int32           `json:"controller"`
		Brokers    []clusterBroker `json:"brokers"`
	}
	cliJSON(t, addr, &info, "cluster", "info")
	if info.ClusterID == "" || info.ClusterID != md.Cluster || len(info.Brokers) != 1 ||
		info.Brokers[0].NodeID != 1 || itoa(info.Brokers[0].Port) != port || !info.Brokers[0].Controller {
		t.Errorf("cluster info %+v; kadm: cluster %s controller %d", info, md.Cluster, md.Controller)
	}
	var health clusterHealthReport
	cliJSON(t, addr, &health, "cluster", "health")
	if !health.Healthy || len(health.Brokers) != 1 || len(health.DownBrokers) != 0 {
		t.Errorf("cluster health %+v", health)
	}

	var q quorumStatus
	cliJSON(t, addr, &q, "quorum", "describe")
	if q.LeaderID != md.Controller || len(q.Voters) != 1 || q.Voters[0] != 1 || q.HighWatermark <= 0 ||
		len(q.Replicas) != 1 || q.Replicas[0].Role != "Leader" || q.Replicas[0].Lag != 0 {
		t.Errorf("quorum describe %+v", q)
	}
	if out := mustCLI(t, addr, "", "quorum", "describe"); !regexpMatch(`(?m)^1 +Leader +\d+ +0 `, out) {
		t.Errorf("quorum describe table:\n%s", out)
	}

	mustCLI(t, addr, "", "topic", "create", "ct")
	mustCLI(t, addr, "", "config", "set", "--topic", "ct", "retention.ms=1234", "--add-config", "segment.ms=600000")
	if v, src := topicConfig(t, adm, "ct", "retention.ms"); v != "1234" || src != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms after config set: %s from %s", v, src)
	}
	var entries []configEntry
	cliJSON(t, addr, &entries, "config", "get", "--topic", "ct", "retention.ms", "segment.ms")
	if len(entries) != 2 || entries[0].Value == entries[1].Value {
		t.Errorf("config get: %+v", entries)
	}
	checkConfig(t, entries, "segment.ms", "600000", "DYNAMIC_TOPIC_CONFIG")
	mustCLI(t, addr, "", "config", "set", "--entity-type", "topics", "--entity-name", "ct", "--delete-config", "retention.ms")
	if _, src := topicConfig(t, adm, "ct", "retention.ms"); src == "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms still a topic override after --delete-config")
	}

	// A broker's configs are those kadm reads, with the same sources.
	var brokerEntries []configEntry
	cliJSON(t, addr, &brokerEntries, "config", "get", "--broker", "1")
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("1", nil)
	if len(brokerEntries) != len(rc.Configs) || len(brokerEntries) == 0 {
		t.Fatalf("config get --broker 1: %d entries, kadm %d", len(brokerEntries), len(rc.Configs))
	}
	for _, c := range rc.Configs {
		if !c.Sensitive {
			checkConfig(t, brokerEntries, c.Key, c.MaybeValue(), c.Source.String())
		}
	}
	// The cluster-wide defaults are the broker resource with no name.
	cliJSON(t, addr, &brokerEntries, "config", "get", "--broker-defaults")
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = rcs.On("", nil)
	if len(brokerEntries) != len(rc.Configs) {
		t.Errorf("config get --broker-defaults: %d entries, kadm %d", len(brokerEntries), len(rc.Configs))
	}

	// Setting one either works (read back) or fails with the broker's
	// reason and exit 1.
	r := runCLI(t, addr, "", "config", "set", "--broker", "1", "log.cleaner.threads=2")
	if r.code == 0 {
		rcs, _ := adm.DescribeBrokerConfigs(ctx, 1)
		rc, _ := rcs.On("1", nil)
		for _, c := range rc.Configs {
			if c.Key == "log.cleaner.threads" && c.MaybeValue() != "2" {
				t.Errorf("log.cleaner.threads = %s after config set", c.MaybeValue())
			}
		}
	} else if r.code != 1 || !regexpMatch(`(?m)^1 +[A-Z_]+: `, r.out) {
		t.Errorf("config set --broker 1: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) (string, string) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On(topic, nil)
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), c.Source.String()
		}
	}
	t.Fatalf("topic %s has no config %s", topic, key)
	return "", ""
}

// TestCLITxn: txn list and describe show an open transaction; abort by
// transactional id fences its producer and aborts it; abort by partition
// and start offset writes the abort marker; consume -e ends on logs that
// end in transaction markers, and read_committed hides what was aborted.
func TestCLITxn(t *testing.T) {
	addr, cl, adm := cliCluster(t)
	ctx := testCtx(t, 2*time.Minute)
	mustCLI(t, addr, "", "topic", "create", "tt")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tt", Value: []byte("committed-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	tx1 := txnProducer(t, addr, "tx1")
	produceInTxn(t, tx1, "aborted-1", "aborted-2")
	var listed []struct {
		TxnID string `json:"transactional_id"`
		State string `json:"state"`
	}
	cliJSON(t, addr, &listed, "txn", "list")
	if len(listed) != 1 || listed[0].TxnID != "tx1" || listed[0].State != "Ongoing" {
		t.Fatalf("txn list: %+v", listed)
	}
	var described []describedTxn
	cliJSON(t, addr, &described, "txn", "describe", "tx1")
	if len(described) != 1 || described[0].State != "Ongoing" || strings.Join(described[0].Partitions, ",") != "tt/0" {
		t.Fatalf("txn describe: %+v", described)
	}
	epoch := described[0].ProducerEpoch

	mustCLI(t, addr, "", "txn", "abort", "--transactional-id", "tx1")
	d := waitTxnState(t, adm, "tx1", "Empty", "CompleteAbort")
	if d.ProducerEpoch <= epoch {
		t.Errorf("epoch %d after abort, was %d", d.ProducerEpoch, epoch)
	}
	if err := tx1.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Errorf("the fenced producer committed")
	}

	if out := mustCLI(t, addr, "", "txn", "abort", "tx1"); !strings.Contains(out, "nothing to abort") {
		t.Errorf("abort of a closed transaction: %q", out)
	}

	// A second transaction, aborted by its partition and start offset.
	tx2 := txnProducer(t, addr, "tx2")
	start := produceInTxn(t, tx2, "aborted-3")
	mustCLI(t, addr, "", "txn", "abort", "--topic", "tt", "--partition", "0", "--start-offset", strconv.FormatInt(start, 10))
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"tt": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			t.Errorf("producer %d still has a transaction open at %d", p.ProducerID, p.CurrentTxnStartOffset)
		}
	})

	// Both logs end in an abort marker, which -e must see past.
	if got := mustCLI(t, addr, "", "consume", "tt", "-e", "--isolation-level", "read_committed"); got != "committed-0\n" {
		t.Errorf("read_committed -e: %q", got)
	}
	if got := mustCLI(t, addr, "", "consume", "tt", "-e"); got != "committed-0\naborted-1\naborted-2\naborted-3\n" {
		t.Errorf("read_uncommitted -e: %q", got)
	}
}

func txnProducer(t *testing.T, addr, id string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic("tt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceInTxn begins a transaction, writes values and leaves it open;
// it returns the first record's offset.
func produceInTxn(t *testing.T, cl *kgo.Client, values ...string) int64 {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	first := int64(-1)
	for _, v := range values {
		r, err := cl.ProduceSync(testCtx(t, 30*time.Second), &kgo.Record{Value: []byte(v)}).First()
		if err != nil {
			t.Fatal(err)
		}
		if first < 0 {
			first = r.Offset
		}
	}
	return first
}

func waitTxnState(t *testing.T, adm *kadm.Client, id string, states ...string) kadm.DescribedTransaction {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := adm.DescribeTransactions(testCtx(t, 10*time.Second), id)
		if err == nil {
			if d, _ := ds.On(id, nil); slices.Contains(states, d.State) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s never reached %v: %v %+v", id, states, err, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
