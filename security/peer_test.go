package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// testCA makes a CA and, for each name, a certificate it signs for that
// DNS name, written as PEM files in dir: ca.crt, and <name>.pem (key and
// certificate).
func testCA(t *testing.T, dir string, names ...string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	for i, n := range names {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: n}, DNSNames: []string{n},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalPKCS8PrivateKey(key)
		b := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		os.WriteFile(filepath.Join(dir, n+".pem"), b, 0o600)
	}
}

// TestClientTLS: the client side of a TLS peer listener verifies the
// peer against the trust store, checks its host name only with
// ssl.endpoint.identification.algorithm=https, and presents the key
// store's certificate to a server requiring one.
func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	testCA(t, dir, "peer.example", "client.example")
	other := t.TempDir()
	testCA(t, other)
	server := listenerForTest(dir, "peer.example")
	server.SSL.ClientAuth = "required"
	srvCfg, err := ServerTLS(server)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte{1})
			}()
		}
	}()
	dial := func(p config.PeerSecurity) error {
		cfg, err := ClientTLS(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "127.0.0.1" // as kgo sets it from the address dialled
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		var b [1]byte
		_, err = c.Read(b[:]) // a refused client certificate shows here under TLS 1.3
		return err
	}
	peer := func(trust, keystore string, verify bool) config.PeerSecurity {
		p := config.PeerSecurity{Listener: "INTERNAL", Protocol: "SSL", VerifyHostname: verify, SSL: config.SSLSettings{
			TruststoreType: config.StoreTypePEM, TruststoreLocation: filepath.Join(trust, "ca.crt"),
			KeystoreType: config.StoreTypePEM, EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, Protocol: "TLSv1.3"}}
		if keystore != "" {
			p.SSL.KeystoreLocation = filepath.Join(dir, keystore+".pem")
		}
		return p
	}
	if err := dial(peer(dir, "client.example", false)); err != nil {
		t.Errorf("trusted peer, no host name check, client certificate: %v", err)
	}
	if err := dial(peer(dir, "client.example", true)); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("host name checked against a certificate for peer.example: %v", err)
	}
	if err := dial(peer(other, "client.example", false)); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("peer signed by a CA not in the trust store: %v", err)
	}
	if err := dial(peer(dir, "", false)); err == nil {
		t.Error("no client certificate for a server requiring one was accepted")
	}
}

// listenerForTest is an SSL listener serving dir's name.pem.
func listenerForTest(dir, name string) config.ListenerSecurity {
	return config.ListenerSecurity{Listener: "INTERNAL", Protocol: "SSL", SSL: config.SSLSettings{
		KeystoreType: config.StoreTypePEM, KeystoreLocation: filepath.Join(dir, name+".pem"),
		TruststoreType: config.StoreTypePEM, TruststoreLocation: filepath.Join(dir, "ca.crt"),
		EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, Protocol: "TLSv1.3"}}
}

// TestPeerCredentials: the node's own SASL credentials are the username
// and password options of the mechanism's login module.
func TestPeerCredentials(t *testing.T) {
	const key = "listener.name.internal.plain.sasl.jaas.config"
	tests := []struct {
		mech, jaas, user, pass, err string
	}{
		{"PLAIN", `org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p" user_b="p";`, "b", "p", ""},
		{"SCRAM-SHA-512", `org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="p";`, "b", "p", ""},
		{"SCRAM-SHA-512", `org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p";`, "", "", "needs login module org.apache.kafka.common.security.scram.ScramLoginModule"},
		{"PLAIN", `org.apache.kafka.common.security.plain.PlainLoginModule required user_b="p";`, "", "", "username and password options"},
		{"PLAIN", `org.apache.kafka.common.security.plain.PlainLoginModule required username="b"`, "", "", "semi-colon"},
	}
	for _, tt := range tests {
		u, p, err := PeerCredentials(config.PeerSecurity{Listener: "INTERNAL", Mechanism: tt.mech, JAAS: tt.jaas, JAASKey: key})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), key) {
				t.Errorf("%s %s: %v, want an error naming %s with %q", tt.mech, tt.jaas, err, key, tt.err)
			}
			continue
		}
		if err != nil || u != tt.user || p != tt.pass {
			t.Errorf("%s %s: %q %q %v", tt.mech, tt.jaas, u, p, err)
		}
	}
}
