package broker

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/security"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gregor test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue signs a leaf certificate for subject: a server one for 127.0.0.1
// or a client one.
func (ca *testCA) issue(t testing.TB, subject pkix.Name, server bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func certPEM(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

func keyPEM(t testing.TB, k *ecdsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// clientTLS is a client configuration trusting ca, presenting cert when
// given.
func (ca *testCA) clientTLS(t testing.TB, cert *x509.Certificate, key *ecdsa.PrivateKey) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}}
	}
	return cfg
}

// serverLog collects the server's log lines.
type serverLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitLog waits for a log line containing all of parts.
func (l *serverLog) waitLog(t testing.TB, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(l.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", parts, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// secureServer is a server with the client listeners of props (all on
// 127.0.0.1:0), a PLAINTEXT inter-broker listener, and its log captured;
// its data is in a new directory unless props set log.dirs.
type secureServer struct {
	*Server
	log *serverLog
}

func startSecureServer(t testing.TB, props map[string]string, opts Options) *secureServer {
	t.Helper()
	all := config.DevProperties()
	all["listeners"] = "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
	all["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	for k, v := range props {
		all[k] = v
	}
	cfg, _, err := config.Parse(all)
	if err != nil {
		t.Fatal(err)
	}
	if props["log.dirs"] == "" {
		cfg.LogDirs = []string{t.TempDir()}
	}
	cfg.AdvertisedListeners = nil
	lc := &serverLog{}
	opts.Logger = slog.New(slog.NewTextHandler(lc, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &secureServer{Server: s, log: lc}
}

// addr is the bound address of the named client listener.
func (s *secureServer) addr(t testing.TB, name string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.clientListeners() {
		if l.Name == name {
			return s.listeners[i].Addr().String()
		}
	}
	t.Fatalf("no listener %s", name)
	return ""
}

// writeFile writes a file in a test directory and returns its path.
func writeFile(t testing.TB, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip produces a record through cl and reads it back.
func roundTrip(t testing.TB, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	value := []byte("secret payload " + topic)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.AddConsumeTopics(topic)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("consume: %v", fe.Err)
		}
		for _, r := range fs.Records() {
			if !bytes.Equal(r.Value, value) {
				t.Fatalf("consumed %q, want %q", r.Value, value)
			}
			return
		}
	}
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// pingErr is the error of a Metadata request through cl.
func pingErr(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// TestTLSListeners serves an SSL listener from a PEM key store file and a
// second one, with the listener prefix, from a PKCS12 store with a
// required client certificate mapped to its principal.
func TestTLSListeners(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	pemStore := writeFile(t, "broker.pem", certPEM(srvCert)+certPEM(ca.cert)+keyPEM(t, srvKey))
	p12, err := pkcs12.Modern2023.Encode(srvKey, srvCert, []*x509.Certificate{ca.cert}, "storepass")
	if err != nil {
		t.Fatal(err)
	}
	p12Store := writeFile(t, "broker.p12", string(p12))
	trust, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{ca.cert}, "trustpass")
	if err != nil {
		t.Fatal(err)
	}
	trustStore := writeFile(t, "trust.p12", string(trust))

	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          pemStore,
		// The MTLS listener overrides the store and asks for certificates.
		"listener.name.mtls.ssl.keystore.type":           "PKCS12",
		"listener.name.mtls.ssl.keystore.location":       p12Store,
		"listener.name.mtls.ssl.keystore.password":       "storepass",
		"listener.name.mtls.ssl.truststore.type":         "PKCS12",
		"listener.name.mtls.ssl.truststore.location":     trustStore,
		"listener.name.mtls.ssl.truststore.password":     "trustpass",
		"listener.name.mtls.ssl.client.auth":             "required",
		"listener.name.mtls.ssl.principal.mapping.rules": `RULE:^CN=([a-z]+),OU=(.*?),O=.*$/$1@$2/U,DEFAULT`,
	}, Options{})

	t.Run("one-way TLS", func(t *testing.T) {
		cl := newClient(t, s.addr(t, "SSL"), kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)))
		roundTrip(t, cl, "tls-topic")
		s.log.waitLog(t, "connection authenticated", "listener=SSL", "principal=User:ANONYMOUS")
		// A client speaking plaintext to the TLS listener gets nowhere.
		plainCl := newClient(t, s.addr(t, "SSL"))
		if err := pingErr(plainCl); err == nil {
			t.Fatal("a plaintext client was served on the SSL listener")
		}
	})

	t.Run("client certificate required", func(t *testing.T) {
		noCert := newClient(t, s.addr(t, "MTLS"), kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)))
		if err := pingErr(noCert); err == nil {
			t.Fatal("a client without a certificate was served with ssl.client.auth=required")
		}
		other := newTestCA(t)
		badCert, badKey := other.issue(t, pkix.Name{CommonName: "mallory"}, false)
		wrongCA := newClient(t, s.addr(t, "MTLS"), kgo.DialTLSConfig(ca.clientTLS(t, badCert, badKey)))
		if err := pingErr(wrongCA); err == nil {
			t.Fatal("a certificate from an untrusted CA was accepted")
		}

		cert, key := ca.issue(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme, Inc."}}, false)
		cl := newClient(t, s.addr(t, "MTLS"), kgo.DialTLSConfig(ca.clientTLS(t, cert, key)))
		roundTrip(t, cl, "mtls-topic")
		s.log.waitLog(t, "connection authenticated", "listener=MTLS", "principal=User:ALICE@ENG")

		// No rule but DEFAULT matches: the whole subject, RFC 2253.
		cert2, key2 := ca.issue(t, pkix.Name{CommonName: "svc-1", Country: []string{"NL"}}, false)
		cl2 := newClient(t, s.addr(t, "MTLS"), kgo.DialTLSConfig(ca.clientTLS(t, cert2, key2)))
		if err := pingErr(cl2); err != nil {
			t.Fatal(err)
		}
		s.log.waitLog(t, "connection authenticated", "listener=MTLS", `principal="User:CN=svc-1,C=NL"`)
	})

	t.Run("PLAINTEXT is anonymous and has no SASL", func(t *testing.T) {
		c := dialFrames(t, s.addr(t, "PLAINTEXT"))
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		resp := &kmsg.SASLHandshakeResponse{Version: 1}
		c.roundTrip(t, hs, resp)
		if resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
		}
	})
}

