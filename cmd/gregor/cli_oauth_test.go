package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oauthCLICluster starts `gregor serve` with a SASL_PLAINTEXT listener
// serving OAUTHBEARER with Kafka's unsecured validator (scope "kafka"
// required), the StandardAuthorizer and User:alice as super user, and
// returns the listener's address.
func oauthCLICluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	plainPort, saslPort, ctrlPort := freePort(t), freePort(t), freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[3]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,SASL_PLAINTEXT://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[4]s
offsets.topic.replication.factor=1
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:alice;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
sasl.enabled.mechanisms=OAUTHBEARER
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
    unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";
`, plainPort, saslPort, ctrlPort, filepath.Join(dir, "data"))
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--config", propsFile)
	return fmt.Sprintf("127.0.0.1:%d", saslPort)
}

// testUnsecuredToken writes an unsecured JWS by hand (not with the
// code under test) for sub with the scope kafka.
func testUnsecuredToken(t *testing.T, sub string) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Unix()
	return enc(map[string]any{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "iat": now, "exp": now + 600, "scope": []string{"kafka"}}) + "."
}

// TestCLIOAuthBearer: the CLI authenticates with OAUTHBEARER from
// --sasl-token, from GREGOR_SASL_TOKEN, and from --command-config with
// OAuthBearerLoginModule's unsecuredLogin options; the token's subject
// is the principal the authorizer sees, and a token the broker refuses
// fails the command.
func TestCLIOAuthBearer(t *testing.T) {
	addr := oauthCLICluster(t)
	alice := testUnsecuredToken(t, "alice")
	mustCLI(t, addr, "", "topic", "create", "oauth1", "--sasl-mechanism", "OAUTHBEARER", "--sasl-token", alice)

	// User:bob authenticates but is not a super user: the create is denied.
	r := runCLI(t, addr, "", "topic", "create", "oauth2", "--sasl-mechanism", "OAUTHBEARER", "--sasl-token", testUnsecuredToken(t, "bob"), "--timeout", "15s")
	if r.code != 1 || !strings.Contains(r.out+r.err, "AUTHORIZATION_FAILED") {
		t.Fatalf("create as bob: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// A token that is not a JWS: the broker's SASL_AUTHENTICATION_FAILED.
	r = runCLI(t, addr, "", "topic", "list", "--sasl-mechanism", "OAUTHBEARER", "--sasl-token", "not-a-token", "--timeout", "15s")
	if r.code != 1 || !strings.Contains(r.out+r.err, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("bad token: exit %d\n%s%s", r.code, r.out, r.err)
	}

	r = runCLIEnv(t, addr, []string{"GREGOR_SASL_TOKEN=" + alice}, "topic", "list", "--sasl-mechanism", "OAUTHBEARER")
	if r.code != 0 || !strings.Contains(r.out, "oauth1") {
		t.Fatalf("token from the environment: exit %d\n%s%s", r.code, r.out, r.err)
	}
	t.Setenv("GREGOR_SASL_TOKEN", "")

	dir := t.TempDir()
	good := filepath.Join(dir, "client.properties")
	os.WriteFile(good, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
    unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",kafka,other" unsecuredLoginLifetimeSeconds="600";
`), 0o600)
	mustCLI(t, addr, "", "topic", "create", "oauth3", "--command-config", good)
	// Without the scope the broker requires, the token is refused.
	noScope := filepath.Join(dir, "noscope.properties")
	os.WriteFile(noScope, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";
`), 0o600)
	r = runCLI(t, addr, "", "topic", "list", "--command-config", noScope, "--timeout", "15s")
	if r.code != 1 || !strings.Contains(r.out+r.err, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("token without the required scope: exit %d\n%s%s", r.code, r.out, r.err)
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--sasl-mechanism", "OAUTHBEARER"}, "needs --sasl-token"},
		{[]string{"--sasl-token", alice}, "--sasl-token needs --sasl-mechanism OAUTHBEARER"},
		{[]string{"--sasl-mechanism", "OAUTHBEARER", "--sasl-token", alice, "--sasl-user", "x"}, "not --sasl-user"},
	} {
		r := runCLI(t, addr, "", append([]string{"topic", "list"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.err, c.msg) {
			t.Fatalf("%v: exit %d\n%s%s", c.args, r.code, r.out, r.err)
		}
	}
}

// TestUnsecuredJWS: the claims OAuthBearerLoginModule's options give.
func TestUnsecuredJWS(t *testing.T) {
	now := time.Unix(1000, 0)
	tok, err := unsecuredJWS(map[string]string{
		"unsecuredLoginStringClaim_sub":   "alice",
		"unsecuredLoginListClaim_scope":   "|a|b",
		"unsecuredLoginNumberClaim_level": "3",
		"unsecuredLoginLifetimeSeconds":   "60",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q is not an unsigned JWS", tok)
	}
	var claims map[string]any
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	want := `map[exp:1060 iat:1000 level:3 scope:[a b] sub:alice]`
	if got := fmt.Sprint(claims); got != want {
		t.Fatalf("claims %s, want %s", got, want)
	}
	for opts, msg := range map[string]map[string]string{
		"no principal": {"unsecuredLoginStringClaim_foo": "x"},
		"not one":      {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginBogus": "x"},
		"iat claim":    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_iat": "1"},
	} {
		if _, err := unsecuredJWS(msg, now); err == nil || !strings.Contains(err.Error(), opts) {
			t.Fatalf("%v: %v, want an error with %q", msg, err, opts)
		}
	}
}
