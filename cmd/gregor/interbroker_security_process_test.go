package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// securedNode is one `gregor serve` of a secured cluster, with what it
// takes to start it again.
type securedNode struct {
	id     int
	client string // the CLIENT listener's address
	props  string // its server.properties
	p      *serveProcess
}

func (n *securedNode) start(t *testing.T) {
	t.Helper()
	n.p = startServe(t, "--config", n.props)
}

// plainJAAS is a PlainLoginModule config: the node's own credentials
// (username, password) and the users it accepts.
func plainJAAS(user, pass string, users ...string) string {
	s := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s"`, user, pass)
	for i := 0; i+1 < len(users); i += 2 {
		s += fmt.Sprintf(` user_%s="%s"`, users[i], users[i+1])
	}
	return s + ";"
}

// securedClusterProps is node id's server.properties in a cluster whose
// client listener is SASL_SSL (PLAIN), certificates from `gregor cert` in
// dir, ACLs on and the brokers' principal User:broker in super.users.
// With mode peerPLAIN the inter-broker and controller listeners are
// SASL_SSL with PLAIN, and ibPass is the password the node presents on
// the inter-broker listener; with peerSCRAM the inter-broker listener
// uses SCRAM-SHA-512 instead (the user is made once the cluster runs);
// with peerMTLS they are SSL requiring client certificates, whose
// subjects CN=node<N> map to User:broker, and the node presents ibCert's
// key store (node<id> when "") on the inter-broker listener.
func securedClusterProps(dir string, id int, roles, voters string, client, internal, ctrl int, mode peerMode, ibPass, ibCert string) string {
	listeners := fmt.Sprintf("CLIENT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d", client, internal)
	if strings.Contains(roles, "controller") {
		listeners += fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", ctrl)
	}
	var peer []string
	if mode == peerMTLS {
		peer = []string{
			"listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL",
			"listener.name.internal.ssl.client.auth=required",
			"listener.name.controller.ssl.client.auth=required",
			"ssl.principal.mapping.rules=RULE:^CN=node[0-9]+$/broker/,DEFAULT",
		}
		if ibCert != "" {
			peer = append(peer, "listener.name.internal.ssl.keystore.type=PEM",
				"listener.name.internal.ssl.keystore.location="+ibCert)
		}
	} else {
		peer = []string{
			"listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
			"sasl.mechanism.controller.protocol=PLAIN",
			// alice may authenticate on the controller listener but has no
			// CLUSTER_ACTION there.
			"listener.name.controller.plain.sasl.jaas.config=" + plainJAAS("broker", "broker-secret", "broker", "broker-secret", "alice", "alice-secret"),
		}
		if mode == peerSCRAM {
			peer = append(peer, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
				"listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
				fmt.Sprintf(`listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="%s";`, ibPass))
		} else {
			peer = append(peer, "sasl.mechanism.inter.broker.protocol=PLAIN",
				"listener.name.internal.plain.sasl.jaas.config="+plainJAAS("broker", ibPass, "broker", "broker-secret"))
		}
	}
	return strings.Join(append([]string{
		fmt.Sprintf("node.id=%d", id),
		"process.roles=" + roles,
		"controller.quorum.voters=" + voters,
		"listeners=" + listeners,
		"inter.broker.listener.name=INTERNAL",
		"controller.listener.names=CONTROLLER",
		"cluster.id=MkU3OEVBNTcwNTJENDM2Qg",
		"log.dirs=" + filepath.Join(dir, fmt.Sprintf("data%d", id)),
		"offsets.topic.replication.factor=3",
		"transaction.state.log.replication.factor=3",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + filepath.Join(dir, fmt.Sprintf("node%d.keystore.pem", id)),
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + filepath.Join(dir, "ca.crt"),
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.client.plain.sasl.jaas.config=" + plainJAAS("", "", "admin", "admin-secret", "alice", "alice-secret"),
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:broker;User:admin",
		"replica.lag.time.max.ms=5000",
	}, peer...), "\n") + "\n"
}

