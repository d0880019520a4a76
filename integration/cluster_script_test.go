//go:build unix

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clusterScriptPorts finds a base port such that every port
// scripts/cluster.sh derives from it is free: the three client ports and,
// 10,000 above, the replication and quorum ports, and the HTTP ports
// 552 above; all below the ephemeral range (32768 and up), where
// connections take ports, which the script refuses: bases 12000 to 22700,
// their highest port, base+10005, under 32768.
func clusterScriptPorts(t *testing.T) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := 12000 + 2*int(time.Now().UnixNano()%5350)
		ok := true
		for n := 0; n < 3 && ok; n++ {
			for _, p := range []int{base + 2*n, base + 10000 + 2*n, base + 10001 + 2*n, base + 552 + n} {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					ok = false
					break
				}
				ln.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range for scripts/cluster.sh")
	return 0
}

// TestClusterScript runs `make cluster`'s script as a user would: three
// nodes come up with the properties of docker-compose.yml, a topic with
// replication factor 3 takes acks=all records that read back exactly, and
// SIGTERM to the script stops every node.
func TestClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	base := clusterScriptPorts(t)
	dir := t.TempDir()
	env := append(os.Environ(), "GREGOR_BIN="+gregorBin, "GREGOR_CLUSTER_DIR="+dir,
		fmt.Sprintf("GREGOR_CLUSTER_PORT=%d", base))

	// The script's nodes are docker-compose.yml's: the same properties as
	// clusterProperties, which TestComposeMatchesClusterTest holds to the
	// compose file.
	var voters []string
	for n := 1; n <= 3; n++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n, base+10001+2*(n-1)))
	}
	for n := 1; n <= 3; n++ {
		cmd := exec.Command("../scripts/cluster.sh", "--print", fmt.Sprint(n))
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("cluster.sh --print %d: %v", n, err)
		}
		client, internal, ctrl := base+2*(n-1), base+10000+2*(n-1), base+10001+2*(n-1)
		var want []string
		for _, kv := range clusterProperties(n, strings.Join(voters, ","),
			fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", internal, client, ctrl),
			fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d", internal, client),
			filepath.Join(dir, fmt.Sprintf("node%d", n))) {
			want = append(want, "--override", kv)
		}
		// Only the script has it: the three nodes share one localhost.
		want = append(want, "--override", fmt.Sprintf("http.listener=127.0.0.1:%d", base+552+n-1))
		got := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(got) == 0 || got[0] != "serve" || !slices.Equal(got[1:], want) {
			t.Fatalf("node %d arguments:\n got %q\nwant %q", n, got, append([]string{"serve"}, want...))
		}
	}

	script := exec.Command("../scripts/cluster.sh")
	script.Env = env
	// A file, not a pipe: Wait must not wait on the nodes' inherited
	// descriptors. Its own process group lets the cleanup stop every node.
	out, err := os.Create(filepath.Join(dir, "script.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	script.Stdout, script.Stderr = out, out
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = script.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			syscall.Kill(-script.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			for n := 1; n <= 3; n++ {
				log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.log", n)))
				t.Logf("node %d log:\n%s", n, log)
			}
			so, _ := os.ReadFile(out.Name())
			t.Logf("script output:\n%s", so)
		}
	})

	seeds := []string{fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+2), fmt.Sprintf("127.0.0.1:%d", base+4)}
	cl := newClient(t, strings.Join(seeds, ","), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Every node registered: the cluster the script promises.
	// A client of its own for each look: franz-go keeps the brokers of
	// an answer it got while the nodes were still registering.
	for {
		probe, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		m, err := kadm.NewClient(probe).BrokerMetadata(ctx)
		probe.Close()
		if err == nil && len(m.Brokers) == 3 {
			break
		}
		select {
		case <-exited:
			t.Fatalf("cluster.sh exited early: %v", waitErr)
		case <-ctx.Done():
			t.Fatalf("three brokers never registered: %v %+v", err, m.Brokers)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Each node's own HTTP listener answers /readyz for that node.
	for n := 1; n <= 3; n++ {
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", base+552+n-1)
		for {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && resp.Header.Get("Gregor-Node-Id") == fmt.Sprint(n) {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d %s never ready: %v", n, url, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	const topic = "script"
	for {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	const n = 200
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// A replica on each node: the topic's partition has three replicas in
	// sync once the followers caught up.
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			p := td[topic].Partitions[0]
			if len(p.Replicas) == 3 && len(p.ISR) == 3 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("replicas of %s never all in sync: %v %+v", topic, err, td)
		}
		time.Sleep(200 * time.Millisecond)
	}
	consumer := newClient(t, strings.Join(seeds, ","), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
	}))
	var got int
	for got < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records back", got, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%d", got); string(r.Value) != want || r.Offset != int64(got) {
				t.Fatalf("record at %d: %q at offset %d, want %q", got, r.Value, r.Offset, want)
			}
			got++
		})
	}

	// kill -9 of one node (as people try failover) leaves the script and
	// the other two running: acks=all records still go in (min ISR 2) and
	// read back from the survivors.
	victim := nodePID(t, out.Name(), 3)
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill node 3 (pid %d): %v", victim, err)
	}
	for i := n; i < n+50; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d after node 3 was killed: %v", i, err)
		}
	}
	for got < n+50 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records back after node 3 was killed", got, n+50)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%d", got); string(r.Value) != want || r.Offset != int64(got) {
				t.Fatalf("record at %d: %q at offset %d, want %q", got, r.Value, r.Offset, want)
			}
			got++
		})
	}
	select {
	case <-exited:
		t.Fatalf("cluster.sh exited when one node was killed: %v", waitErr)
	default:
	}
	if so, _ := os.ReadFile(out.Name()); !strings.Contains(string(so), "node 3 exited") {
		t.Errorf("the script did not report node 3's exit:\n%s", so)
	}

	// SIGTERM stops the other nodes cleanly, and the script with them.
	script.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("cluster.sh exited with %v after SIGTERM", waitErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cluster.sh did not stop on SIGTERM")
	}
	for n := 1; n <= 3; n++ {
		log, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "gregor started") {
			t.Errorf("node %d log has no start-up line", n)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node%d", n), topic+"-0")); err != nil {
			t.Errorf("node %d has no replica of %s-0: %v", n, topic, err)
		}
	}
}

// nodePID reads node n's pid from the script's "node N: pid P," line.
func nodePID(t *testing.T, scriptOut string, n int) int {
	t.Helper()
	so, err := os.ReadFile(scriptOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(so), "\n") {
		var node, pid int
		if _, err := fmt.Sscanf(line, "node %d: pid %d,", &node, &pid); err == nil && node == n {
			return pid
		}
	}
	t.Fatalf("no pid for node %d in the script's output:\n%s", n, so)
	return 0
}
