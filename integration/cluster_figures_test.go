package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var clusterFigures = flag.Bool("cluster.figures", false,
	"run TestClusterFigures: replicated-cluster figures for docs/performance.md (a non-race gregor, several minutes)")

// TestClusterFigures measures the replicated cluster's figures of
// docs/performance.md against a gregor built without the race detector,
// on three combined-mode nodes on this machine (cluster_test.go's
// settings: replica.lag.time.max.ms and broker.session.timeout.ms 3000,
// heartbeats every 500 ms):
//
//   - leader failover: SIGKILL of a partition's leader to the next ack of
//     a record on that partition, median and max over at least 20 kills
//     (-cluster.kills raises it);
//   - produce throughput, acks=all on replication factor 3 against acks=1
//     on replication factor 1, 1 KiB records, with gregor perf produce;
//   - controller failover: SIGKILL of the active controller to the next
//     CreateTopics that succeeds;
//   - catch-up: a replica whose partition directory was wiped, restarted,
//     until it is back in the ISR of a 1 GiB partition.
//
// It runs only when asked:
//
//	go test ./integration -run TestClusterFigures -v -timeout 60m -args -cluster.figures
func TestClusterFigures(t *testing.T) {
	if !*clusterFigures {
		t.Skip("measures for minutes; pass -cluster.figures")
	}
	bin := filepath.Join(t.TempDir(), "gregor")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gregor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build gregor: %v", err)
	}
	// launchGregor runs gregorBin; this test is not parallel.
	raceBin := gregorBin
	gregorBin = bin
	t.Cleanup(func() { gregorBin = raceBin })

	t.Run("leader-failover", figureLeaderFailover)
	t.Run("throughput", figureReplicatedThroughput)
	t.Run("controller-failover", figureControllerFailover)
	t.Run("catch-up", figureCatchUp)
}

func figureLeaderFailover(t *testing.T) {
	o := newClusterOps(t, newCluster(t))
	kills := max(*clusterKills, 20)
	res := leaderKillRun{
		topic: "failover", partitions: 3, kills: kills,
		interval: 10 * time.Second, down: 5 * time.Second,
		producers: 3, rate: 300, preferred: true,
	}.run(t, o)
	if len(res) < kills {
		t.Fatalf("%d of %d kills completed", len(res), kills)
	}
	var ds, plain, ctrl []time.Duration
	for _, r := range res {
		ds = append(ds, r.failover)
		if r.controller {
			ctrl = append(ctrl, r.failover)
		} else {
			plain = append(plain, r.failover)
		}
	}
	med, most := durationStats(ds)
	pmed, pmax := durationStats(plain)
	cmed, cmax := durationStats(ctrl)
	t.Logf("FIGURE leader failover (SIGKILL to next ack, acks=all RF3): median %v, max %v over %d kills "+
		"(%d brokers only: median %v, max %v; %d also the active controller: median %v, max %v)",
		med.Round(time.Millisecond), most.Round(time.Millisecond), len(ds),
		len(plain), pmed.Round(time.Millisecond), pmax.Round(time.Millisecond),
		len(ctrl), cmed.Round(time.Millisecond), cmax.Round(time.Millisecond))
}

// perfResult is the part of gregor perf's JSON summary the figures use.
type perfResult struct {
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Latency       struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
}

