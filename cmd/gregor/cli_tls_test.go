package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI writes a CA, a broker certificate for 127.0.0.1 and a client
// certificate (CN=ops) as PEM files in dir: ca.pem, and broker.pem and
// client.pem each holding the key and then the certificate, as Kafka's
// PEM key stores do.
func testPKI(t *testing.T, dir string) (ca, broker, client string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, tmpl *x509.Certificate) string {
		k := newKey()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, &pem.Block{Type: "PRIVATE KEY", Bytes: pk}, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	ca = write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	broker = leaf("broker.pem", 2, &x509.Certificate{Subject: pkix.Name{CommonName: "broker"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	client = leaf("client.pem", 3, &x509.Certificate{Subject: pkix.Name{CommonName: "ops"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return ca, broker, client
}

// TestCLITLS: the CLI over an SSL listener that requires a client
// certificate (--tls-cert/--tls-key, and the same from --command-config
// with PEM stores) and over SASL_SSL (--tls-ca with PLAIN), against a
// gregor whose authorizer makes the certificate's principal a super user.
func TestCLITLS(t *testing.T) {
	dir := t.TempDir()
	ca, broker, client := testPKI(t, dir)
	plainPort, sslPort, saslPort, ctrlPort := freePort(t), freePort(t), freePort(t), freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[4]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,SSL://127.0.0.1:%[2]d,SASL_SSL://127.0.0.1:%[3]d,CONTROLLER://127.0.0.1:%[4]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
log.dirs=%[5]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:CN=ops;User:ANONYMOUS
ssl.keystore.type=PEM
ssl.keystore.location=%[6]s
listener.name.ssl.ssl.client.auth=required
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.truststore.location=%[7]s
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_admin="admin-secret";
`, plainPort, sslPort, saslPort, ctrlPort, filepath.Join(dir, "data"), broker, ca)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--config", propsFile)
	sslAddr, saslAddr := fmt.Sprintf("127.0.0.1:%d", sslPort), fmt.Sprintf("127.0.0.1:%d", saslPort)

	// mTLS: the client certificate's principal User:CN=ops is a super user.
	mustCLI(t, sslAddr, "", "topic", "create", "tls1", "--tls-ca", ca, "--tls-cert", client, "--tls-key", client)
	// Without a client certificate the handshake fails.
	if r := runCLI(t, sslAddr, "", "topic", "list", "--tls-ca", ca, "--timeout", "10s"); r.code == 0 || !strings.Contains(r.err, "certificate required") {
		t.Fatalf("SSL without a client certificate: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// The same with a Kafka client properties file and PEM stores.
	cc := filepath.Join(dir, "ssl.properties")
	os.WriteFile(cc, []byte(fmt.Sprintf("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\nssl.keystore.type=PEM\nssl.keystore.location=%s\n", ca, client)), 0o600)
	if out := mustCLI(t, sslAddr, "", "topic", "list", "--command-config", cc); !strings.Contains(out, "tls1") {
		t.Fatalf("topic list with --command-config over SSL:\n%s", out)
	}

	// SASL_SSL: PLAIN over TLS, the broker checked against --tls-ca.
	sasl := []string{"--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "admin-secret"}
	if out := mustCLI(t, saslAddr, "", append([]string{"topic", "list", "--tls-ca", ca}, sasl...)...); !strings.Contains(out, "tls1") {
		t.Fatalf("topic list over SASL_SSL:\n%s", out)
	}
	// Without the CA the broker's certificate is unknown...
	if r := runCLI(t, saslAddr, "", append([]string{"topic", "list", "--tls", "--timeout", "10s"}, sasl...)...); r.code == 0 || !strings.Contains(r.err, "certificate signed by unknown authority") {
		t.Fatalf("SASL_SSL without the CA: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// ...unless verification is off.
	mustCLI(t, saslAddr, "", append([]string{"topic", "list", "--tls-insecure-skip-verify"}, sasl...)...)
	saslCC := filepath.Join(dir, "sasl.properties")
	os.WriteFile(saslCC, []byte(fmt.Sprintf(`security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";
ssl.truststore.type=PEM
ssl.truststore.location=%s
`, ca)), 0o600)
	mustCLI(t, saslAddr, "", "topic", "list", "--command-config", saslCC)
}
