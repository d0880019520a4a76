package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCertMTLS: the files `gregor cert` writes, used through the
// server.properties lines it prints, make an SSL listener requiring
// client certificates; a franz-go client with the generated client
// certificate produces and consumes over mutual TLS as User:CN=alice (a
// super user), one with another generated certificate is that
// certificate's principal (denied by the ACLs), and clients without a
// certificate or with one from another CA are refused.
func TestCertMTLS(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runCert([]string{"--dir", dir, "--client", "alice,bob", "--days", "2"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	ca1, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	// A second run adds to the same CA.
	if err := runCert([]string{"--dir", dir, "--name", "node2", "--host", "node2.example.com"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if ca2, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(ca1, ca2) {
		t.Fatal("a second run replaced the CA")
	}
	node2 := loadCert(t, filepath.Join(dir, "node2.crt"))
	if err := node2.VerifyHostname("node2.example.com"); err != nil {
		t.Errorf("node2's certificate: %v", err)
	}
	if err := node2.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("node2's certificate: %v", err)
	}
	if d := node2.NotAfter.Sub(node2.NotBefore); d < 365*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("node2 valid from %v to %v, want about a year", node2.NotBefore, node2.NotAfter)
	}
	alice := loadCert(t, filepath.Join(dir, "alice.crt"))
	if got := alice.NotAfter.Sub(alice.NotBefore); got > 2*24*time.Hour+time.Hour {
		t.Errorf("--days 2 made a certificate valid for %v", got)
	}

	// The server side is the printed lines as they are, up to the blank
	// line before the client's.
	serverLines, _, _ := strings.Cut(out.String(), "\n\n")
	other := t.TempDir()
	if err := runCert([]string{"--dir", other, "--client", "mallory"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	plainPort, sslPort, ctrlPort := freePort(t), freePort(t), freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[3]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,SSL://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT
log.dirs=%[4]s
offsets.topic.replication.factor=1
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:CN=alice
%[5]s
ssl.client.auth=required
`, plainPort, sslPort, ctrlPort, filepath.Join(dir, "data"), serverLines)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--config", propsFile)
	sslAddr := fmt.Sprintf("127.0.0.1:%d", sslPort)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca1)
	client := func(certDir, name string, opts ...kgo.Opt) *kgo.Client {
		cfg := &tls.Config{RootCAs: pool}
		if name != "" {
			c, err := tls.LoadX509KeyPair(filepath.Join(certDir, name+".crt"), filepath.Join(certDir, name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(cfg),
			kgo.RetryTimeout(5 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := testCtx(t, 60*time.Second)
	a := client(dir, "alice", kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("mtls"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := range 3 {
		if err := a.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: fmt.Appendf(nil, "m%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce over mTLS as alice: %v", err)
		}
	}
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		a.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "m0,m1,m2" {
		t.Fatalf("consumed %v over mTLS", got)
	}

	// The client lines it printed, as they are, are a --command-config
	// for the gregor CLI over mTLS.
	_, clientLines, _ := strings.Cut(out.String(), "\n\n")
	cc := filepath.Join(dir, "alice.properties")
	if err := os.WriteFile(cc, []byte(clientLines), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustCLI(t, sslAddr, "", "topic", "list", "--command-config", cc); !strings.Contains(got, "mtls") {
		t.Fatalf("topic list with the printed client properties:\n%s", got)
	}

	// librdkafka (kcat) with the generated PEM files, when installed.
	if _, err := exec.LookPath("kcat"); err == nil {
		kcat := exec.Command("kcat", "-b", sslAddr, "-X", "security.protocol=SSL",
			"-X", "ssl.ca.location="+filepath.Join(dir, "ca.crt"),
			"-X", "ssl.certificate.location="+filepath.Join(dir, "alice.crt"),
			"-X", "ssl.key.location="+filepath.Join(dir, "alice.key"),
			"-C", "-t", "mtls", "-o", "beginning", "-c", "3", "-e", "-f", `%s\n`)
		if out, err := kcat.CombinedOutput(); err != nil || string(out) != "m0\nm1\nm2\n" {
			t.Fatalf("kcat over mTLS: %v\n%s", err, out)
		}
	} else {
		t.Log("no kcat: librdkafka over mTLS not checked")
	}

	b := client(dir, "bob")
	if err := b.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob (User:CN=bob, no ACL) produced: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	for _, c := range []struct {
		what string
		cl   *kgo.Client
	}{
		{"no client certificate", client("", "")},
		{"a certificate of another CA", client(other, "mallory")},
	} {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.cl.Ping(pctx)
		cancel()
		if err == nil {
			t.Errorf("a client with %s was served", c.what)
		}
	}
}

func loadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(path, strings.TrimSuffix(path, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}
