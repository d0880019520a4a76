package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestServeRefusesUnservedSecurityProtocol: the inter-broker listener
// mapped to SASL_PLAINTEXT with Kafka's default inter-broker mechanism,
// GSSAPI, which gregor has no client for, stops `gregor serve` before it
// listens or formats its data dir, naming the property.
func TestServeRefusesUnservedSecurityProtocol(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := launchServe(t, "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"--override", "sasl.enabled.mechanisms=PLAIN",
		"--override", `listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="b" user_b="b";`)
	code, out := p.waitExit(60 * time.Second)
	if code == 0 {
		t.Fatalf("gregor with a SASL_PLAINTEXT inter-broker listener exited 0:\n%s", out)
	}
	if strings.Contains(out, "gregor started") {
		t.Fatalf("gregor started before refusing:\n%s", out)
	}
	if !strings.Contains(out, "sasl.mechanism.inter.broker.protocol") || !strings.Contains(out, "GSSAPI") {
		t.Fatalf("refusal does not name sasl.mechanism.inter.broker.protocol:\n%s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("refused start created its data dir (%v)", err)
	}
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// keytool runs Java's keytool, so the stores are the ones a Kafka
// operator has.
func keytool(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("keytool", args...).CombinedOutput(); err != nil {
		t.Fatalf("keytool %v: %v\n%s", args, err, out)
	}
}

// TestServeSASLSSL runs `gregor serve` with a SASL_SSL listener (PLAIN)
// and an SSL listener, both from a PKCS12 key store made by keytool, and
// talks to it with franz-go and, when installed, kcat (librdkafka).
func TestServeSASLSSL(t *testing.T) {
	if _, err := exec.LookPath("keytool"); err != nil {
		t.Skip("no keytool")
	}
	dir := t.TempDir()
	ks := filepath.Join(dir, "broker.p12")
	keytool(t, "-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=broker",
		"-ext", "SAN=ip:127.0.0.1", "-validity", "2", "-storetype", "PKCS12", "-keystore", ks,
		"-storepass", "storepass", "-keypass", "storepass")
	certOut, err := exec.Command("keytool", "-exportcert", "-rfc", "-alias", "broker", "-keystore", ks, "-storepass", "storepass").Output()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "broker.crt")
	if err := os.WriteFile(caFile, certOut, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certOut)
	if b == nil {
		t.Fatalf("keytool exported %q", certOut)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}

	plainPort, saslPort, sslPort, ctrlPort := freePort(t), freePort(t), freePort(t), freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[4]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,SASL_SSL://127.0.0.1:%[2]d,SSL://127.0.0.1:%[3]d,CONTROLLER://127.0.0.1:%[4]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
log.dirs=%[5]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
ssl.keystore.type=PKCS12
ssl.keystore.location=%[6]s
ssl.keystore.password=storepass
ssl.key.password=storepass
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" \
    user_admin="admin-secret" \
    user_alice="alice-secret";
`, plainPort, saslPort, sslPort, ctrlPort, filepath.Join(dir, "data"), ks)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--config", propsFile)
	if strings.Contains(p.log(), "ignoring unknown property") {
		t.Fatalf("a security property was not recognised:\n%s", p.log())
	}
	saslAddr := fmt.Sprintf("127.0.0.1:%d", saslPort)
	sslAddr := fmt.Sprintf("127.0.0.1:%d", sslPort)

	alice := func(pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(plain.Auth{User: "alice", Pass: pass}.AsMechanism()),
			kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(5*time.Second),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ConsumeTopics("secure"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := alice("alice-secret")
	ctx := testCtx(t, 30*time.Second)
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: fmt.Appendf(nil, "m%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce over SASL_SSL: %v", err)
		}
	}
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "m0,m1,m2" {
		t.Fatalf("consumed %v over SASL_SSL", got)
	}

	bad := alice("wrong")
	mctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password over SASL_SSL: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// The SSL listener serves the same store, without SASL.
	sslCl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(tlsCfg),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ConsumeTopics("secure"))
	if err != nil {
		t.Fatal(err)
	}
	defer sslCl.Close()
	got = nil
	for len(got) < 3 && ctx.Err() == nil {
		sslCl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 3 {
		t.Fatalf("consumed %v over SSL", got)
	}

	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("no kcat: librdkafka over SASL_SSL not checked")
		return
	}
	kcat := func(stdin string, args ...string) (string, error) {
		args = append([]string{"-b", saslAddr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=admin", "-X", "sasl.password=admin-secret", "-X", "ssl.ca.location=" + caFile}, args...)
		cmd := exec.Command("kcat", args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := kcat("k1:v1\nk2:v2\n", "-P", "-t", "kcat-secure", "-K:"); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v\n%s", err, out)
	}
	out, err := kcat("", "-C", "-t", "kcat-secure", "-o", "beginning", "-c", "2", "-e", "-f", `%k=%s\n`)
	if err != nil || out != "k1=v1\nk2=v2\n" {
		t.Fatalf("kcat consume over SASL_SSL: %v\n%q", err, out)
	}
}

// TestServeRefusesJKS: Kafka's default store type, JKS, stops start-up
// with the command that converts the store.
func TestServeRefusesJKS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := launchServe(t, "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"--override", "ssl.keystore.location=/etc/kafka/broker.jks",
		"--override", "ssl.keystore.password=secret")
	code, out := p.waitExit(60 * time.Second)
	if code == 0 || strings.Contains(out, "gregor started") {
		t.Fatalf("gregor started with a JKS key store:\n%s", out)
	}
	if !strings.Contains(out, "ssl.keystore.type") || !strings.Contains(out, "JKS stores are not supported") ||
		!strings.Contains(out, "keytool -importkeystore") {
		t.Fatalf("refusal does not explain the JKS store:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Fatalf("the refusal shows the password:\n%s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("refused start created its data dir (%v)", err)
	}
}
