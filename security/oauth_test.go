package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

func b64j(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// clientFirst is the OAUTHBEARER client first message Kafka's client sends.
func clientFirst(token string) []byte {
	return []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
}

func unsecured(t *testing.T, claims map[string]any) string {
	return b64j(t, map[string]any{"alg": "none"}) + "." + b64j(t, claims) + "."
}

// TestOAuthUnsecured: Kafka's unsecured validator's checks and its error
// JSON, the 0x01 answer that ends a refused exchange, and the session's
// expiry from the token.
func TestOAuthUnsecured(t *testing.T) {
	jaas := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker"
		unsecuredValidatorRequiredScope="produce" unsecuredValidatorAllowableClockSkewMs="1000"
		unsecuredValidatorPrincipalClaimName="who";`
	m, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerUnsecuredValidator, JAAS: jaas}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	m.now = func() time.Time { return now }
	good := map[string]any{"who": "alice", "exp": now.Unix() + 60, "iat": now.Unix(), "scope": []string{"produce", "x"}}
	s := m.Start()
	reply, done, err := s.Step(clientFirst(unsecured(t, good)))
	if err != nil || !done || len(reply) != 0 {
		t.Fatalf("good token: reply %q done %v err %v", reply, done, err)
	}
	if p := s.Principal(); p.String() != "User:alice" {
		t.Fatalf("principal %s", p)
	}
	if exp, ok := s.(ExpiringSession).CredentialExpiry(); !ok || !exp.Equal(now.Add(time.Minute)) {
		t.Fatalf("expiry %v %v", exp, ok)
	}

	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, tt := range []struct {
		name  string
		token string
		want  string
	}{
		{"expired", unsecured(t, with("exp", now.Unix()-1)), `{"status":"invalid_token"}`},
		{"expired within skew is still expired at the second", unsecured(t, with("exp", now.Unix())), `{"status":"invalid_token"}`},
		{"no exp", unsecured(t, with("exp", nil)), `{"status":"invalid_token"}`},
		{"no principal", unsecured(t, with("who", nil)), `{"status":"invalid_token"}`},
		{"iat in the future", unsecured(t, with("iat", now.Unix()+5)), `{"status":"invalid_token"}`},
		{"missing scope", unsecured(t, with("scope", "consume")), `{"status":"insufficient_scope", "scope":"[produce]"}`},
		{"signed", b64j(t, map[string]any{"alg": "none"}) + "." + b64j(t, good) + ".c2ln", `{"status":"invalid_token"}`},
		{"alg RS256", b64j(t, map[string]any{"alg": "RS256"}) + "." + b64j(t, good) + ".", `{"status":"invalid_token"}`},
		{"two parts", b64j(t, map[string]any{"alg": "none"}) + "." + b64j(t, good), `{"status":"invalid_token"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := m.Start()
			reply, done, err := s.Step(clientFirst(tt.token))
			if err != nil || done || string(reply) != tt.want {
				t.Fatalf("reply %q done %v err %v, want challenge %s", reply, done, err, tt.want)
			}
			_, _, err = s.Step([]byte{1})
			if ae, ok := err.(*AuthError); !ok || ae.Msg != tt.want {
				t.Fatalf("after 0x01: %v, want AuthError %s", err, tt.want)
			}
		})
	}
	// Malformed first messages are SaslExceptions: Kafka's generic message.
	for _, msg := range []string{"", "n,,\x01\x01", "n,,\x01auth=Basic abc\x01\x01", "y,,\x01auth=Bearer abc\x01\x01"} {
		_, _, err := m.Start().Step([]byte(msg))
		if _, isAuth := err.(*AuthError); err == nil || isAuth {
			t.Errorf("first message %q: %v, want a plain error", msg, err)
		}
	}
	// An authorization id other than the token's principal.
	_, _, err = m.Start().Step([]byte("n,a=bob,\x01auth=Bearer " + unsecured(t, good) + "\x01\x01"))
	if ae, ok := err.(*AuthError); !ok || !strings.Contains(ae.Msg, "different from the token's principal name (alice)") {
		t.Fatalf("authzid bob: %v", err)
	}
	// Extensions are accepted.
	if _, done, err := m.Start().Step([]byte("n,a=alice,\x01auth=Bearer " + unsecured(t, good) + "\x01traceId=abc 1\x01\x01")); !done || err != nil {
		t.Fatalf("with an extension: %v %v", done, err)
	}
}