// roundTrip sends req and decodes the response into resp.
func (c *frameConn) roundTrip(t testing.TB, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	if err := c.send(req); err != nil {
		t.Fatal(err)
	}
	body, corr, err := c.frame(resp.IsFlexible() && req.Key() != 18)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if corr != c.corr {
		t.Fatalf("correlation id %d, want %d", corr, c.corr)
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// expectClosed checks the server closed the connection without sending
// anything more.
func (c *frameConn) expectClosed(t testing.TB) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := c.r.Read(b[:])
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open (read %d bytes, err %v)", n, err)
	}
}

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";`

// memoryScram is a SCRAM credential store in memory.
type memoryScram map[string]security.ScramCredential

func (m memoryScram) ScramCredential(mechanism, user string) (security.ScramCredential, bool, error) {
	c, ok := m[mechanism+"/"+user]
	return c, ok, nil
}

func saslServer(t testing.TB) (*secureServer, *testCA) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	store := memoryScram{}
	for _, m := range []string{config.MechanismScramSHA256, config.MechanismScramSHA512} {
		c, err := security.NewScramCredential(m, "bob-secret", nil, 4096)
		if err != nil {
			t.Fatal(err)
		}
		store[m+"/bob"] = c
	}
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"listener.name.sasl_ssl.plain.sasl.jaas.config":       plainJAAS,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":      "PLAIN",
		"ssl.keystore.type":                         "PEM",
		"ssl.keystore.certificate.chain":            certPEM(srvCert),
		"ssl.keystore.key":                          keyPEM(t, srvKey),
		"sasl.server.max.receive.size":              "4096",
		"connection.failed.authentication.delay.ms": "300",
	}, Options{ScramCredentials: store})
	return s, ca
}

