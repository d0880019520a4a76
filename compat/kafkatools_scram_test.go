package compat

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaToolsScram: Kafka's own kafka-configs creates, describes and
// deletes a user's SCRAM-SHA-256 credential on Gregor, and Kafka's Java
// client (kafka-topics' admin client) authenticates with it on a
// SASL_PLAINTEXT listener, is refused with Kafka's message for a wrong
// password, and again once the credential is deleted.
//
// KAFKA_SCRAM_BOOTSTRAP runs the credential half against another broker's
// PLAINTEXT listener (the Kafka reference), with KAFKA_SCRAM_SASL_BOOTSTRAP
// its SASL_PLAINTEXT listener enabling SCRAM-SHA-256 when it has one.
func TestKafkaToolsScram(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs; not under -short")
	}
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("Kafka's tools need %s on PATH: %v", bin, err)
		}
	}
	k := newKafkaTools(t)
	addr, saslAddr := os.Getenv("KAFKA_SCRAM_BOOTSTRAP"), os.Getenv("KAFKA_SCRAM_SASL_BOOTSTRAP")
	if addr == "" {
		ports := freePorts(t, 3)
		g := startGregor(t, map[string]string{
			"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1], ports[2]),
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
			"sasl.enabled.mechanisms":        "SCRAM-SHA-256",
		})
		addr, saslAddr = g.Addr, fmt.Sprintf("127.0.0.1:%d", ports[1])
	}
	k.useClassArchive(t, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	user := fmt.Sprintf("alice-%d", os.Getpid()) // a reference may be reused between runs

	out := k.must(t, "", classConfigs, "--bootstrap-server", addr, "--alter",
		"--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", user)
	if got, want := strings.TrimSpace(out), "Completed updating config for user "+user+"."; got != want {
		t.Errorf("kafka-configs --alter printed %q, want %q", got, want)
	}
	d, err := adm.DescribeUserSCRAMs(ktCtx(t), user)
	if err != nil {
		t.Fatal(err)
	}
	if ci := d[user].CredInfos; d[user].Err != nil || len(ci) != 1 || ci[0].Mechanism != kadm.ScramSha256 || ci[0].Iterations != 8192 {
		t.Fatalf("after kafka-configs --alter, %s's credentials are %+v", user, d[user])
	}
	// Kafka's tool refuses too few iterations itself; the broker's own
	// check is in broker/scram_test.go.
	r := k.run(t, "", classConfigs, "--bootstrap-server", addr, "--alter",
		"--add-config", "SCRAM-SHA-512=[iterations=1000,password=x]", "--entity-type", "users", "--entity-name", user)
	if r.err == nil || !strings.Contains(r.stderr, "Iterations 1000 is less than the minimum 4096") {
		t.Errorf("1000 iterations: %v\n%s", r.err, r.stderr)
	}

	t.Run("describe", func(t *testing.T) {
		// kafka-configs --describe of a user asks for its quotas first
		// (DescribeClientQuotas), then for its SCRAM credentials.
		r := k.run(t, "", classConfigs, "--bootstrap-server", addr, "--describe", "--entity-type", "users", "--entity-name", user)
		if r.err != nil {
			t.Fatalf("kafka-configs --describe: %v\n%s", r.err, r.stderr)
		}
		want := "SCRAM credential configs for user-principal '" + user + "' are SCRAM-SHA-256=iterations=8192"
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kafka-configs --describe printed\n%s\nwant a line %q", r.stdout, want)
		}
	})

	if saslAddr == "" {
		t.Log("no SASL_PLAINTEXT listener named (KAFKA_SCRAM_SASL_BOOTSTRAP): the Java client's authentication is not tried")
	} else {
		jaas := func(pass string) string {
			return k.writeFile(t, "scram-"+pass+".properties", "security.protocol=SASL_PLAINTEXT\n"+
				"sasl.mechanism=SCRAM-SHA-256\n"+
				`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+user+`" password="`+pass+`";`+"\n")
		}
		good, bad := jaas("alice-secret"), jaas("wrong")
		topic := "scram-java-" + user
		k.must(t, "", classTopics, "--bootstrap-server", saslAddr, "--command-config", good,
			"--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
		if out := k.must(t, "", classTopics, "--bootstrap-server", saslAddr, "--command-config", good, "--list"); !strings.Contains(out, topic) {
			t.Errorf("kafka-topics --list over SCRAM-SHA-256 printed %q, want %s among them", out, topic)
		}
		wantRefused := func(what, props string) {
			t.Helper()
			r := k.run(t, "", classTopics, "--bootstrap-server", saslAddr, "--command-config", props, "--list")
			const msg = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
			if r.err == nil || !strings.Contains(r.stderr, "SaslAuthenticationException") || !strings.Contains(r.stderr, msg) {
				t.Errorf("%s: kafka-topics --list: %v\nstdout:\n%s\nstderr:\n%s\nwant SaslAuthenticationException: %s", what, r.err, r.stdout, r.stderr, msg)
			}
		}
		wantRefused("wrong password", bad)

		out := k.must(t, "", classConfigs, "--bootstrap-server", addr, "--alter",
			"--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", user)
		if got, want := strings.TrimSpace(out), "Completed updating config for user "+user+"."; got != want {
			t.Errorf("kafka-configs --delete-config printed %q, want %q", got, want)
		}
		wantRefused("deleted credential", good)
	}
	if saslAddr == "" {
		k.must(t, "", classConfigs, "--bootstrap-server", addr, "--alter",
			"--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", user)
	}
	d, err = adm.DescribeUserSCRAMs(ktCtx(t), user)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(d[user].Err, kerr.ResourceNotFound) {
		t.Errorf("after --delete-config, %s's credentials are %+v, want RESOURCE_NOT_FOUND", user, d[user])
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
