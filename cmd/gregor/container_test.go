package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEnvProperties checks KafkaDockerWrapper's naming rules: prefix
// dropped, lower-cased, "_" read as ".", "__" as "_", "___" as "-", and
// the JVM's variables left out.
func TestEnvProperties(t *testing.T) {
	got := envProperties(map[string]string{
		"KAFKA_NODE_ID":                                "1",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":         "A:PLAINTEXT",
		"KAFKA_LISTENER_NAME_EXTERNAL_SSL_CLIENT_AUTH": "required",
		"KAFKA_SOME__UNDERSCORED_NAME":                 "u",
		"KAFKA_A___DASHED":                             "d",
		"KAFKA_HEAP_OPTS":                              "-Xmx1G",
		"CLUSTER_ID":                                   "x",
		"HOME":                                         "/root",
	})
	want := map[string]string{
		"node.id":                                "1",
		"listener.security.protocol.map":         "A:PLAINTEXT",
		"listener.name.external.ssl.client.auth": "required",
		"some_underscored.name":                  "u",
		"a-dashed":                               "d",
	}
	if len(got) != len(want) {
		t.Errorf("got %d properties %v, want %v", len(got), got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func testPaths(t *testing.T) containerPaths {
	dir := t.TempDir()
	return containerPaths{
		mounted: filepath.Join(dir, "mnt", "server.properties"),
		secrets: filepath.Join(dir, "secrets"),
		final:   filepath.Join(dir, "config", "server.properties"),
		data:    filepath.Join(dir, "data"),
	}
}

// TestContainerConfig checks what the image derives as Kafka's does.
func TestContainerConfig(t *testing.T) {
	t.Run("nothing set: a single node for the host", func(t *testing.T) {
		p := testPaths(t)
		s, err := containerConfig([]string{"HOME=/root"}, p)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"--data-dir", p.data, "--listen", "0.0.0.0:9092", "--override", "advertised.listeners=PLAINTEXT://localhost:9092", "--override", "http.listener=0.0.0.0:9644"}
		if strings.Join(s.serveArgs, " ") != strings.Join(want, " ") || s.clusterID != "" {
			t.Errorf("got %v (cluster %q), want %v", s.serveArgs, s.clusterID, want)
		}
	})
	t.Run("combined node: listeners derived, cluster id defaulted", func(t *testing.T) {
		p := testPaths(t)
		s, err := containerConfig([]string{
			"KAFKA_NODE_ID=1", "KAFKA_PROCESS_ROLES=broker,controller",
			"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka-1:19092,PLAINTEXT_HOST://localhost:29092",
			"KAFKA_JMX_PORT=9101",
		}, p)
		if err != nil {
			t.Fatal(err)
		}
		if s.clusterID != defaultContainerClusterID {
			t.Errorf("cluster id %q, want Kafka image's default", s.clusterID)
		}
		if len(s.warnings) != 1 || !strings.Contains(s.warnings[0], "KAFKA_JMX_PORT") {
			t.Errorf("warnings %v, want one naming KAFKA_JMX_PORT", s.warnings)
		}
		props := readProps(t, p.final)
		if got := props["listeners"]; got != "PLAINTEXT://0.0.0.0:19092,PLAINTEXT_HOST://0.0.0.0:29092" {
			t.Errorf("listeners %q", got)
		}
		if props["log.dirs"] != p.data || props["node.id"] != "1" {
			t.Errorf("properties %v", props)
		}
		if strings.Join(s.serveArgs, " ") != "--config "+p.final {
			t.Errorf("serve args %v", s.serveArgs)
		}
	})
	t.Run("mounted file is the base", func(t *testing.T) {
		p := testPaths(t)
		os.MkdirAll(filepath.Dir(p.mounted), 0o755)
		os.WriteFile(p.mounted, []byte("num.partitions=7\nnode.id=9\n"), 0o644)
		if _, err := containerConfig([]string{"KAFKA_NODE_ID=2"}, p); err != nil {
			t.Fatal(err)
		}
		props := readProps(t, p.final)
		if props["num.partitions"] != "7" || props["node.id"] != "2" {
			t.Errorf("properties %v: want the file's num.partitions and the variable's node.id", props)
		}
	})
	t.Run("SSL keystore from the secrets dir", func(t *testing.T) {
		p := testPaths(t)
		os.MkdirAll(p.secrets, 0o755)
		os.WriteFile(filepath.Join(p.secrets, "ks_creds"), []byte("ks-pass\n"), 0o600)
		os.WriteFile(filepath.Join(p.secrets, "key_creds"), []byte("key-pass\n"), 0o600)
		_, err := containerConfig([]string{
			"KAFKA_ADVERTISED_LISTENERS=SSL://localhost:9093",
			"KAFKA_SSL_KEYSTORE_FILENAME=node.p12",
			"KAFKA_SSL_KEYSTORE_CREDENTIALS=ks_creds",
			"KAFKA_SSL_KEY_CREDENTIALS=key_creds",
		}, p)
		if err != nil {
			t.Fatal(err)
		}
		props := readProps(t, p.final)
		if props["ssl.keystore.location"] != filepath.Join(p.secrets, "node.p12") ||
			props["ssl.keystore.password"] != "ks-pass" || props["ssl.key.password"] != "key-pass" {
			t.Errorf("properties %v", props)
		}
	})
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"JAAS file in KAFKA_OPTS", []string{"KAFKA_NODE_ID=1", "KAFKA_OPTS=-Djava.security.auth.login.config=/etc/kafka/jaas.conf"}, "sasl.jaas.config"},
		{"controller advertising", []string{"KAFKA_PROCESS_ROLES=controller", "KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://c:9093"}, "not supported on a KRaft controller"},
		{"SSL without keystore", []string{"KAFKA_ADVERTISED_LISTENERS=SSL://localhost:9093"}, "KAFKA_SSL_KEYSTORE_FILENAME must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := containerConfig(tc.env, testPaths(t)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestContainerKafkaCompose runs three `gregor container` processes with
// the environment of Kafka's own example compose file for a combined
// three-node cluster (docker/examples/.../cluster/combined/plaintext),
// hosts and ports changed to loopback ones: they format themselves with
// CLUSTER_ID, form one cluster, and serve a produce and a consume.
func TestContainerKafkaCompose(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	internal, ctrl, host := freePorts(t, 3), freePorts(t, 3), freePorts(t, 3)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	const clusterID = "4L6g3nShT-eMCtK--X86sw"
	var nodes []*serveProcess
	var finals []string
	for i := range 3 {
		p := testPaths(t)
		finals = append(finals, p.final)
		env := []string{
			fmt.Sprintf("KAFKA_NODE_ID=%d", i+1),
			"KAFKA_PROCESS_ROLES=broker,controller",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
			"KAFKA_CONTROLLER_QUORUM_VOTERS=" + strings.Join(voters, ","),
			fmt.Sprintf("KAFKA_LISTENERS=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d,PLAINTEXT_HOST://127.0.0.1:%d", internal[i], ctrl[i], host[i]),
			"KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT",
			fmt.Sprintf("KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:%d,PLAINTEXT_HOST://127.0.0.1:%d", internal[i], host[i]),
			"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
			"CLUSTER_ID=" + clusterID,
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1",
		}
		nodes = append(nodes, launchGregor(t, env, "container",
			"--mounted-config", p.mounted, "--secrets-dir", p.secrets, "--final-config", p.final, "--data-dir", p.data))
	}
	for i, n := range nodes {
		select {
		case n.addr = <-n.started:
		case <-n.done:
			t.Fatalf("node %d exited:\n%s", i+1, n.log())
		case <-time.After(90 * time.Second):
			t.Fatalf("node %d did not start:\n%s", i+1, n.log())
		}
	}
	if got := readProps(t, finals[0])["listener.security.protocol.map"]; got != "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT" {
		t.Errorf("node 1's listener.security.protocol.map = %q", got)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", host[0])
	var info struct {
		ClusterID string `json:"cluster_id"`
		Brokers   []struct {
			ID int32 `json:"id"`
		} `json:"brokers"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cliJSON(t, addr, &info, "cluster", "info")
		if len(info.Brokers) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if info.ClusterID != clusterID || len(info.Brokers) != 3 {
		t.Fatalf("cluster info: cluster %q with %d brokers, want %q with 3", info.ClusterID, len(info.Brokers), clusterID)
	}
	produceStrings(t, addr, "compose", 0, 20)
	got := consumeStrings(t, fmt.Sprintf("127.0.0.1:%d", host[2]), "compose", 20)
	if len(got) != 20 {
		t.Fatalf("consumed %d records, want 20", len(got))
	}
	// The image's HEALTHCHECK: healthy while node 2 serves, not once it
	// is gone.
	health := []string{"container-health", "--final-config", finals[1], "--timeout", "3s"}
	if out := mustCLI(t, "", "", health...); !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d answered", internal[1])) {
		t.Errorf("container-health: %s", out)
	}
	nodes[1].kill()
	if r := runCLI(t, "", "", health...); r.code == 0 {
		t.Errorf("container-health of a killed node: exit 0: %s", r.out)
	}
}

// TestContainerHealthUnconfigured: with no final config (the container
// ran with no variables) the check reads the node gregor container runs
// then; it used to build a config gregor refuses (0.0.0.0 advertised), so
// the image's HEALTHCHECK failed for `docker run` without variables.
// Whether a node answers on localhost:9092 here does not matter: what
// must not fail is the configuration.
func TestContainerHealthUnconfigured(t *testing.T) {
	dir := t.TempDir()
	paths := containerPaths{final: filepath.Join(dir, "server.properties"), data: filepath.Join(dir, "data")}
	addr, err := containerHealth(paths, 200*time.Millisecond)
	if addr != "127.0.0.1:9092" {
		t.Errorf("container-health checked %q (err %v), want 127.0.0.1:9092", addr, err)
	}
	if err != nil && strings.Contains(err.Error(), "Invalid value") {
		t.Errorf("container-health refused the unconfigured container's config: %v", err)
	}
}
