package broker

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/gregorbroker/gregor/config"
)

func b64json(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// unsecuredToken is an unsecured JWS as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler makes them.
func unsecuredToken(t testing.TB, claims map[string]any) string {
	return b64json(t, map[string]any{"alg": "none"}) + "." + b64json(t, claims) + "."
}

// signingKey signs JWTs for tests with RS256 or ES256.
type signingKey struct {
	kid, alg string
	priv     crypto.Signer
}

func newSigningKey(t testing.TB, kid, alg string) signingKey {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	if alg == "ES256" {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: alg, priv: k}
}

// jwk is the key's public half as a JWKS entry.
func (k signingKey) jwk() map[string]any {
	enc := base64.RawURLEncoding.EncodeToString
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": k.alg, "n": enc(p.N.Bytes()), "e": enc(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := p.Bytes()
		return map[string]any{"kty": "EC", "kid": k.kid, "use": "sig", "crv": "P-256", "x": enc(b[1:33]), "y": enc(b[33:])}
	}
	return nil
}

func (k signingKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	in := b64json(t, map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"}) + "." + b64json(t, claims)
	d := sha256.Sum256([]byte(in))
	var sig []byte
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, p, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, p, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// jwksFile writes a JWKS holding keys and returns its file: URL.
func jwksFile(t testing.TB, keys ...signingKey) string {
	t.Helper()
	var jwks []any
	for _, k := range keys {
		jwks = append(jwks, k.jwk())
	}
	b, err := json.Marshal(map[string]any{"keys": jwks})
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + writeFile(t, "jwks.json", string(b))
}

func oauthClient(t testing.TB, addr, token string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.SASL(oauth.Auth{Token: token}.AsMechanism())}, opts...)...)
}

// wantRefused checks that a client's request fails with
// SASL_AUTHENTICATION_FAILED and Kafka's message.
func wantRefused(t *testing.T, cl *kgo.Client, msg string) {
	t.Helper()
	err := pingErr(cl)
	if err == nil || !strings.Contains(err.Error(), kerr.SaslAuthenticationFailed.Message) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error %v, want SASL_AUTHENTICATION_FAILED with %s", err, msg)
	}
}

