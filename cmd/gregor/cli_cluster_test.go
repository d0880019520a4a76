package main

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCLIClusterNodeDown: on three nodes (each broker and controller),
// cluster health is healthy and quorum describe lists three voters with
// one leader; after one node is killed, health names it as down, exits 1,
// and the quorum still answers.
func TestCLIClusterNodeDown(t *testing.T) {
	nodes := startThreeNodes(t)
	addr := nodes[0].addr
	mustCLI(t, addr, "", "topic", "create", "h", "-p", "3", "-r", "3")

	waitHealth(t, addr, "healthy", func(h clusterHealthReport, code int) bool {
		return code == 0 && h.Healthy && slices.Equal(h.Brokers, []int32{1, 2, 3})
	})
	// Each partition: three replicas, all in sync, led by one of them,
	// with the leader's log size.
	var described []topicDescription
	cliJSON(t, addr, &described, "topic", "describe", "h")
	for _, p := range described[0].Partitions {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 || !slices.Contains(p.Replicas, p.Leader) || p.SizeBytes < 0 {
			t.Errorf("partition on three nodes: %+v", p)
		}
	}
	var q quorumStatus
	cliJSON(t, addr, &q, "quorum", "describe")
	roles := map[string]int{}
	for _, r := range q.Replicas {
		roles[r.Role]++
	}
	if !slices.Equal(q.Voters, []int32{1, 2, 3}) || roles["Leader"] != 1 || roles["Follower"] != 2 || q.LeaderID < 1 || q.LeaderID > 3 {
		t.Fatalf("quorum describe on three nodes: %+v", q)
	}

	nodes[2].kill()
	h := waitHealth(t, addr, "node 3 down", func(h clusterHealthReport, code int) bool {
		return code == 1 && !h.Healthy && slices.Equal(h.DownBrokers, []int32{3})
	})
	if slices.Contains(h.Brokers, 3) {
		t.Errorf("health lists the killed node among the brokers: %+v", h)
	}
	if r := runCLI(t, addr, "", "cluster", "health"); r.code != 1 || !regexpMatch(`DOWN-BROKERS +3`, r.out) || !strings.Contains(r.err, "not healthy") {
		t.Errorf("cluster health table: exit %d\n%s%s", r.code, r.out, r.err)
	}
	cliJSON(t, addr, &q, "quorum", "describe")
	if len(q.Voters) != 3 || q.LeaderID == 3 {
		t.Errorf("quorum after node 3 died: %+v", q)
	}
}

// waitHealth polls `cluster health --json` until ok holds.
func waitHealth(t *testing.T, addr, what string, ok func(clusterHealthReport, int) bool) clusterHealthReport {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := runCLI(t, addr, "", "cluster", "health", "--json")
		var h clusterHealthReport
		err := json.Unmarshal([]byte(r.out), &h)
		if err == nil && ok(h, r.code) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster never %s: exit %d %v\n%s%s", what, r.code, err, r.out, r.err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startThreeNodes starts a three-node cluster of `gregor serve`
// processes, each broker and controller, with the extra properties on
// each, and waits for all three.
func startThreeNodes(t *testing.T, extra ...string) []*serveProcess {
	t.Helper()
	client, ctrl := freePorts(t, 3), freePorts(t, 3)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	var nodes []*serveProcess
	for i := range 3 {
		props := []string{
			fmt.Sprintf("node.id=%d", i+1),
			"process.roles=broker,controller",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", client[i], ctrl[i]),
			"cluster.id=MkU3OEVBNTcwNTJENDM2Qg",
			"default.replication.factor=3",
			"offsets.topic.replication.factor=3",
			"transaction.state.log.replication.factor=3",
		}
		props = append(props, extra...)
		args := []string{"--data-dir", t.TempDir()}
		for _, p := range props {
			args = append(args, "--override", p)
		}
		nodes = append(nodes, launchServe(t, args...))
	}
	for i, p := range nodes {
		select {
		case p.addr = <-p.started:
		case <-p.done:
			t.Fatalf("node %d exited:\n%s", i+1, p.log())
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not start:\n%s", i+1, p.log())
		}
	}
	return nodes
}

// freePorts returns n ports nothing listens on (the OS picked them free
// a moment ago).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}
