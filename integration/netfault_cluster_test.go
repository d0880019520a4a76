package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A three-node cluster whose every network link goes through a faultLink,
// so a test can partition it as a firewall would: node i reaches node j's
// replication listener through repl[i][j], node j's controller listener
// through ctrl[i][j], and clients reach node i through client[i].
//
// Each node has one inter-broker listener per peer (R1, R2, R3), and node
// i names Ri as its inter.broker.listener.name: a broker looks a peer's
// address up under its own inter-broker listener name, so node i fetches
// from node j at the address node j advertises for Ri, which is the link
// repl[i][j]. Each node's controller.quorum.voters names, for every other
// voter, the link from this node to it. Clients connect to EXTERNAL,
// advertised as client[i]. Node ids are 1..3; member i of the arrays is
// node i+1.

// nfNode is one gregor process of an nfCluster.
type nfNode struct {
	id   int32
	dir  string
	ext  int    // EXTERNAL, clients
	ctrl int    // CONTROLLER
	repl [3]int // Rk for k = 1..3: where node k's replication fetches land
	proc *process
}

// nfCluster is the cluster with its links.
type nfCluster struct {
	t          *testing.T
	nodes      [3]*nfNode
	repl       [3][3]*faultLink // [from][to]; nil on the diagonal
	ctrl       [3][3]*faultLink
	clientLink [3]*faultLink
	props      []string
}

// nfBaseProps: Kafka's timeouts shortened so a partition is noticed in
// seconds: a follower that fetches nothing for 3 s leaves the ISR, a
// broker that sends no heartbeat for 3 s is fenced.
var nfBaseProps = []string{
	"replica.lag.time.max.ms=3000",
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=500",
	"replica.fetch.backoff.ms=200",
	"replica.fetch.wait.max.ms=200",
	"group.initial.rebalance.delay.ms=0",
}

// nfStart starts the cluster with props added to nfBaseProps.
func nfStart(t *testing.T, props ...string) *nfCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	c := &nfCluster{t: t, props: append(slices.Clone(nfBaseProps), props...)}
	for i := range 3 {
		n := &nfNode{id: int32(i + 1), dir: t.TempDir(), ext: freePort(t), ctrl: freePort(t)}
		for k := range 3 {
			n.repl[k] = freePort(t)
		}
		c.nodes[i] = n
	}
	mk := func(name string, port int) *faultLink {
		l, err := newFaultLink(name, fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.close)
		return l
	}
	for i := range 3 {
		c.clientLink[i] = mk(fmt.Sprintf("client→%d", i+1), c.nodes[i].ext)
		for j := range 3 {
			if i != j {
				c.repl[i][j] = mk(fmt.Sprintf("repl %d→%d", i+1, j+1), c.nodes[j].repl[i])
				c.ctrl[i][j] = mk(fmt.Sprintf("ctrl %d→%d", i+1, j+1), c.nodes[j].ctrl)
			}
		}
	}
	for _, n := range c.nodes {
		n.proc = launchGregor(t, c.args(n)...)
	}
	for _, n := range c.nodes {
		n.proc.waitStarted()
	}
	return c
}

func (c *nfCluster) args(n *nfNode) []string {
	me := int(n.id) - 1
	var voters []string
	for j, m := range c.nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", m.ctrl)
		if j != me {
			addr = c.ctrl[me][j].addr()
		}
		voters = append(voters, fmt.Sprintf("%d@%s", m.id, addr))
	}
	listeners := []string{fmt.Sprintf("EXTERNAL://127.0.0.1:%d", n.ext)}
	advertised := []string{"EXTERNAL://" + c.clientLink[me].addr()}
	protocols := []string{"EXTERNAL:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
	for k := range 3 {
		name := fmt.Sprintf("R%d", k+1)
		listeners = append(listeners, fmt.Sprintf("%s://127.0.0.1:%d", name, n.repl[k]))
		addr := fmt.Sprintf("127.0.0.1:%d", n.repl[k])
		if k != me {
			addr = c.repl[k][me].addr()
		}
		advertised = append(advertised, fmt.Sprintf("%s://%s", name, addr))
		protocols = append(protocols, name+":PLAINTEXT")
	}
	listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", n.ctrl))
	props := clusterProperties(int(n.id), strings.Join(voters, ","), strings.Join(listeners, ","), strings.Join(advertised, ","), n.dir)
	for i, kv := range props {
		switch {
		case strings.HasPrefix(kv, "listener.security.protocol.map="):
			props[i] = "listener.security.protocol.map=" + strings.Join(protocols, ",")
		case strings.HasPrefix(kv, "inter.broker.listener.name="):
			props[i] = fmt.Sprintf("inter.broker.listener.name=R%d", n.id)
		}
	}
	a := []string{"serve"}
	for _, kv := range append(props, "controller.listener.names=CONTROLLER") {
		a = append(a, "--override", kv)
	}
	for _, kv := range c.props {
		a = append(a, "--override", kv)
	}
	return a
}

func (c *nfCluster) node(id int32) *nfNode { return c.nodes[id-1] }

// seeds are the client links of every node.
func (c *nfCluster) seeds() []string {
	var s []string
	for _, l := range c.clientLink {
		s = append(s, l.addr())
	}
	return s
}