// TestSecuredClusterSASLSSL runs three `gregor serve` processes whose
// inter-broker and controller listeners are SASL_SSL (PLAIN), with ACLs
// on and the brokers' principal in super.users: acks=all records at
// RF 3 survive a killed node, are replicated to every node (each made
// leader in turn and read back over TLS), a transaction across
// partitions of different leaders commits (markers and verifications
// between the brokers) and one aborts, and a fourth node presenting a
// wrong inter-broker password is refused by the leader it fetches from
// and never joins the ISR.
func TestSecuredClusterSASLSSL(t *testing.T) { runSecuredCluster(t, peerPLAIN) }

// TestSecuredClusterSCRAM is TestSecuredClusterSASLSSL with SCRAM-SHA-512
// on the inter-broker listener: the brokers' SCRAM user is made with
// AlterUserScramCredentials once the cluster runs (the controllers keep
// PLAIN: SCRAM credentials live in the log they replicate).
func TestSecuredClusterSCRAM(t *testing.T) { runSecuredCluster(t, peerSCRAM) }

// TestSecuredClusterMTLS is TestSecuredClusterSASLSSL with the
// inter-broker and controller listeners SSL requiring client
// certificates (the nodes' from `gregor cert`, mapped to User:broker by
// ssl.principal.mapping.rules); the fourth node presents, on the
// inter-broker listener, a certificate of another CA.
func TestSecuredClusterMTLS(t *testing.T) { runSecuredCluster(t, peerMTLS) }

// peerMode is how the nodes of runSecuredCluster authenticate to each
// other.
type peerMode int

const (
	peerPLAIN peerMode = iota
	peerSCRAM
	peerMTLS
)

