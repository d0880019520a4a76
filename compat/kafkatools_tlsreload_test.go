package compat

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkaToolsTLSReload: Kafka's kafka-configs renews an SSL
// listener's certificate on a running gregor, as operators do on Kafka:
// the key store file is rewritten and
// `--alter --entity-type brokers --entity-name 1 --add-config
// listener.name.ssl.ssl.keystore.location=<same path>` re-reads it; a
// new TLS connection then sees the new certificate's serial. A file that
// does not load is refused (the tool's InvalidRequestException) and the
// certificate stays.
func TestKafkaToolsTLSReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs; not under -short")
	}
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("Kafka's tools need %s on PATH: %v", bin, err)
		}
	}
	k := newKafkaTools(t)
	ca, caKey := reloadCert(t, nil, nil, "reload CA", 1)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	dir := t.TempDir()
	store := filepath.Join(dir, "broker.pem")
	writeStore := func(serial int64) {
		c, key := reloadCert(t, ca, caKey, "broker", serial)
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
		if err := os.WriteFile(store, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeStore(1001)
	ports := freePorts(t, 3)
	g := startGregor(t, map[string]string{
		"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1], ports[2]),
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          store,
	})
	sslAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	serial := func() int64 {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sslAddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 1001 {
		t.Fatalf("serial %d at start, want 1001", got)
	}
	alter := func() toolRun {
		return k.run(t, "", classConfigs, "--bootstrap-server", g.Addr, "--alter", "--entity-type", "brokers", "--entity-name", "1",
			"--add-config", "listener.name.ssl.ssl.keystore.location="+store)
	}
	writeStore(1002)
	if r := alter(); r.err != nil || !strings.Contains(r.stdout, "Completed updating config for broker 1.") {
		t.Fatalf("kafka-configs --alter: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if got := serial(); got != 1002 {
		t.Fatalf("serial %d after kafka-configs, want 1002", got)
	}
	if err := os.WriteFile(store, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := alter(); r.err == nil || !strings.Contains(r.stderr, "InvalidRequestException") {
		t.Fatalf("kafka-configs with a broken key store: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if got := serial(); got != 1002 {
		t.Fatalf("serial %d after a refused reload, want 1002", got)
	}
}

// reloadCert makes a CA (parent nil) or a server certificate for
// 127.0.0.1 signed by parent.
func reloadCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, serial int64) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}
