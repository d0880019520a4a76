package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cluster is three gregor processes, each broker and controller, as
// docker-compose.yml runs them.
type cluster struct {
	t        *testing.T
	dirs     [3]string
	ports    [3]int // EXTERNAL: clients
	internal [3]int // PLAINTEXT: replication
	ctrl     [3]int // CONTROLLER: the metadata quorum
	procs    [3]*process
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t}
	for i := range 3 {
		c.dirs[i] = t.TempDir()
		c.ports[i], c.internal[i], c.ctrl[i] = freePort(t), freePort(t), freePort(t)
	}
	for i := range 3 {
		c.procs[i] = launchGregor(t, c.args(i)...)
	}
	for i := range 3 {
		c.procs[i].waitStarted()
	}
	return c
}

func (c *cluster) args(i int) []string {
	var voters []string
	for j := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", j+1, c.ctrl[j]))
	}
	o := func(kv string) []string { return []string{"--override", kv} }
	var a []string
	for _, kv := range append(clusterProperties(i+1, strings.Join(voters, ","),
		fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", c.internal[i], c.ports[i], c.ctrl[i]),
		fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d", c.internal[i], c.ports[i]),
		c.dirs[i]),
		// Shorter than Kafka's defaults, so the test sees a failover in
		// seconds.
		"replica.lag.time.max.ms=3000",
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=500",
	) {
		a = append(a, o(kv)...)
	}
	return append([]string{"serve"}, a...)
}

// clusterProperties are the settings of node id in docker-compose.yml,
// with its addresses and data dir: TestComposeMatchesClusterTest checks
// that the compose file says the same.
func clusterProperties(id int, voters, listeners, advertised, dir string) []string {
	return []string{
		fmt.Sprintf("node.id=%d", id),
		"process.roles=broker,controller",
		"controller.quorum.voters=" + voters,
		"listeners=" + listeners,
		"advertised.listeners=" + advertised,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + dir,
		"cluster.id=MkU3OEVBNTcwNTJENDM2Qg",
		"default.replication.factor=3",
		"min.insync.replicas=2",
		"offsets.topic.replication.factor=3",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
	}
}

func (c *cluster) start(i int) {
	c.t.Helper()
	c.procs[i] = startGregorArgs(c.t, c.args(i)...)
}

func (c *cluster) seeds() []string {
	var s []string
	for i := range 3 {
		s = append(s, fmt.Sprintf("127.0.0.1:%d", c.ports[i]))
	}
	return s
}

// TestClusterKeepsAckedRecordsThroughBrokerLoss: a three-node cluster,
// a topic with replication factor 3 and min.insync.replicas 2, idempotent
// acks=all producers; one broker is killed with SIGKILL mid-stream and
// restarted. Every acknowledged record is read back once, in order.
func TestClusterKeepsAckedRecordsThroughBrokerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	c := newCluster(t)
	adm := kadm.NewClient(newClient(t, strings.Join(c.seeds(), ",")))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var err error
	for try := 0; try < 50; try++ {
		var resp kadm.CreateTopicResponse
		resp, err = adm.CreateTopic(ctx, 3, 3, nil, "replicated")
		if err == nil && resp.Err == nil {
			break
		}
		if err == nil {
			err = resp.Err
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create replicated topic: %v", err)
	}

	h := newHistory()
	pctx, pcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("producer-%d", w)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("replicated"),
				kgo.RecordRetries(1<<30), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for seq := 0; pctx.Err() == nil; seq++ {
				cl.Produce(pctx, &kgo.Record{Key: []byte(fmt.Sprint(seq % 10)), Value: recordValue(name, seq)}, func(r *kgo.Record, err error) {
					if err == nil {
						_, s, _ := parseValue(r.Value)
						h.ack(name, s, r.Partition, r.Offset)
					}
				})
				if seq%100 == 99 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	before := h.count()
	c.procs[1].kill()
	// acks=all stalls until the dead broker leaves the ISR
	// (replica.lag.time.max.ms) and its partitions get new leaders
	// (broker.session.timeout.ms); then records flow again.
	deadline := time.Now().Add(30 * time.Second)
	for h.count() < before+5000 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	during := h.count()
	c.start(1)
	time.Sleep(2 * time.Second)
	pcancel()
	wg.Wait()
	if during <= before {
		t.Fatalf("no record acknowledged while broker 2 was down (%d before, %d during)", before, during)
	}

	var log []readRecord
	for part, recs := range readAllFrom(t, c.seeds(), "replicated") {
		for _, r := range recs {
			log = append(log, readRecord{part, r.Offset, r.Value})
		}
	}
	if problems := h.check(log); len(problems) > 0 {
		if len(problems) > 20 {
			problems = problems[:20]
		}
		t.Fatalf("history check failed:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("%d acknowledged (%d before the kill, %d while broker 2 was down), all read back once, in order", h.count(), before, during-before)
}

// TestComposeMatchesClusterTest keeps docker-compose.yml's cluster profile
// in step with this file's cluster: each node's KAFKA_* variables, read
// as the image reads them (gregor container), are the properties the
// processes here run with; the shared cluster.id is the compose file's
// CLUSTER_ID, with which each container formats its dirs.
func TestComposeMatchesClusterTest(t *testing.T) {
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	compose := string(data)
	for id := 1; id <= 3; id++ {
		ext := 9092 + 2*id
		want := clusterProperties(id, "1@gregor1:9093,2@gregor2:9093,3@gregor3:9093",
			fmt.Sprintf("PLAINTEXT://0.0.0.0:19092,EXTERNAL://0.0.0.0:%d,CONTROLLER://0.0.0.0:9093", ext),
			// CONTROLLER is advertised: listeners binds it on 0.0.0.0,
			// which Kafka (and gregor) refuse to advertise.
			fmt.Sprintf("PLAINTEXT://gregor%d:19092,EXTERNAL://localhost:%d,CONTROLLER://gregor%d:9093", id, ext, id), "/var/lib/gregor/data")
		start := strings.Index(compose, fmt.Sprintf("  gregor%d:\n", id))
		if start < 0 {
			t.Fatalf("docker-compose.yml has no service gregor%d", id)
		}
		service := compose[start+1:]
		if end := strings.Index(service, "\n  gregor"); end >= 0 {
			service = service[:end]
		}
		for _, kv := range want {
			name, val, _ := strings.Cut(kv, "=")
			var line string
			switch name {
			case "cluster.id":
				line = fmt.Sprintf("CLUSTER_ID: %q", val)
			case "log.dirs":
				line = fmt.Sprintf("gregor%d-data:%s", id, val) // the volume, the image's data dir
			default:
				line = fmt.Sprintf("%s: %q", composeVariable(name), val)
			}
			if !strings.Contains(service, line) {
				t.Errorf("gregor%d in docker-compose.yml lacks %s (for %s)", id, line, kv)
			}
		}
	}
}

// composeVariable is the apache/kafka image's variable for a property:
// KAFKA_ and the name upper-cased, "-" written "___", "_" "__" and "." "_".
func composeVariable(property string) string {
	v := strings.NewReplacer("-", "___", "_", "__", ".", "_").Replace(property)
	return "KAFKA_" + strings.ToUpper(v)
}
