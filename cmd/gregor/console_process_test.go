package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/gregorbroker/gregor/broker"
)

// TestConsoleServed: `gregor serve` serves the web console at / of its
// HTTP listener beside /metrics, connected through its client listener;
// http.console.read.only refuses produce; http.console.enable=false
// leaves only the listener's own paths.
func TestConsoleServed(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0")
	web := httpAddr(t, p)
	if code, body := httpGet(t, web, "/"); code != 200 || !strings.Contains(body, "<title>Gregor console</title>") {
		t.Fatalf("/: %d %.200s", code, body)
	}
	var st struct {
		On       bool     `json:"on"`
		ReadOnly bool     `json:"read_only"`
		Seeds    []string `json:"seeds"`
	}
	_, body := httpGet(t, web, "/api/status")
	if err := json.Unmarshal([]byte(body), &st); err != nil || !st.On || st.ReadOnly || len(st.Seeds) != 1 || st.Seeds[0] != p.addr {
		t.Fatalf("status %s (%v), want on through %s", body, err, p.addr)
	}
	mustCLI(t, p.addr, "", "topic", "create", "seen", "-p", "1")
	if code, body := httpGet(t, web, "/api/topics"); code != 200 || !strings.Contains(body, `"name":"seen"`) {
		t.Fatalf("/api/topics: %d %s", code, body)
	}
	if code, body := httpGet(t, web, "/metrics"); code != 200 || !strings.Contains(body, "kafka_server_replicamanager_partitioncount") {
		t.Fatalf("/metrics beside the console: %d", code)
	}
	// Bound to loopback: a request for another host name (DNS
	// rebinding) is refused by the console, not by /metrics.
	for path, want := range map[string]int{"/api/topics": http.StatusMisdirectedRequest, "/": http.StatusMisdirectedRequest, "/healthz": 200} {
		req, _ := http.NewRequest("GET", "http://"+web+path, nil)
		req.Host = "rebound.example:9644"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s for another host: %d, want %d", path, resp.StatusCode, want)
		}
	}
	p.stop()

	ro := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0",
		"--override", "http.console.read.only=true")
	web = httpAddr(t, ro)
	mustCLI(t, ro.addr, "", "topic", "create", "ro", "-p", "1")
	resp, err := http.Post("http://"+web+"/api/topics/ro/records", "application/json", strings.NewReader(`{"value":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("produce on a read-only console: %d", resp.StatusCode)
	}
	ro.stop()

	off := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0",
		"--override", "http.console.enable=false")
	web = httpAddr(t, off)
	if code, _ := httpGet(t, web, "/"); code != 404 {
		t.Fatalf("/ with the console disabled: %d", code)
	}
	if code, _ := httpGet(t, web, "/readyz"); code != 200 {
		t.Fatalf("/readyz with the console disabled: %d", code)
	}
}

// TestConsoleSeed: the console connects only through a PLAINTEXT
// listener (loopback for a wildcard bind) and is off, with the reason,
// when every listener wants TLS or SASL; which http.listener values
// count as loopback.
func TestConsoleSeed(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	seed, name, err := consoleSeed([]broker.ClientListener{
		{Name: "SECURE", Protocol: "SASL_SSL", Addr: tcp("127.0.0.1", 9094)},
		{Name: "INTERNAL", Protocol: "PLAINTEXT", Addr: tcp("::", 9092)},
	}, "")
	if err != nil || seed != "127.0.0.1:9092" || name != "INTERNAL" {
		t.Fatalf("got %q %q %v", seed, name, err)
	}
	_, _, err = consoleSeed([]broker.ClientListener{
		{Name: "SECURE", Protocol: "SASL_SSL", Addr: tcp("127.0.0.1", 9094)},
		{Name: "TLS", Protocol: "SSL", Addr: tcp("127.0.0.1", 9093)},
		{Name: "SASL", Protocol: "SASL_PLAINTEXT", Addr: tcp("127.0.0.1", 9095)},
	}, "")
	if err == nil || !strings.Contains(err.Error(), "no PLAINTEXT client listener") {
		t.Fatalf("secured listeners only: %v", err)
	}
	for addr, want := range map[string]bool{"localhost:9644": true, "127.0.0.1:9644": true, "[::1]:9644": true,
		"0.0.0.0:9644": false, ":9644": false, "gregor:9644": false} {
		if got := loopbackListener(addr); got != want {
			t.Errorf("loopbackListener(%s) = %v", addr, got)
		}
	}
}

// TestConsoleUnderACLs: with the StandardAuthorizer on, the console is
// User:ANONYMOUS of the PLAINTEXT listener like any client there: it
// lists only the topic ACLs let ANONYMOUS describe, reads it, and its
// produce is refused with the broker's authorization error.
func TestConsoleUnderACLs(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 4)
	plainPort, saslPort, ctrlPort, webPort := ports[0], ports[1], ports[2], ports[3]
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[3]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,SASL_PLAINTEXT://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[4]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
http.listener=127.0.0.1:%[5]d
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" user_admin="admin-secret";
`, plainPort, saslPort, ctrlPort, filepath.Join(dir, "data"), webPort)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--config", propsFile)
	web := fmt.Sprintf("127.0.0.1:%d", webPort)

	admin, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", saslPort)),
		kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{"open", "secret"} {
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("readable")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	acl := kadm.NewACLs().Allow("User:ANONYMOUS").Topics("open").Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body := httpGet(t, web, "/api/topics")
		if strings.Contains(body, `"name":"open"`) && !strings.Contains(body, `"name":"secret"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/topics as ANONYMOUS: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := httpGet(t, web, "/api/topics/open/records?partition=0"); code != 200 || !strings.Contains(body, `"text":"readable"`) {
		t.Fatalf("records of open: %d %s", code, body)
	}
	resp, err := http.Post("http://"+web+"/api/topics/open/records", "application/json", strings.NewReader(`{"value":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Kafka's answer to a producer with WRITE on no topic: its
	// InitProducerId needs IDEMPOTENT_WRITE, which WRITE would imply.
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("produce without WRITE: %d %s", resp.StatusCode, b)
	}
	ends, err := adm.ListEndOffsets(ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("open", 0); o.Offset != 1 {
		t.Fatalf("open's end offset %d after a refused produce, want 1", o.Offset)
	}
}

// TestConsoleContainerEnv: the image's variables for the console's keys,
// as its help names them.
func TestConsoleContainerEnv(t *testing.T) {
	got := envProperties(map[string]string{"KAFKA_HTTP_CONSOLE_ENABLE": "false", "KAFKA_HTTP_CONSOLE_READ_ONLY": "true"})
	if got["http.console.enable"] != "false" || got["http.console.read.only"] != "true" || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
}

// TestConsoleSASLCredentials: on a node whose only client listener is
// SASL_PLAINTEXT, the console connects with http.console.sasl.* and is
// authorized as that user: it lists the topic ACLs let User:console
// describe and not the other. Without the password, gregor serve refuses
// to start, naming the key.
func TestConsoleSASLCredentials(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	saslPort, ctrlPort, webPort := ports[0], ports[1], ports[2]
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=SASL_PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_PLAINTEXT
sasl.mechanism.inter.broker.protocol=PLAIN
log.dirs=%[3]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
http.listener=127.0.0.1:%[4]d
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" user_admin="admin-secret" user_console="console-secret";
http.console.listener=SASL_PLAINTEXT
http.console.sasl.mechanism=PLAIN
http.console.sasl.username=console
`, saslPort, ctrlPort, filepath.Join(dir, "data"), webPort)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := launchServe(t, "--config", propsFile).waitExit(20 * time.Second)
	if code == 0 || !strings.Contains(out, "http.console.sasl.password") {
		t.Fatalf("serve without the console's password: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(propsFile, []byte(props+"http.console.sasl.password=console-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--config", propsFile)
	web := fmt.Sprintf("127.0.0.1:%d", webPort)
	if !strings.Contains(p.log(), `msg="web console on" listener=SASL_PLAINTEXT`) {
		t.Fatalf("console not on through SASL_PLAINTEXT:\n%s", p.log())
	}

	admin, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", saslPort)),
		kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{"console-visible", "hidden"} {
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	acl := kadm.NewACLs().Allow("User:console").Topics("console-visible").Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body := httpGet(t, web, "/api/topics")
		if strings.Contains(body, `"name":"console-visible"`) && !strings.Contains(body, `"name":"hidden"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/topics as User:console: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleThreeNodes: the console of one node of three shows the whole
// cluster: the three brokers and the three voters of the quorum, a
// topic's partitions led by the other nodes with their end offsets, and
// groups whose coordinators are elsewhere.
func TestConsoleThreeNodes(t *testing.T) {
	nodes := startThreeNodes(t, "http.listener=127.0.0.1:0")
	web := httpAddr(t, nodes[0])
	getJSON := func(path string, into any) {
		t.Helper()
		code, body := httpGet(t, web, path)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), into); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	poll := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("console never showed %s", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	var cluster struct {
		Brokers []struct {
			NodeID int32 `json:"node_id"`
		} `json:"brokers"`
		Quorum struct {
			LeaderID int32 `json:"leader_id"`
			Replicas []struct {
				NodeID int32  `json:"node_id"`
				Role   string `json:"role"`
			} `json:"replicas"`
		} `json:"quorum"`
	}
	poll("three brokers and three voters", func() bool {
		getJSON("/api/cluster", &cluster)
		voters := 0
		for _, r := range cluster.Quorum.Replicas {
			if r.Role == "Leader" || r.Role == "Follower" {
				voters++
			}
		}
		return len(cluster.Brokers) == 3 && voters == 3 && cluster.Quorum.LeaderID >= 1
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].addr, nodes[1].addr, nodes[2].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 6, 3, nil, "spread"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// p+1 records in partition p.
	var recs []*kgo.Record
	for p := range int32(6) {
		for range p + 1 {
			recs = append(recs, &kgo.Record{Topic: "spread", Partition: p, Value: []byte("v")})
		}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var topic struct {
		Partitions []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			ISR       []int32 `json:"isr"`
			EndOffset int64   `json:"end_offset"`
		} `json:"partition_list"`
	}
	poll("the partitions' leaders and end offsets", func() bool {
		getJSON("/api/topics/spread", &topic)
		if len(topic.Partitions) != 6 {
			return false
		}
		for _, p := range topic.Partitions {
			if p.EndOffset != int64(p.Partition+1) || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	elsewhere := 0
	for _, p := range topic.Partitions {
		if p.Leader != 1 {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Fatalf("every partition led by node 1: %+v", topic.Partitions)
	}

	// Groups whose offsets land on __consumer_offsets partitions led by
	// every node.
	var names []string
	for i := range 12 {
		g := fmt.Sprintf("spread-group-%d", i)
		names = append(names, g)
		off := kadm.Offsets{}
		off.Add(kadm.Offset{Topic: "spread", Partition: 0, At: 1, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, g, off); err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}
	var groups struct {
		Groups []struct {
			Group       string `json:"group"`
			Coordinator int32  `json:"coordinator"`
		} `json:"groups"`
	}
	coordinators := map[int32]bool{}
	poll("the groups and their coordinators", func() bool {
		getJSON("/api/groups", &groups)
		found := 0
		clear(coordinators)
		for _, g := range groups.Groups {
			if strings.HasPrefix(g.Group, "spread-group-") {
				found++
				coordinators[g.Coordinator] = true
			}
		}
		return found == len(names)
	})
	if len(coordinators) < 2 {
		t.Fatalf("12 groups all coordinated by %v", coordinators)
	}
	t.Logf("partitions led elsewhere: %d of 6; group coordinators %v", elsewhere, coordinators)
}