// perfProduce runs gregor perf produce with args and returns its summary.
func perfProduce(t *testing.T, args ...string) perfResult {
	t.Helper()
	cmd := exec.Command(gregorBin, append([]string{"perf", "produce", "--json"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("gregor perf produce %v: %v\n%s", args, err, errOut.String())
	}
	var r perfResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("perf summary %q: %v", out.String(), err)
	}
	return r
}

func figureReplicatedThroughput(t *testing.T) {
	o := newClusterOps(t, newCluster(t))
	// 1 GiB a run, on fresh topics deleted after each pair of runs, the
	// two settings taking turns going first: other load on the machine
	// comes and goes.
	const records, runs = 1 << 20, 5
	bootstrap := strings.Join(o.seeds(), ",")
	var rf3, rf1 []perfResult
	for k := range runs {
		all, one := fmt.Sprintf("tput-rf3-%d", k), fmt.Sprintf("tput-rf1-%d", k)
		o.createTopic(t, all, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
		o.createTopic(t, one, 3, 1, nil)
		runAll := func() {
			rf3 = append(rf3, perfProduce(t, "--bootstrap", bootstrap, "--topic", all,
				"--records", fmt.Sprint(records), "--record-size", "1024", "--acks", "all"))
		}
		runOne := func() {
			rf1 = append(rf1, perfProduce(t, "--bootstrap", bootstrap, "--topic", one,
				"--records", fmt.Sprint(records), "--record-size", "1024", "--acks", "1", "--idempotent=false"))
		}
		if k%2 == 0 {
			runAll()
			runOne()
		} else {
			runOne()
			runAll()
		}
		t.Logf("run %d: acks=all RF3 %.1f MB/s, acks=1 RF1 %.1f MB/s", k+1, rf3[k].MBPerSec, rf1[k].MBPerSec)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := o.adm.DeleteTopics(ctx, all, one)
		cancel()
		if err != nil {
			t.Fatalf("delete %s and %s: %v", all, one, err)
		}
	}
	median := func(rs []perfResult) perfResult {
		s := slices.Clone(rs)
		slices.SortFunc(s, func(a, b perfResult) int { return int(a.MBPerSec*1000) - int(b.MBPerSec*1000) })
		return s[len(s)/2]
	}
	for _, rs := range [][]perfResult{rf3, rf1} {
		for _, r := range rs {
			if r.Records != records {
				t.Fatalf("perf sent %d records, want %d", r.Records, records)
			}
		}
	}
	a, b := median(rf3), median(rf1)
	t.Logf("FIGURE produce 1 KiB records, 3 partitions, median of %d runs of %d records: acks=all RF3 (idempotent) %.1f MB/s, %.0f records/s, p50 %.1f ms, p99 %.1f ms; "+
		"acks=1 RF1 %.1f MB/s, %.0f records/s, p50 %.1f ms, p99 %.1f ms; ratio %.2f",
		runs, records, a.MBPerSec, a.RecordsPerSec, a.Latency.P50, a.Latency.P99,
		b.MBPerSec, b.RecordsPerSec, b.Latency.P50, b.Latency.P99, a.MBPerSec/b.MBPerSec)
}

// createTopicOnce sends one CreateTopics to node i alone (any node
// forwards it to the active controller) and returns its error.
func (o *clusterOps) createTopicOnce(i int, topic string, rf int16, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, rf
	req.Topics = append(req.Topics, rt)
	seeds := o.nodes[i].SeedBrokers()
	if len(seeds) == 0 {
		return errors.New("no seed broker")
	}
	resp, err := req.RequestWith(ctx, seeds[0])
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("create topics: %d topics in the answer", len(resp.Topics))
	}
	return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
}

func figureControllerFailover(t *testing.T) {
	o := newClusterOps(t, newCluster(t))
	const rounds = 10
	var ds []time.Duration
	for k := range rounds {
		var leader int32
		if !waitCond(60*time.Second, func() bool {
			var err error
			leader, err = o.activeController()
			return err == nil
		}) {
			t.Fatalf("round %d: no active controller", k+1)
		}
		topic := fmt.Sprintf("ctl-%d", k)
		start := time.Now()
		o.kill(member(leader))
		var created time.Duration
		if !waitCond(120*time.Second, func() bool {
			for i := range 3 {
				if !o.alive(i) {
					continue
				}
				err := o.createTopicOnce(i, topic, 2, 2*time.Second)
				if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
					created = time.Since(start)
					return true
				}
			}
			return false
		}) {
			t.Fatalf("round %d: no topic created in two minutes after killing controller %d", k+1, leader)
		}
		newLeader, _ := o.activeController()
		t.Logf("round %d: controller %d killed; CreateTopics succeeded after %v; controller now %d",
			k+1, leader, created.Round(time.Millisecond), newLeader)
		ds = append(ds, created)
		o.restart(member(leader))
		// Back in the quorum and serving: the restarted node's image has
		// the topic created without it.
		if !waitCond(120*time.Second, func() bool {
			_, err := o.partitions(member(leader), topic)
			return err == nil
		}) {
			t.Fatalf("round %d: node %d does not know topic %s two minutes after its restart", k+1, leader, topic)
		}
		if !o.waitFullISR(topic, 120*time.Second) {
			t.Fatalf("round %d: topic %s has no full ISR two minutes after the restart", k+1, topic)
		}
	}
	med, most := durationStats(ds)
	t.Logf("FIGURE controller failover (SIGKILL of the active controller to the next successful CreateTopics): median %v, max %v over %d kills",
		med.Round(time.Millisecond), most.Round(time.Millisecond), len(ds))
}

// logBytes is the size of the .log segments in a partition directory.
func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
	}
	return n
}

func figureCatchUp(t *testing.T) {
	o := newClusterOps(t, newCluster(t))
	const topic = "catchup"
	o.createTopic(t, topic, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	const records = 1 << 20 // of 1 KiB: 1 GiB of values
	p := perfProduce(t, "--bootstrap", strings.Join(o.seeds(), ","), "--topic", topic,
		"--records", fmt.Sprint(records), "--record-size", "1024", "--acks", "all")
	t.Logf("wrote %d records of 1 KiB in %.1f s (%.1f MB/s)", p.Records, p.Seconds, p.MBPerSec)
	if !o.waitFullISR(topic, 120*time.Second) {
		t.Fatal("the ISR is not full after the load")
	}
	leader, _, err := o.leader(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	follower := leader%3 + 1 // the next node id
	f := member(follower)
	dir := filepath.Join(o.dirs[f], topic+"-0")
	want := logBytes(t, filepath.Join(o.dirs[member(leader)], topic+"-0"))

	o.kill(f)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Out of the ISR first (fenced, or dropped for lagging), so that
	// rejoining it means the replica caught up from nothing.
	if !waitCond(60*time.Second, func() bool {
		l, _, err := o.leader(topic, 0)
		if err != nil || l < 1 {
			return false
		}
		view, err := o.partitions(member(l), topic)
		return err == nil && !slices.Contains(view[0].ISR, follower)
	}) {
		t.Fatalf("node %d still in the ISR a minute after its kill", follower)
	}
	start := time.Now()
	o.restart(f)
	startedIn := time.Since(start)
	if !waitCond(20*time.Minute, func() bool { return o.inISR(topic, 0, follower) }) {
		t.Fatalf("node %d not back in the ISR after 20 minutes (%d of %d bytes)", follower, logBytes(t, dir), want)
	}
	took := time.Since(start)
	got := logBytes(t, dir)
	if got != want {
		t.Errorf("the wiped replica holds %d bytes of segments, the leader %d", got, want)
	}
	t.Logf("FIGURE catch-up: node %d with a wiped partition directory rejoined the ISR of a %.2f GiB partition %v after its restart "+
		"(%v of it starting the process), %.1f MB/s",
		follower, float64(want)/(1<<30), took.Round(time.Millisecond), startedIn.Round(time.Millisecond),
		float64(want)/(1<<20)/took.Seconds())
}