func runSecuredCluster(t *testing.T, mode peerMode) {
	if testing.Short() {
		t.Skip("starts four gregor processes")
	}
	dir, otherCA := t.TempDir(), t.TempDir()
	for i := 1; i <= 4; i++ {
		if err := runCert([]string{"--dir", dir, "--name", fmt.Sprintf("node%d", i)}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	if err := runCert([]string{"--dir", otherCA, "--name", "node4"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	ports := freePorts(t, 12)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[8+i]))
	}
	var nodes []*securedNode
	for i := range 4 {
		roles, pass, cert := "broker,controller", "broker-secret", ""
		if i == 3 {
			roles, pass, cert = "broker", "not-the-password", filepath.Join(otherCA, "node4.keystore.pem")
		}
		props := filepath.Join(dir, fmt.Sprintf("node%d.properties", i+1))
		text := securedClusterProps(dir, i+1, roles, strings.Join(voters, ","), ports[2*i], ports[2*i+1], ports[8+min(i, 2)], mode, pass, cert)
		if err := os.WriteFile(props, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &securedNode{id: i + 1, client: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), props: props})
	}
	for _, n := range nodes[:3] {
		n.p = launchServe(t, "--config", n.props)
	}
	for _, n := range nodes[:3] {
		select {
		case n.p.addr = <-n.p.started:
		case <-n.p.done:
			t.Fatalf("node %d exited:\n%s", n.id, n.p.log())
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not start:\n%s", n.id, n.p.log())
		}
		if strings.Contains(n.p.log(), "User:ANONYMOUS") {
			t.Errorf("node %d warns of anonymous inter-broker connections although they are secured:\n%s", n.id, n.p.log())
		}
	}
	var seeds []string
	for _, n := range nodes[:3] {
		seeds = append(seeds, n.client)
	}
	tlsCfg := &tls.Config{RootCAs: pool}
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	ctx := testCtx(t, 4*time.Minute)

	if mode == peerSCRAM {
		waitFor(t, 30*time.Second, "the brokers' SCRAM user", func() error {
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-secret"}})
			if err == nil {
				err = res.Error()
			}
			return err
		})
	}
	const topic = "secured"
	waitFor(t, 60*time.Second, "the topic's creation", func() error {
		_, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
		if err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return err
		}
		return nil
	})
	partition := func() kadm.PartitionDetail {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return kadm.PartitionDetail{Leader: -1}
		}
		return md.Topics[topic].Partitions[0]
	}
	waitFor(t, 60*time.Second, "three in-sync replicas", func() error {
		if p := partition(); len(p.ISR) != 3 || p.Leader < 0 {
			return fmt.Errorf("partition %+v", p)
		}
		return nil
	})

	prod := newClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(100), kgo.RetryTimeout(60*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second))
	var want []string
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			v := fmt.Sprintf("record-%04d", i)
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			want = append(want, v)
		}
	}
	produce(0, 100)

	// Kill the leader: the others elect a new one over their secured
	// quorum and acks=all goes on with two in sync.
	killed := nodes[partition().Leader-1]
	killed.p.kill()
	produce(100, 100)
	if p := partition(); p.Leader == int32(killed.id) || slices.Contains(p.ISR, int32(killed.id)) {
		t.Fatalf("after killing node %d: partition %+v", killed.id, p)
	}
	killed.start(t)
	waitFor(t, 90*time.Second, fmt.Sprintf("node %d back in the ISR", killed.id), func() error {
		if p := partition(); len(p.ISR) != 3 {
			return fmt.Errorf("partition %+v", p)
		}
		return nil
	})
	produce(200, 50)

	// A transaction over partitions led by different nodes: the
	// coordinator's markers and the leaders' KIP-890 verifications go
	// over the secured inter-broker listener; a read_committed consumer
	// only gets past the transaction once its markers are written.
	const txnTopic = "secured-txn"
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, txnTopic); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	waitFor(t, 60*time.Second, "the transactional topic's leaders", func() error {
		md, err := adm.Metadata(ctx, txnTopic)
		if err != nil {
			return err
		}
		clear(leaders)
		// A broker may not have the topic in its image yet: no partitions.
		if n := len(md.Topics[txnTopic].Partitions); n != 3 {
			return fmt.Errorf("%d partitions of 3", n)
		}
		for _, p := range md.Topics[txnTopic].Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %+v", p)
			}
			leaders[p.Leader] = true
		}
		return nil
	})
	if len(leaders) < 2 {
		t.Fatalf("the three partitions share one leader %v: no marker would cross the network", leaders)
	}
	txp := newClient(kgo.TransactionalID("secured-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryTimeout(60*time.Second))
	for i, commit := range []bool{false, true} {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			r := &kgo.Record{Topic: txnTopic, Partition: p, Value: fmt.Appendf(nil, "txn%d-p%d", i, p)}
			if err := txp.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transactional produce to partition %d: %v", p, err)
			}
		}
		if err := txp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	rc := newClient(kgo.ConsumeTopics(txnTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var committed []string
	for len(committed) < 3 && ctx.Err() == nil {
		rc.PollFetches(ctx).EachRecord(func(r *kgo.Record) { committed = append(committed, string(r.Value)) })
	}
	slices.Sort(committed)
	if !slices.Equal(committed, []string{"txn1-p0", "txn1-p1", "txn1-p2"}) {
		t.Fatalf("read_committed got %v, want the committed transaction's three records only", committed)
	}

	if mode == peerPLAIN {
		// On the controller listener, a wrong password fails
		// authentication, and a principal that authenticates but lacks
		// CLUSTER_ACTION is closed before the quorum's handshake.
		ctrlAddr := fmt.Sprintf("127.0.0.1:%d", ports[8])
		for _, c := range []struct{ user, pass, logged string }{
			{"broker", "wrong", `msg="closing connection: failed authentication"`},
			{"alice", "alice-secret", `msg="closing connection: principal not authorized"`},
		} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(ctrlAddr), kgo.DialTLSConfig(tlsCfg),
				kgo.SASL(plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
			cancel()
			cl.Close()
			if err == nil {
				t.Fatalf("%s answered on the controller listener", c.user)
			}
			waitFor(t, 10*time.Second, "node 1 logging "+c.user+"'s refusal", func() error {
				for _, line := range strings.Split(nodes[0].p.log(), "\n") {
					if strings.Contains(line, c.logged) && strings.Contains(line, "listener=CONTROLLER") {
						t.Logf("node 1: %s", line)
						return nil
					}
				}
				return fmt.Errorf("no %s on CONTROLLER (client: %v)", c.logged, err)
			})
		}
	}

	// Read everything back from each node as the leader: reorder the
	// replicas so it is the preferred one, elect it, consume from the
	// start.
	for _, n := range nodes[:3] {
		p := partition()
		order := []int32{int32(n.id)}
		for _, r := range p.Replicas {
			if r != int32(n.id) {
				order = append(order, r)
			}
		}
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, order)
		if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
			t.Fatalf("reorder replicas to %v: %v %v", order, err, res.Error())
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("node %d leading", n.id), func() error {
			if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}}); err != nil {
				return err
			}
			if p := partition(); p.Leader != int32(n.id) {
				return fmt.Errorf("partition %+v", p)
			}
			return nil
		})
		cons := newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []string
		for len(got) < len(want) && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			if errs := fs.Errors(); len(errs) > 0 {
				t.Logf("fetch from node %d: %v", n.id, errs)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		cons.Close()
		if !slices.Equal(got, want) {
			t.Fatalf("read from node %d: %d records, want %d (first %v)", n.id, len(got), len(want), got[:min(3, len(got))])
		}
	}

	// The fourth node knows the controllers' credentials but not the
	// brokers' (a wrong password, or a certificate of another CA): it
	// registers, but the leader refuses its fetches, so a reassignment
	// adding it never completes and it never joins the ISR.
	refusal, fetchErr := "Invalid username or password", "SASL_AUTHENTICATION_FAILED"
	switch mode {
	case peerSCRAM:
		refusal = "invalid credentials with SASL mechanism SCRAM-SHA-512"
	case peerMTLS:
		refusal, fetchErr = "TLS handshake", "tls: "
	}
	bad := nodes[3]
	bad.start(t)
	waitFor(t, 60*time.Second, "node 4 registered", func() error {
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(bs.NodeIDs(), 4) {
			return fmt.Errorf("brokers %v", bs.NodeIDs())
		}
		return nil
	})
	leader := partition().Leader
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{leader, 4})
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("reassign to %d,4: %v %v", leader, err, res.Error())
	}
	leaderLog := nodes[leader-1].p
	waitFor(t, 60*time.Second, "the leader logging node 4's failed authentication", func() error {
		for _, line := range strings.Split(leaderLog.log(), "\n") {
			if strings.Contains(line, "failed authentication") && strings.Contains(line, "listener=INTERNAL") &&
				strings.Contains(line, refusal) {
				t.Logf("node %d: %s", leader, line)
				return nil
			}
		}
		return fmt.Errorf("no failed authentication on INTERNAL in node %d's log", leader)
	})
	time.Sleep(5 * time.Second) // several fetch attempts and an ISR check later
	p := partition()
	if slices.Contains(p.ISR, 4) {
		t.Fatalf("node 4 joined the ISR with a wrong password: %+v", p)
	}
	ras, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ongoing := false
	ras.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		ongoing = ongoing || slices.Contains(r.AddingReplicas, 4)
	})
	if !ongoing {
		t.Fatalf("the reassignment adding node 4 is no longer ongoing: %+v, partition %+v", ras, p)
	}
	for _, line := range strings.Split(bad.p.log(), "\n") {
		if strings.Contains(line, "replica fetch") && strings.Contains(line, fetchErr) {
			t.Logf("node 4: %s", line)
			break
		}
	}
	if !strings.Contains(bad.p.log(), fetchErr) {
		t.Errorf("node 4 does not log its refused authentication:\n%s", bad.p.log())
	}
}

// waitFor retries fn until it returns nil or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