func TestSASL(t *testing.T) {
	s, ca := saslServer(t)
	sp := s.addr(t, "SASL_PLAINTEXT")

	t.Run("PLAIN", func(t *testing.T) {
		cl := newClient(t, sp, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		roundTrip(t, cl, "sasl-plain")
		s.log.waitLog(t, "connection authenticated", "listener=SASL_PLAINTEXT", "principal=User:alice")

		bad := newClient(t, sp, kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
		err := pingErr(bad)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "Invalid username or password") {
			t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED: Invalid username or password", err)
		}
		unknown := newClient(t, sp, kgo.SASL(plain.Auth{User: "eve", Pass: "alice-secret"}.AsMechanism()))
		if err := pingErr(unknown); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("unknown user: %v", err)
		}
		// Without SASL at all, the first request (ApiVersions is allowed,
		// Metadata is not) closes the connection.
		none := newClient(t, sp)
		if err := pingErr(none); err == nil {
			t.Fatal("a client without SASL was served on a SASL listener")
		}
	})

	t.Run("SCRAM", func(t *testing.T) {
		for _, m := range []struct {
			name string
			mech func(scram.Auth) kgo.Opt
		}{
			{"SCRAM-SHA-256", func(a scram.Auth) kgo.Opt { return kgo.SASL(a.AsSha256Mechanism()) }},
			{"SCRAM-SHA-512", func(a scram.Auth) kgo.Opt { return kgo.SASL(a.AsSha512Mechanism()) }},
		} {
			cl := newClient(t, sp, m.mech(scram.Auth{User: "bob", Pass: "bob-secret"}))
			roundTrip(t, cl, "sasl-"+strings.ToLower(m.name))
			s.log.waitLog(t, "connection authenticated", "listener=SASL_PLAINTEXT", "principal=User:bob", "mechanism="+m.name)
			bad := newClient(t, sp, m.mech(scram.Auth{User: "bob", Pass: "nope"}))
			if err := pingErr(bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s wrong password: %v", m.name, err)
			}
			unknown := newClient(t, sp, m.mech(scram.Auth{User: "alice", Pass: "alice-secret"}))
			if err := pingErr(unknown); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s unknown user: %v", m.name, err)
			}
		}
	})

	t.Run("SASL_SSL", func(t *testing.T) {
		cl := newClient(t, s.addr(t, "SASL_SSL"), kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)),
			kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
		roundTrip(t, cl, "sasl-ssl")
		s.log.waitLog(t, "connection authenticated", "listener=SASL_SSL", "principal=User:admin")
		// SCRAM is not enabled on this listener (its prefix lists PLAIN).
		sc := newClient(t, s.addr(t, "SASL_SSL"), kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)),
			kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()))
		if err := pingErr(sc); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("SCRAM on a PLAIN-only listener: %v", err)
		}
	})

	t.Run("handshake v0 framing", func(t *testing.T) {
		c := dialFrames(t, sp)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 0
		avr := &kmsg.ApiVersionsResponse{Version: 0}
		c.roundTrip(t, av, avr)
		if avr.ErrorCode != 0 || len(avr.ApiKeys) == 0 {
			t.Fatalf("ApiVersions before authentication: %+v", avr)
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, "PLAIN"
		hsr := &kmsg.SASLHandshakeResponse{Version: 0}
		c.roundTrip(t, hs, hsr)
		if hsr.ErrorCode != 0 || strings.Join(hsr.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
			t.Fatalf("handshake v0: %+v", hsr)
		}
		// The token goes bare, and the answer to PLAIN is an empty frame.
		writeRawFrame(t, c.nc, []byte("\x00alice\x00alice-secret"))
		if got := readRawFrame(t, c); len(got) != 0 {
			t.Fatalf("PLAIN v0 reply %q, want an empty frame", got)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1
		mdr := &kmsg.MetadataResponse{Version: 1}
		c.roundTrip(t, md, mdr)
		if len(mdr.Brokers) != 1 {
			t.Fatalf("Metadata after a v0 authentication: %+v", mdr)
		}
		s.log.waitLog(t, "connection authenticated", "listener=SASL_PLAINTEXT", "principal=User:alice", "mechanism=PLAIN")

		// A wrong password after a v0 handshake: no answer, the
		// connection closes.
		c2 := dialFrames(t, sp)
		c2.roundTrip(t, hs, &kmsg.SASLHandshakeResponse{Version: 0})
		writeRawFrame(t, c2.nc, []byte("\x00alice\x00bad"))
		c2.expectClosed(t)
	})

	t.Run("SaslAuthenticate v0 to v2", func(t *testing.T) {
		for v := int16(0); v <= 2; v++ {
			c := dialFrames(t, sp)
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "PLAIN"
			c.roundTrip(t, hs, &kmsg.SASLHandshakeResponse{Version: 1})
			au := kmsg.NewPtrSASLAuthenticateRequest()
			au.Version, au.SASLAuthBytes = v, []byte("\x00alice\x00alice-secret")
			aur := &kmsg.SASLAuthenticateResponse{Version: v}
			c.roundTrip(t, au, aur)
			if aur.ErrorCode != 0 || len(aur.SASLAuthBytes) != 0 || aur.SessionLifetimeMillis != 0 {
				t.Fatalf("v%d: %+v", v, aur)
			}
			// After authentication both are answered ILLEGAL_SASL_STATE.
			c.roundTrip(t, au, aur)
			if aur.ErrorCode != kerr.IllegalSaslState.Code || aur.ErrorMessage == nil ||
				*aur.ErrorMessage != "SaslAuthenticate request received after successful authentication" {
				t.Fatalf("v%d after authentication: %+v", v, aur)
			}
			hsr := &kmsg.SASLHandshakeResponse{Version: 1}
			c.roundTrip(t, hs, hsr)
			if hsr.ErrorCode != kerr.IllegalSaslState.Code {
				t.Fatalf("handshake after authentication: %+v", hsr)
			}

			bad := dialFrames(t, sp)
			bad.roundTrip(t, hs, &kmsg.SASLHandshakeResponse{Version: 1})
			au.SASLAuthBytes = []byte("alice\x00alice-secret")
			bad.roundTrip(t, au, aur)
			answered := time.Now()
			if aur.ErrorCode != kerr.SaslAuthenticationFailed.Code || aur.ErrorMessage == nil ||
				*aur.ErrorMessage != "Invalid SASL/PLAIN response: expected 3 tokens, got 2" {
				t.Fatalf("v%d malformed token: %+v", v, aur)
			}
			bad.expectClosed(t)
			// connection.failed.authentication.delay.ms (300 here).
			if d := time.Since(answered); d < 250*time.Millisecond {
				t.Fatalf("v%d: closed %v after the failure, want about 300ms", v, d)
			}
		}
	})

	t.Run("requests before authentication", func(t *testing.T) {
		// Metadata first: closed unanswered.
		c := dialFrames(t, sp)
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		if err := c.send(md); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)

		// Metadata after the handshake, before SaslAuthenticate: closed.
		c = dialFrames(t, sp)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		c.roundTrip(t, hs, &kmsg.SASLHandshakeResponse{Version: 1})
		if err := c.send(md); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)

		// An unknown mechanism: answered with the enabled ones, closed.
		c = dialFrames(t, sp)
		hs.Mechanism = "GSSAPI"
		hsr := &kmsg.SASLHandshakeResponse{Version: 1}
		c.roundTrip(t, hs, hsr)
		if hsr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hsr.SupportedMechanisms) != 3 {
			t.Fatalf("GSSAPI handshake: %+v", hsr)
		}
		c.expectClosed(t)

		// A frame over sasl.server.max.receive.size (4096 here): closed
		// before its body is read.
		c = dialFrames(t, sp)
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], 4097)
		if _, err := c.nc.Write(size[:]); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)
		s.log.waitLog(t, "failed authentication", "invalid receive size 4097")

		// The limit is only for the exchange: an authenticated client
		// sends larger requests.
		cl := newClient(t, sp, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		big := bytes.Repeat([]byte("x"), 64<<10)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big-after-auth", Value: big}).FirstErr(); err != nil {
			t.Fatalf("64 KiB produce after authentication: %v", err)
		}
	})
}