const loginJAAS = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`

// TestOAuthBrokerLogin: as Kafka's broker logs itself in with the
// listener's OAuthBearerLoginModule, a JAAS config without the principal
// of that login is refused with Kafka's message.
func TestOAuthBrokerLogin(t *testing.T) {
	for jaas, want := range map[string]string{
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`:                                                                          "No principal name in JWT claim: sub",
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginPrincipalClaimName="who" unsecuredLoginStringClaim_sub="x";`: "No principal name in JWT claim: who",
		`org.apache.kafka.common.security.plain.PlainLoginModule required unsecuredLoginStringClaim_sub="x";`:                                                    "is not org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
		loginJAAS: "",
	} {
		_, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerUnsecuredValidator, JAAS: jaas}, nil)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("JAAS %s: %v, want %q", jaas, err, want)
		}
	}
}

type testKey struct {
	kid, alg string
	priv     crypto.Signer
}

func (k testKey) jwk(t *testing.T) map[string]any {
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": k.alg, "n": enc(p.N.Bytes()), "e": enc(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := p.Bytes()
		return map[string]any{"kty": "EC", "kid": k.kid, "crv": "P-256", "x": enc(b[1:33]), "y": enc(b[33:])}
	}
	t.Fatal("key type")
	return nil
}

func (k testKey) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	in := b64j(t, map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"}) + "." + b64j(t, claims)
	d := digest(crypto.SHA256, []byte(in))
	var sig []byte
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, p, crypto.SHA256, d)
		if err != nil {
			t.Fatal(err)
		}
		sig = s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, p, d)
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestOAuthJWT: JWTs signed with RS256 and ES256 by keys of a JWKS file,
// and the refusals of Kafka's validator.
func TestOAuthJWT(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, ecKey := testKey{"r1", "RS256", rk}, testKey{"e1", "ES256", ek}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := testKey{"r1", "RS256", other}
	jwks, _ := json.Marshal(map[string]any{"keys": []any{rsaKey.jwk(t), ecKey.jwk(t), map[string]any{"kty": "oct", "k": "c2VjcmV0"}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerJWTValidator, JWKSURL: "file://" + path, JAAS: loginJAAS,
		ExpectedAudience: []string{"kafka"}, ExpectedIssuer: "https://idp", SubClaimName: "sub", ScopeClaimName: "scope", ClockSkewSeconds: 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := map[string]any{"sub": "alice", "aud": []string{"kafka"}, "iss": "https://idp", "exp": now.Unix() + 600, "iat": now.Unix(), "scope": "produce"}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, k := range []testKey{rsaKey, ecKey} {
		s := m.Start()
		if _, done, err := s.Step(clientFirst(k.sign(t, good))); !done || err != nil || s.Principal().String() != "User:alice" {
			t.Fatalf("%s token: done %v err %v", k.alg, done, err)
		}
	}
	for _, tt := range []struct {
		name, token string
	}{
		{"expired", rsaKey.sign(t, with("exp", now.Unix()-31))},
		{"wrong audience", rsaKey.sign(t, with("aud", "other"))},
		{"no audience", rsaKey.sign(t, with("aud", nil))},
		{"wrong issuer", rsaKey.sign(t, with("iss", "https://evil"))},
		{"no iat", rsaKey.sign(t, with("iat", nil))},
		{"no sub", ecKey.sign(t, with("sub", nil))},
		{"not yet valid", ecKey.sign(t, with("nbf", now.Unix()+120))},
		{"bad signature", forged.sign(t, good)},
		{"unknown kid", testKey{"r9", "RS256", rk}.sign(t, good)},
		{"unsecured", unsecured(t, good)},
		{"duplicate scope", rsaKey.sign(t, with("scope", []string{"a", "a"}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := m.Start()
			reply, done, err := s.Step(clientFirst(tt.token))
			if err != nil || done || string(reply) != `{"status":"invalid_token"}` {
				t.Fatalf("reply %q done %v err %v", reply, done, err)
			}
			t.Log(s.(*oauthSession).Refusal())
		})
	}
	// Within the clock skew an expired token still passes.
	skewed := with("exp", now.Unix()-5)
	skewed["iat"] = now.Unix() - 60
	if _, done, err := m.Start().Step(clientFirst(rsaKey.sign(t, skewed))); !done || err != nil {
		t.Fatalf("expired 5 s ago with 30 s skew: %v %v", done, err)
	}
}

// TestOAuthJWKSOverHTTP: a JWKS served over http (loopback) is fetched at
// start, and fetched again when a token names a key id it does not hold,
// so a key the issuer adds works without a restart; stopping the
// validator stops its refresher.
func TestOAuthJWKSOverHTTP(t *testing.T) {
	k1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	first, second := testKey{"r1", "RS256", k1}, testKey{"e2", "ES256", k2}
	var served atomic.Value
	set := func(keys ...testKey) {
		var jwks []any
		for _, k := range keys {
			jwks = append(jwks, k.jwk(t))
		}
		b, _ := json.Marshal(map[string]any{"keys": jwks})
		served.Store(b)
	}
	set(first)
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write(served.Load().([]byte))
	}))
	defer srv.Close()
	m, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerJWTValidator, JWKSURL: srv.URL + "/keys", JAAS: loginJAAS,
		ExpectedAudience: []string{"kafka"}, AllowUnverifiedIssuer: true, SubClaimName: "sub", ScopeClaimName: "scope", ClockSkewSeconds: 30,
		JWKSRefreshMs: 3600000, JWKSRetryBackoffMs: 100, JWKSRetryBackoffMaxMs: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	now := time.Now().Unix()
	claims := map[string]any{"sub": "alice", "aud": "kafka", "iat": now, "exp": now + 600}
	if _, done, err := m.Start().Step(clientFirst(first.sign(t, claims))); !done || err != nil {
		t.Fatalf("token signed by the served key: %v %v", done, err)
	}
	set(first, second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, done, err := m.Start().Step(clientFirst(second.sign(t, claims)))
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key added to the JWKS is still unknown after 5 s (%d fetches)", fetches.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d fetches", fetches.Load())
	// A JWKS URL that does not answer stops start-up.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	if _, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerJWTValidator, JWKSURL: gone.URL + "/keys", JAAS: loginJAAS}, nil); err == nil {
		t.Fatal("a JWKS URL nothing answers was accepted")
	}
}