// client is a franz-go client bootstrapped through the client links.
func (c *nfCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	return newClient(c.t, strings.Join(c.seeds(), ","), opts...)
}

// isolate cuts node id from the other nodes, both ways, replication and
// quorum alike; its clients still reach it.
func (c *nfCluster) isolate(id int32) {
	i := int(id) - 1
	for j := range 3 {
		if j != i {
			c.repl[i][j].setCut(true)
			c.repl[j][i].setCut(true)
			c.ctrl[i][j].setCut(true)
			c.ctrl[j][i].setCut(true)
		}
	}
}

// slow delays every link to and from node id, both directions, by d.
func (c *nfCluster) slow(id int32, d time.Duration) {
	i := int(id) - 1
	c.clientLink[i].setDelay(d)
	for j := range 3 {
		if j != i {
			for _, l := range []*faultLink{c.repl[i][j], c.repl[j][i], c.ctrl[i][j], c.ctrl[j][i]} {
				l.setDelay(d)
			}
		}
	}
}

// cutOneWay cuts every link node from dials to node to (replication and
// quorum); the links the other way stay up.
func (c *nfCluster) cutOneWay(from, to int32) {
	c.repl[from-1][to-1].setCut(true)
	c.ctrl[from-1][to-1].setCut(true)
}

// healAll heals every link.
func (c *nfCluster) healAll() {
	for i := range 3 {
		c.clientLink[i].heal()
		for j := range 3 {
			if i != j {
				c.repl[i][j].heal()
				c.ctrl[i][j].heal()
			}
		}
	}
}

// kill stops node id with SIGKILL; restart starts it again on its data
// dir and ports.
func (c *nfCluster) kill(id int32) { c.node(id).proc.kill() }

func (c *nfCluster) restart(id int32) {
	c.t.Helper()
	n := c.node(id)
	n.proc = startGregorArgs(c.t, c.args(n)...)
}

// pause freezes node id (SIGSTOP) and resume thaws it (SIGCONT); a test
// that fails in between still thaws it at cleanup.
func (c *nfCluster) pause(id int32) {
	c.t.Helper()
	p := c.node(id).proc
	if err := freeze(p.cmd.Process); err != nil {
		c.t.Fatalf("SIGSTOP node %d: %v", id, err)
	}
	c.t.Cleanup(func() { thaw(p.cmd.Process) })
}

func (c *nfCluster) resume(id int32) {
	c.t.Helper()
	if err := thaw(c.node(id).proc.cmd.Process); err != nil {
		c.t.Fatalf("SIGCONT node %d: %v", id, err)
	}
}

// partitionDirs lists the partition directories (topic-N) of node id's
// data dir for the given topics; every topic when topics is empty.
func (c *nfCluster) partitionDirs(id int32, topics ...string) ([]string, error) {
	ents, err := os.ReadDir(c.node(id).dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		i := strings.LastIndexByte(name, '-')
		if !e.IsDir() || i <= 0 || strings.Contains(name, ".") {
			continue
		}
		if len(topics) > 0 && !slices.Contains(topics, name[:i]) {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// replicaBytes is a partition's .log segments on one node, in order.
func (c *nfCluster) replicaBytes(id int32, partDir string) ([]byte, error) {
	segs, err := filepath.Glob(filepath.Join(c.node(id).dir, partDir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(segs)
	var out bytes.Buffer
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, err
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// divergence compares every replica of the topics' partitions on the
// three nodes and describes each partition whose replicas are not byte
// for byte alike (or whose log is not whole batches); nil when all agree.
func (c *nfCluster) divergence(topics ...string) []string {
	dirs, err := c.partitionDirs(1, topics...)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, d := range dirs {
		var first []byte
		for _, n := range c.nodes {
			b, err := c.replicaBytes(n.id, d)
			if err != nil {
				out = append(out, fmt.Sprintf("%s on node %d: %v", d, n.id, err))
				break
			}
			if _, err := cuBatches(b); err != nil {
				out = append(out, fmt.Sprintf("%s on node %d: %v", d, n.id, err))
				break
			}
			if n.id == 1 {
				first = b
				continue
			}
			if !bytes.Equal(b, first) {
				out = append(out, fmt.Sprintf("%s: node %d holds %d bytes, node 1 %d (first difference at byte %d)",
					d, n.id, len(b), len(first), firstDiff(b, first)))
				break
			}
		}
	}
	return out
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// waitConverged waits up to d for every replica of the topics to be
// alike and returns what still differs when d has passed.
func (c *nfCluster) waitConverged(d time.Duration, topics ...string) []string {
	var last []string
	waitCond(d, func() bool {
		last = c.divergence(topics...)
		return len(last) == 0
	})
	return last
}

// checkRouted fails the test unless every node-to-node link carried a
// connection: proof that replication and the quorum go through the
// links, so cutting one is a real partition.
func (c *nfCluster) checkRouted(t *testing.T) {
	t.Helper()
	for i := range 3 {
		if c.clientLink[i].accepted.Load() == 0 {
			t.Errorf("no client connection went through %s", c.clientLink[i].name)
		}
		for j := range 3 {
			if i == j {
				continue
			}
			for _, l := range []*faultLink{c.repl[i][j], c.ctrl[i][j]} {
				if l.accepted.Load() == 0 {
					t.Errorf("no connection went through link %s", l.name)
				}
			}
		}
	}
}
