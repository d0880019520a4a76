package compat

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkaToolsOAuthBearer: Kafka's Java client authenticates with
// OAUTHBEARER and produces: with the unsecured tokens of Kafka's
// OAuthBearerLoginModule against the default validator, and with JWTs
// the test signs (RS256, ES256), read by the client from a file, against
// OAuthBearerValidatorCallbackHandler and a JWKS file the test writes. An
// expired token, a wrong audience, a bad signature and a missing scope
// are refused with Kafka's SaslAuthenticationException and RFC 7628's
// error JSON. A producer keeps producing across several session
// lifetimes (listener.name.<l>.oauthbearer.connections.max.reauth.ms
// 3000), re-authenticating on its own.
//
// KAFKA_OAUTH_UNSECURED and KAFKA_OAUTH_JWT name another broker's two
// SASL_PLAINTEXT listeners instead (the Kafka reference), set up as this
// test sets up Gregor, with the JWKS written from the PEM key in
// KAFKA_OAUTH_KEYS (rsa.pem and ec.pem, PKCS#8; jwks.json beside them is
// what the broker must read).
func TestKafkaToolsOAuthBearer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs; not under -short")
	}
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("Kafka's tools need %s on PATH: %v", bin, err)
		}
	}
	k := newKafkaTools(t)
	keyDir := os.Getenv("KAFKA_OAUTH_KEYS")
	if keyDir == "" {
		keyDir = t.TempDir()
	}
	rs, es := oauthKey(t, keyDir, "rsa"), oauthKey(t, keyDir, "ec")
	jwks := filepath.Join(keyDir, "jwks.json")
	writeJWKS(t, jwks, rs, es)

	unsecured, jwt := os.Getenv("KAFKA_OAUTH_UNSECURED"), os.Getenv("KAFKA_OAUTH_JWT")
	var logPath string
	if unsecured == "" {
		ports := freePorts(t, 4)
		g := startGregor(t, map[string]string{
			"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d,JWT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d",
				ports[0], ports[1], ports[2], ports[3]),
			"listener.security.protocol.map":                                     "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
			"sasl.enabled.mechanisms":                                            "OAUTHBEARER",
			"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":          `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";`,
			"listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "3000",
			"listener.name.jwt.oauthbearer.sasl.jaas.config":                     `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
			"listener.name.jwt.oauthbearer.sasl.server.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
			"listener.name.jwt.sasl.oauthbearer.jwks.endpoint.url":               "file://" + jwks,
			"listener.name.jwt.sasl.oauthbearer.expected.audience":               "kafka",
			"listener.name.jwt.sasl.oauthbearer.expected.issuer":                 "https://idp.example",
			"log.level": "debug",
		})
		logPath = g.LogPath
		unsecured, jwt = fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
		k.useClassArchive(t, g.Addr)
	}
	tokenDir := t.TempDir()

	unsecuredProps := func(name, jaasOpts string) string {
		return k.writeFile(t, name+".properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "+jaasOpts+";\n")
	}
	// jwtProps returns a client's properties reading token from a file,
	// and the JVM options that let Kafka 4 read it (its URL allowed by
	// name).
	jwtProps := func(name, token string) (string, string) {
		path := filepath.Join(tokenDir, name+".jwt")
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := k.opts + " -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://" + path +
			" -Dorg.apache.kafka.sasl.oauthbearer.allowed.files=" + path
		return opts, k.writeFile(t, name+".properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"+
			"sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"+
			"sasl.oauthbearer.token.endpoint.url=file://"+path+"\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n")
	}
	list := func(opts, addr, props string) toolRun {
		return k.runOpts(t, opts, "", classTopics, "--bootstrap-server", addr, "--command-config", props, "--list")
	}
	wantRefused := func(t *testing.T, what string, r toolRun, msg string) {
		t.Helper()
		if r.err == nil || !strings.Contains(r.stderr, "SaslAuthenticationException") || !strings.Contains(r.stderr, msg) {
			t.Errorf("%s: kafka-topics --list: %v\nstdout:\n%s\nstderr:\n%s\nwant SaslAuthenticationException: %s", what, r.err, r.stdout, r.stderr, msg)
		}
	}
	perf := func(opts, addr, props, topic string, records, perSecond int) toolRun {
		return k.runOpts(t, opts, "", classProducerPerf, "--topic", topic, "--num-records", fmt.Sprint(records),
			"--record-size", "100", "--throughput", fmt.Sprint(perSecond),
			"--producer-props", "bootstrap.servers="+addr, "acks=all", "--producer.config", props)
	}
	wantProduced := func(t *testing.T, what string, r toolRun, records int) {
		t.Helper()
		if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("%d records sent", records)) {
			t.Errorf("%s: kafka-producer-perf-test: %v\nstdout:\n%s\nstderr:\n%s", what, r.err, r.stdout, r.stderr)
		}
	}
	suffix := fmt.Sprint(os.Getpid()) // a reference may be reused between runs

	t.Run("unsecured", func(t *testing.T) {
		good := unsecuredProps("unsecured-alice", `unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",kafka,other"`)
		// 12 s at 50 records a second over 3 s sessions: the client
		// re-authenticates every 2.5 to 2.9 s.
		r := perf(k.opts, unsecured, good, "oauth-unsecured-"+suffix, 600, 50)
		wantProduced(t, "unsecured token", r, 600)
		if logPath != "" {
			log, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			reauths := strings.Count(string(log), `msg="connection re-authenticated"`)
			t.Logf("gregor logged %d re-authentications", reauths)
			if reauths < 3 || strings.Contains(string(log), "SASL session expired") {
				t.Errorf("%d re-authentications in 12 s of 3 s sessions; expired sessions closed: %v", reauths, strings.Contains(string(log), "SASL session expired"))
			}
		}
		noScope := unsecuredProps("unsecured-noscope", `unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",other"`)
		wantRefused(t, "missing scope", list(k.opts, unsecured, noScope), `{"status":"insufficient_scope", "scope":"[kafka]"}`)
	})

	t.Run("jwt", func(t *testing.T) {
		now := time.Now().Unix()
		claims := func(mod func(map[string]any)) map[string]any {
			c := map[string]any{"sub": "svc-alice", "aud": "kafka", "iss": "https://idp.example", "iat": now, "exp": now + 3600, "scope": "kafka"}
			if mod != nil {
				mod(c)
			}
			return c
		}
		for _, key := range []oauthSigner{rs, es} {
			opts, props := jwtProps("jwt-"+key.alg, key.sign(t, claims(nil)))
			wantProduced(t, key.alg, perf(opts, jwt, props, "oauth-jwt-"+key.alg+"-"+suffix, 20, 100), 20)
		}
		other := oauthKey(t, t.TempDir(), "rsa")
		for name, token := range map[string]string{
			"expired":        rs.sign(t, claims(func(c map[string]any) { c["iat"], c["exp"] = now-7200, now-3600 })),
			"wrong audience": rs.sign(t, claims(func(c map[string]any) { c["aud"] = "other" })),
			"bad signature":  other.sign(t, claims(nil)),
		} {
			opts, props := jwtProps("jwt-"+strings.ReplaceAll(name, " ", "-"), token)
			wantRefused(t, name, list(opts, jwt, props), `{"status":"invalid_token"}`)
		}
	})
}

// oauthSigner signs JWTs with a key kept as PKCS#8 PEM in a directory, so
// that a reference broker can be given the JWKS of the same keys.
type oauthSigner struct {
	kid, alg string
	priv     crypto.Signer
}

func oauthKey(t *testing.T, dir, kind string) oauthSigner {
	t.Helper()
	path := filepath.Join(dir, kind+".pem")
	s := oauthSigner{kid: kind + "-1", alg: map[string]string{"rsa": "RS256", "ec": "ES256"}[kind]}
	if data, err := os.ReadFile(path); err == nil {
		s.priv = parsePKCS8(t, data)
		return s
	}
	var err error
	if kind == "ec" {
		s.priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		s.priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pkcs8PEM(t, s.priv), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64urlJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b64url(b)
}

func (s oauthSigner) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	in := b64urlJSON(t, map[string]any{"alg": s.alg, "kid": s.kid, "typ": "JWT"}) + "." + b64urlJSON(t, claims)
	d := sha256.Sum256([]byte(in))
	var sig []byte
	switch p := s.priv.(type) {
	case *rsa.PrivateKey:
		b, err := rsa.SignPKCS1v15(rand.Reader, p, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = b
	case *ecdsa.PrivateKey:
		r, ss, err := ecdsa.Sign(rand.Reader, p, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	}
	return in + "." + b64url(sig)
}

func writeJWKS(t *testing.T, path string, keys ...oauthSigner) {
	t.Helper()
	var out []any
	for _, k := range keys {
		switch p := k.priv.Public().(type) {
		case *rsa.PublicKey:
			out = append(out, map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": k.alg, "n": b64url(p.N.Bytes()), "e": b64url(big.NewInt(int64(p.E)).Bytes())})
		case *ecdsa.PublicKey:
			b, err := p.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, map[string]any{"kty": "EC", "kid": k.kid, "use": "sig", "alg": k.alg, "crv": "P-256", "x": b64url(b[1:33]), "y": b64url(b[33:])})
		}
	}
	b, err := json.Marshal(map[string]any{"keys": out})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pkcs8PEM(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func parsePKCS8(t *testing.T, data []byte) crypto.Signer {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block in the key file")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}