// TestOAuthBearerUnsecured: Kafka's default OAUTHBEARER validator on a
// SASL_PLAINTEXT listener, its JAAS options (principal claim, required
// scope, clock skew), franz-go's OAUTHBEARER client producing and
// consuming, and the refusals Kafka answers with RFC 7628's error JSON.
//
// GREGOR_OAUTH_REFERENCE=host:port runs it against another broker's
// listener with the same JAAS options (the Kafka reference), without the
// checks of Gregor's log.
func TestOAuthBearerUnsecured(t *testing.T) {
	addr := os.Getenv("GREGOR_OAUTH_REFERENCE")
	waitLog := func(parts ...string) {}
	if addr == "" {
		s := startSecureServer(t, map[string]string{
			"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
			"sasl.enabled.mechanisms":        "OAUTHBEARER",
			"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker"
				unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="2000";`,
		}, Options{})
		addr = s.addr(t, "SASL_PLAINTEXT")
		waitLog = func(parts ...string) { t.Helper(); s.log.waitLog(t, parts...) }
	}
	now := time.Now().Unix()
	claims := func(sub string, exp int64, scope any) map[string]any {
		return map[string]any{"sub": sub, "iat": now - 10, "exp": exp, "scope": scope}
	}

	cl := oauthClient(t, addr, unsecuredToken(t, claims("alice", now+3600, []string{"kafka", "other"})))
	roundTrip(t, cl, "oauth-unsecured")
	waitLog("connection authenticated", "principal=User:alice", "mechanism=OAUTHBEARER")

	wantRefused(t, oauthClient(t, addr, unsecuredToken(t, claims("alice", now-60, "kafka"))), `{"status":"invalid_token"}`)
	waitLog("SASL credential refused", "was on or after the Expiration Time")
	wantRefused(t, oauthClient(t, addr, unsecuredToken(t, claims("alice", now+3600, "other"))), `{"status":"insufficient_scope", "scope":"[kafka]"}`)
	wantRefused(t, oauthClient(t, addr, unsecuredToken(t, claims("", now+3600, "kafka"))), `{"status":"invalid_token"}`)
	// A signed token is not an unsecured one.
	signed := newSigningKey(t, "k", "RS256").sign(t, claims("alice", now+3600, "kafka"))
	wantRefused(t, oauthClient(t, addr, signed), `{"status":"invalid_token"}`)
}

// TestOAuthBearerJWKS: Kafka's OAuthBearerValidatorCallbackHandler with
// a JWKS file, RS256 and ES256 tokens, the expected audience and issuer,
// a custom subject claim, and the principal User:<subject> under ACLs.
func TestOAuthBearerJWKS(t *testing.T) {
	rs, es := newSigningKey(t, "rsa-1", "RS256"), newSigningKey(t, "ec-1", "ES256")
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":                   `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": config.OAuthBearerJWTValidator,
		"sasl.oauthbearer.jwks.endpoint.url":                                          jwksFile(t, rs, es),
		"sasl.oauthbearer.expected.audience":                                          "kafka",
		"sasl.oauthbearer.expected.issuer":                                            "https://idp.example",
		"sasl.oauthbearer.sub.claim.name":                                             "client_id",
		"authorizer.class.name":                                                       config.StandardAuthorizer,
		"super.users":                                                                 "User:ANONYMOUS",
	}, Options{})
	addr := s.addr(t, "SASL_PLAINTEXT")
	admin := newClient(t, s.addr(t, "PLAINTEXT"))
	acls := kmsg.NewPtrCreateACLsRequest()
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationCreate} {
		acls.Creations = append(acls.Creations, aclCreation(kmsg.ACLResourceTypeTopic, "oauth-", kmsg.ACLResourcePatternTypePrefixed, "User:svc-alice", op, kmsg.ACLPermissionTypeAllow))
	}
	acls.Creations = append(acls.Creations, aclCreation(kmsg.ACLResourceTypeGroup, "*", kmsg.ACLResourcePatternTypeLiteral, "User:svc-alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	for _, r := range send[*kmsg.CreateACLsResponse](t, admin, acls).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACL: %d", r.ErrorCode)
		}
	}
	now := time.Now().Unix()
	claims := func(id string, mod func(map[string]any)) map[string]any {
		c := map[string]any{"client_id": id, "sub": "ignored", "aud": "kafka", "iss": "https://idp.example", "iat": now, "exp": now + 600}
		if mod != nil {
			mod(c)
		}
		return c
	}
	for _, k := range []signingKey{rs, es} {
		cl := oauthClient(t, addr, k.sign(t, claims("svc-alice", nil)))
		roundTrip(t, cl, "oauth-"+k.alg)
	}
	s.log.waitLog(t, "connection authenticated", "principal=User:svc-alice", "mechanism=OAUTHBEARER")

	// Authenticated, but not allowed by the ACLs.
	bob := oauthClient(t, addr, rs.sign(t, claims("svc-bob", nil)))
	ctx := ctx10(t)
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "oauth-RS256", Value: []byte("x")}).FirstErr(); err == nil || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("svc-bob produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	forged := newSigningKey(t, "rsa-1", "RS256")
	for name, token := range map[string]string{
		"expired":         rs.sign(t, claims("svc-alice", func(c map[string]any) { c["iat"], c["exp"] = now-600, now-60 })),
		"wrong audience":  rs.sign(t, claims("svc-alice", func(c map[string]any) { c["aud"] = []string{"other"} })),
		"wrong issuer":    es.sign(t, claims("svc-alice", func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"bad signature":   forged.sign(t, claims("svc-alice", nil)),
		"unknown key":     newSigningKey(t, "ec-2", "ES256").sign(t, claims("svc-alice", nil)),
		"unsecured":       unsecuredToken(t, claims("svc-alice", nil)),
		"no subject":      rs.sign(t, claims("", nil)),
		"tampered claims": tamper(t, rs.sign(t, claims("svc-bob", nil)), claims("svc-alice", nil)),
	} {
		t.Run(name, func(t *testing.T) {
			wantRefused(t, oauthClient(t, addr, token), `{"status":"invalid_token"}`)
		})
	}
}

// tamper replaces a signed token's claims, keeping its signature.
func tamper(t testing.TB, token string, claims map[string]any) string {
	parts := strings.Split(token, ".")
	return parts[0] + "." + b64json(t, claims) + "." + parts[2]
}

// TestOAuthBearerConfigRefused: start-up refuses a validator class other
// than Kafka's two, by name, and a JWKS that cannot be read.
func TestOAuthBearerConfigRefused(t *testing.T) {
	base := func() map[string]string {
		p := config.DevProperties()
		p["listeners"] = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
		p["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
		p["sasl.enabled.mechanisms"] = "OAUTHBEARER"
		p["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`
		return p
	}
	p := base()
	p["listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"] = "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler"
	if _, _, err := config.Parse(p); err == nil || !strings.Contains(err.Error(), "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler") {
		t.Fatalf("another validator class: %v", err)
	}
	p = base()
	p["listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"] = config.OAuthBearerJWTValidator
	p["sasl.oauthbearer.jwks.endpoint.url"] = "file:///nonexistent/jwks.json"
	// Kafka 4.4 wants the audience and issuer checked, or explicitly not.
	if _, _, err := config.Parse(p); err == nil || !strings.Contains(err.Error(), `"sasl.oauthbearer.allow.unverified.audience" to true`) {
		t.Fatalf("no expected audience: %v", err)
	}
	p["sasl.oauthbearer.allow.unverified.audience"] = "true"
	p["sasl.oauthbearer.expected.issuer"] = "https://idp.example"
	cfg, _, err := config.Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogDirs = []string{t.TempDir()}
	if s, err := New(cfg, Options{}); err == nil {
		s.Close()
		t.Fatal("a JWKS file that does not exist was accepted")
	} else if !strings.Contains(err.Error(), "jwks.json") {
		t.Fatalf("missing JWKS: %v", err)
	}
}

// TestOAuthBearerSASLSSL: OAUTHBEARER over TLS, JWTs from a JWKS on a
// SASL_SSL listener, with connections.max.reauth.ms for the mechanism:
// franz-go authenticates, produces and consumes, and re-authenticates
// over the TLS connection.
func TestOAuthBearerSASLSSL(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	key := newSigningKey(t, "ec-1", "ES256")
	s := startSecureServer(t, map[string]string{
		"listeners":                                           "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                                   "PEM",
		"ssl.keystore.certificate.chain":                      certPEM(srvCert),
		"ssl.keystore.key":                                    keyPEM(t, srvKey),
		"sasl.enabled.mechanisms":                             "OAUTHBEARER",
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": config.OAuthBearerJWTValidator,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwksFile(t, key),
		"sasl.oauthbearer.expected.audience":                                    "kafka",
		"sasl.oauthbearer.allow.unverified.issuer":                              "true",
		"listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms":          "2500",
	}, Options{})
	now := time.Now().Unix()
	token := key.sign(t, map[string]any{"sub": "svc-tls", "aud": "kafka", "iat": now, "exp": now + 600})
	cl := oauthClient(t, s.addr(t, "SASL_SSL"), token, kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)))
	roundTrip(t, cl, "oauth-tls")
	s.log.waitLog(t, "connection authenticated", "listener=SASL_SSL", "principal=User:svc-tls", "mechanism=OAUTHBEARER")
	ctx := ctx10(t)
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "oauth-tls", Value: []byte("again")}).FirstErr(); err != nil {
			t.Fatalf("produce across the session's end: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.log.waitLog(t, "connection re-authenticated", "principal=User:svc-tls", "mechanism=OAUTHBEARER")
}