func writeRawFrame(t testing.TB, nc net.Conn, b []byte) {
	t.Helper()
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := nc.Write(append(buf, b...)); err != nil {
		t.Fatal(err)
	}
}

func readRawFrame(t testing.TB, c *frameConn) []byte {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.nc.SetReadDeadline(time.Time{})
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSecurityStartRefusals: what cannot be served stops New by name.
func TestSecurityStartRefusals(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	otherCert, _ := ca.issue(t, pkix.Name{CommonName: "other"}, true)
	tests := []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"ssl.keystore.location": writeFile(t, "missing-key.pem", certPEM(cert))}, "no PRIVATE KEY"},
		{map[string]string{"ssl.keystore.location": writeFile(t, "mismatch.pem", certPEM(otherCert)+keyPEM(t, key))}, "does not match its certificate"},
		{map[string]string{"ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.location: read key store"},
		{map[string]string{"ssl.keystore.location": writeFile(t, "ok.pem", certPEM(cert)+keyPEM(t, key)),
			"listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X/junk"}, "listener.name.ssl.ssl.principal.mapping.rules: invalid rule"},
		{map[string]string{"ssl.keystore.location": writeFile(t, "ok2.pem", certPEM(cert)+keyPEM(t, key)),
			"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "TLS 1.3 suites cannot be chosen one by one"},
	}
	for _, tt := range tests {
		all := config.DevProperties()
		all["listeners"] = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
		all["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"
		all["ssl.keystore.type"] = "PEM"
		for k, v := range tt.props {
			all[k] = v
		}
		cfg, _, err := config.Parse(all)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		cfg.LogDirs = []string{dir}
		s, err := New(cfg, Options{Logger: testLogger()})
		if err == nil {
			s.Close()
			t.Errorf("New with %v started", tt.props)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with %v: %v, want %q", tt.props, err, tt.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("refused start created its data dir (%v)", err)
		}
	}
}

// TestSASLSarama runs sarama over SASL_SSL with both handshake versions:
// v0 (as clients before Kafka 1.0, without ApiVersions first) sends the
// PLAIN token bare, v1 in SaslAuthenticate. The record versions are
// Kafka 2.1's, since Kafka 4 (and Gregor) no longer serve the produce
// versions of the v0 era.
func TestSASLSarama(t *testing.T) {
	s, ca := saslServer(t)
	addr := s.addr(t, "SASL_SSL")
	for _, v := range []struct {
		handshake int16
		kafka     sarama.KafkaVersion
	}{{sarama.SASLHandshakeV0, sarama.V2_1_0_0}, {sarama.SASLHandshakeV1, sarama.V2_8_0_0}} {
		for _, pass := range []string{"alice-secret", "wrong"} {
			cfg := sarama.NewConfig()
			cfg.Version = v.kafka
			cfg.Net.TLS.Enable = true
			cfg.Net.TLS.Config = ca.clientTLS(t, nil, nil)
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
			cfg.Net.SASL.Version = v.handshake
			// Clients of the v0 era sent no ApiVersions first.
			cfg.ApiVersionsRequest = v.handshake != sarama.SASLHandshakeV0
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", pass
			cfg.Producer.Return.Successes = true
			cfg.Metadata.Retry.Max = 0
			cfg.Producer.Retry.Max = 0
			topic := fmt.Sprintf("sarama-v%d", v.handshake)
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if pass == "wrong" {
				if err == nil {
					prod.Close()
					t.Fatalf("handshake v%d: sarama connected with a wrong password", v.handshake)
				}
				continue
			}
			if err != nil {
				t.Fatalf("handshake v%d: %v", v.handshake, err)
			}
			_, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("hello")})
			prod.Close()
			if err != nil {
				t.Fatalf("handshake v%d: produce: %v", v.handshake, err)
			}
			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := cons.ConsumePartition(topic, 0, off)
			if err != nil {
				cons.Close()
				t.Fatal(err)
			}
			select {
			case m := <-pc.Messages():
				if string(m.Value) != "hello" {
					t.Fatalf("handshake v%d: consumed %q", v.handshake, m.Value)
				}
			case err := <-pc.Errors():
				t.Fatalf("handshake v%d: consume: %v", v.handshake, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("handshake v%d: nothing consumed", v.handshake)
			}
			pc.Close()
			cons.Close()
		}
	}
	s.log.waitLog(t, "connection authenticated", "listener=SASL_SSL", "principal=User:alice", "mechanism=PLAIN")
}

// TestSASLKcat runs librdkafka (kcat) against the SASL listener: SCRAM
// with both hashes, and a wrong password refused.
func TestSASLKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("no kcat")
	}
	s, _ := saslServer(t)
	addr := s.addr(t, "SASL_PLAINTEXT")
	kcat := func(mech, pass, stdin string, args ...string) (string, error) {
		args = append([]string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=bob", "-X", "sasl.password=" + pass}, args...)
		cmd := exec.Command("kcat", args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		topic := "kcat-" + strings.ToLower(mech)
		if out, err := kcat(mech, "bob-secret", "a\nb\n", "-P", "-t", topic); err != nil {
			t.Fatalf("%s produce: %v\n%s\nserver log:\n%s", mech, err, out, s.log.String())
		}
		out, err := kcat(mech, "bob-secret", "", "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e")
		if err != nil || out != "a\nb\n" {
			t.Fatalf("%s consume: %v\n%q", mech, err, out)
		}
		s.log.waitLog(t, "connection authenticated", "principal=User:bob", "mechanism="+mech)
		if out, err := kcat(mech, "not-bobs", "", "-L", "-m", "2"); err == nil || !strings.Contains(out, "Authentication failed") {
			t.Fatalf("%s wrong password: %v\n%s", mech, err, out)
		}
	}
}

// TestTLSOptions: ssl.client.auth=requested, ssl.enabled.protocols,
// ssl.cipher.suites, and an inline PEM key encrypted by openssl with
// ssl.key.password.
func TestTLSOptions(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	plainKey := writeFile(t, "key.pem", keyPEM(t, srvKey))
	encKey, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes256", "-in", plainKey, "-passout", "pass:k3y").Output()
	if err != nil {
		t.Fatal(err)
	}
	s := startSecureServer(t, map[string]string{
		"listeners":                                       "PLAINTEXT://127.0.0.1:0,REQ://127.0.0.1:0,TLS12://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                  "PLAINTEXT:PLAINTEXT,REQ:SSL,TLS12:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                               "PEM",
		"ssl.keystore.certificate.chain":                  certPEM(srvCert),
		"ssl.keystore.key":                                string(encKey),
		"ssl.key.password":                                "k3y",
		"ssl.truststore.type":                             "PEM",
		"ssl.truststore.certificates":                     certPEM(ca.cert),
		"listener.name.req.ssl.client.auth":               "requested",
		"listener.name.req.ssl.enabled.protocols":         "TLSv1.3",
		"listener.name.tls12.ssl.cipher.suites":           "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"listener.name.tls12.ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/L",
	}, Options{})

	dial := func(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer c.Close()
		return c.ConnectionState(), nil
	}
	req := s.addr(t, "REQ")
	// requested: a client without a certificate is served, anonymous.
	cl := newClient(t, req, kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)))
	if err := pingErr(cl); err != nil {
		t.Fatal(err)
	}
	s.log.waitLog(t, "connection authenticated", "listener=REQ", "principal=User:ANONYMOUS")
	cert, key := ca.issue(t, pkix.Name{CommonName: "Carol"}, false)
	cl = newClient(t, req, kgo.DialTLSConfig(ca.clientTLS(t, cert, key)))
	if err := pingErr(cl); err != nil {
		t.Fatal(err)
	}
	s.log.waitLog(t, "connection authenticated", "listener=REQ", `principal="User:CN=Carol"`)
	// TLSv1.3 only.
	old := ca.clientTLS(t, nil, nil)
	old.MaxVersion = tls.VersionTLS12
	if _, err := dial(req, old); err == nil {
		t.Fatal("a TLS 1.2 client was served with ssl.enabled.protocols=TLSv1.3")
	}
	if st, err := dial(req, ca.clientTLS(t, nil, nil)); err != nil || st.Version != tls.VersionTLS13 {
		t.Fatalf("TLS 1.3: %v, version %x", err, st.Version)
	}

	// Only a TLS 1.2 suite listed: TLS 1.2 with that suite.
	t12 := s.addr(t, "TLS12")
	st, err := dial(t12, ca.clientTLS(t, nil, nil))
	if err != nil || st.Version != tls.VersionTLS12 || st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("TLS12 listener: %v, version %x suite %s", err, st.Version, tls.CipherSuiteName(st.CipherSuite))
	}
	other := ca.clientTLS(t, nil, nil)
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	if _, err := dial(t12, other); err == nil {
		t.Fatal("a cipher suite not in ssl.cipher.suites was negotiated")
	}
	cert2, key2 := ca.issue(t, pkix.Name{CommonName: "Dave"}, false)
	cl = newClient(t, t12, kgo.DialTLSConfig(ca.clientTLS(t, cert2, key2)))
	if err := pingErr(cl); err != nil {
		t.Fatal(err)
	}
	// ssl.client.auth is none here: the certificate is not asked for.
	s.log.waitLog(t, "connection authenticated", "listener=TLS12", "principal=User:ANONYMOUS")
}
