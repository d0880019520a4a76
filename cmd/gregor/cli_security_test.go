package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// securedCLICluster starts `gregor serve` with a SASL_PLAINTEXT listener
// (PLAIN users admin and alice from the JAAS config, SCRAM-SHA-256 and
// -512 from the metadata log), Kafka's StandardAuthorizer on and admin a
// super user. It returns the SASL listener's address.
func securedCLICluster(t *testing.T) string {
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
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" \
    user_admin="admin-secret" \
    user_alice="alice-secret";
`, plainPort, saslPort, ctrlPort, filepath.Join(dir, "data"))
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--config", propsFile)
	return fmt.Sprintf("127.0.0.1:%d", saslPort)
}

// adminFlags authenticate as the PLAIN super user.
var adminFlags = []string{"--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "admin-secret"}

func withFlags(flags []string, args ...string) []string { return append(args, flags...) }

// TestCLISecurityFlags: the SASL flags, the environment and
// --command-config authenticate against a SASL_PLAINTEXT listener; a
// wrong password and keys the CLI does not apply fail.
func TestCLISecurityFlags(t *testing.T) {
	addr := securedCLICluster(t)
	mustCLI(t, addr, "", withFlags(adminFlags, "topic", "create", "sec1")...)
	out := mustCLI(t, addr, "", withFlags(adminFlags, "topic", "list")...)
	if !strings.Contains(out, "sec1") {
		t.Fatalf("topic list as admin:\n%s", out)
	}

	// A wrong password: the broker's SASL_AUTHENTICATION_FAILED, exit 1.
	r := runCLI(t, addr, "", "topic", "list", "--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "nope", "--timeout", "15s")
	if r.code != 1 || !strings.Contains(r.out+r.err, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("wrong password: exit %d\n%s%s", r.code, r.out, r.err)
	}

	// The user and password from the environment.
	cmd := []string{"topic", "list", "--sasl-mechanism", "PLAIN"}
	r = runCLIEnv(t, addr, []string{"GREGOR_SASL_USER=admin", "GREGOR_SASL_PASSWORD=admin-secret"}, cmd...)
	if r.code != 0 || !strings.Contains(r.out, "sec1") {
		t.Fatalf("credentials from the environment: exit %d\n%s%s", r.code, r.out, r.err)
	}

	// A Kafka client properties file.
	dir := t.TempDir()
	good := filepath.Join(dir, "client.properties")
	os.WriteFile(good, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";
`), 0o600)
	out = mustCLI(t, addr, "", "topic", "list", "--command-config", good)
	if !strings.Contains(out, "sec1") {
		t.Fatalf("topic list with --command-config:\n%s", out)
	}
	// A key the CLI does not apply is refused, not ignored.
	bad := filepath.Join(dir, "bad.properties")
	os.WriteFile(bad, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.login.callback.handler.class=x.Y\n"), 0o600)
	r = runCLI(t, addr, "", "topic", "list", "--command-config", bad)
	if r.code == 0 || !strings.Contains(r.err, "sasl.login.callback.handler.class is not a key gregor applies") {
		t.Fatalf("unknown key: exit %d\n%s%s", r.code, r.out, r.err)
	}
	jks := filepath.Join(dir, "jks.properties")
	os.WriteFile(jks, []byte("security.protocol=SSL\nssl.truststore.location=/x.jks\n"), 0o600)
	r = runCLI(t, addr, "", "topic", "list", "--command-config", jks)
	if r.code == 0 || !strings.Contains(r.err, "ssl.truststore.type=PEM") {
		t.Fatalf("JKS trust store: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// perf takes the same flags.
	mustCLI(t, addr, "", withFlags(adminFlags, "perf", "produce", "--bootstrap", addr, "--topic", "sec1", "--records", "50", "--record-size", "16")...)
	mustCLI(t, addr, "", withFlags(adminFlags, "perf", "consume", "--bootstrap", addr, "--topic", "sec1", "--records", "50", "--verify")...)
	if r := runCLI(t, addr, "", "perf", "produce", "--bootstrap", addr, "--topic", "sec1", "--records", "1", "--record-size", "1",
		"--command-config", bad); r.code == 0 || !strings.Contains(r.err, "not a key gregor applies") {
		t.Fatalf("perf with a bad --command-config: exit %d\n%s%s", r.code, r.out, r.err)
	}

	r = runCLI(t, addr, "", "topic", "list", "--sasl-user", "admin")
	if r.code != 2 || !strings.Contains(r.err, "need --sasl-mechanism") {
		t.Fatalf("--sasl-user alone: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

// runCLIEnv is runCLI with more environment variables.
func runCLIEnv(t *testing.T, addr string, env []string, args ...string) cliResult {
	t.Helper()
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	return runCLI(t, addr, "", args...)
}

// TestCLIUserAndACL: a SCRAM user made with `gregor user create`
// authenticates with SCRAM-SHA-256 through the CLI; an ACL made with
// `gregor acl create` lets that user produce where it was denied, and
// `acl delete` and `user delete` take both away again.
func TestCLIUserAndACL(t *testing.T) {
	addr := securedCLICluster(t)
	admin := func(args ...string) string {
		t.Helper()
		return mustCLI(t, addr, "", withFlags(adminFlags, args...)...)
	}
	carolFlags := []string{"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "carol", "--sasl-password", "carol-secret", "--timeout", "15s"}
	carol := func(stdin string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, addr, stdin, withFlags(carolFlags, args...)...)
	}
	admin("topic", "create", "acl-t")

	// Before the user exists, SCRAM fails.
	if r := carol("", "topic", "list"); r.code == 0 || !strings.Contains(r.out+r.err, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("SCRAM before user create: exit %d\n%s%s", r.code, r.out, r.err)
	}
	out := admin("user", "create", "carol", "--password", "carol-secret")
	if !strings.Contains(out, "carol SCRAM-SHA-256") || !strings.Contains(out, "OK") {
		t.Fatalf("user create:\n%s", out)
	}
	// A second mechanism, the password from stdin.
	mustCLI(t, addr, "carol-512\n", withFlags(adminFlags, "user", "create", "carol", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192")...)
	var users []userRow
	cliJSON(t, addr, &users, withFlags(adminFlags, "user", "list")...)
	if len(users) != 1 || users[0].User != "carol" || fmt.Sprint(users[0].Mechanisms) != "[{SCRAM-SHA-256 4096} {SCRAM-SHA-512 8192}]" {
		t.Fatalf("user list: %+v", users)
	}
	if table := admin("user", "list"); !regexpMatch(`carol +SCRAM-SHA-256 \(4096 iterations\), SCRAM-SHA-512 \(8192 iterations\)`, table) {
		t.Fatalf("user list table:\n%s", table)
	}

	// carol authenticates with SCRAM but may not see or write the topic.
	r := carol("", "topic", "list")
	if r.code != 0 || strings.Contains(r.out, "acl-t") {
		t.Fatalf("topic list as carol without ACLs: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := runCLI(t, addr, "", "topic", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "carol", "--sasl-password", "carol-512"); r.code != 0 {
		t.Fatalf("SCRAM-SHA-512 as carol: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := carol("denied\n", "produce", "acl-t"); r.code == 0 || !strings.Contains(r.out+r.err, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("produce as carol without ACLs: exit %d\n%s%s", r.code, r.out, r.err)
	}

	out = admin("acl", "create", "--allow-principal", "User:carol", "--operation", "Write", "--operation", "Describe", "--topic", "acl-t")
	if !regexpMatch(`User:carol +\* +TOPIC +acl-t +LITERAL +WRITE +ALLOW +OK`, out) || !regexpMatch(`User:carol +\* +TOPIC +acl-t +LITERAL +DESCRIBE +ALLOW +OK`, out) {
		t.Fatalf("acl create:\n%s", out)
	}
	admin("acl", "create", "--deny-principal", "User:carol", "--deny-host", "10.9.9.9", "--operation", "Read", "--group", "g-", "--resource-pattern-type", "prefixed")
	var acls []aclRow
	cliJSON(t, addr, &acls, withFlags(adminFlags, "acl", "list")...)
	want := []aclRow{
		{"User:carol", "*", "TOPIC", "acl-t", "LITERAL", "DESCRIBE", "ALLOW", ""},
		{"User:carol", "*", "TOPIC", "acl-t", "LITERAL", "WRITE", "ALLOW", ""},
		{"User:carol", "10.9.9.9", "GROUP", "g-", "PREFIXED", "READ", "DENY", ""},
	}
	if !slices.Equal(sortedACLs(acls), sortedACLs(want)) {
		t.Fatalf("acl list: %+v", acls)
	}
	acls = nil
	cliJSON(t, addr, &acls, withFlags(adminFlags, "acl", "list", "--group", "g-1", "--resource-pattern-type", "match")...)
	if len(acls) != 1 || acls[0].Permission != "DENY" {
		t.Fatalf("acl list --group g-1 match: %+v", acls)
	}

	if r := carol("allowed\n", "produce", "acl-t"); r.code != 0 {
		t.Fatalf("produce as carol with the ACL: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := carol("", "topic", "list"); r.code != 0 || !strings.Contains(r.out, "acl-t") {
		t.Fatalf("topic list as carol with DESCRIBE: exit %d\n%s%s", r.code, r.out, r.err)
	}
	consumed := admin("consume", "acl-t", "--offset", "start", "--num", "1")
	if strings.TrimSpace(consumed) != "allowed" {
		t.Fatalf("consumed %q", consumed)
	}

	out = admin("acl", "delete", "--allow-principal", "User:carol", "--operation", "Write", "--topic", "acl-t")
	if !regexpMatch(`User:carol +\* +TOPIC +acl-t +LITERAL +WRITE +ALLOW`, out) || strings.Contains(out, "DESCRIBE") {
		t.Fatalf("acl delete:\n%s", out)
	}
	// Without WRITE on any topic the idempotent producer's InitProducerId
	// fails first, as in Kafka: CLUSTER_AUTHORIZATION_FAILED.
	if r := carol("denied again\n", "produce", "acl-t"); r.code == 0 || !strings.Contains(r.out+r.err, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("produce as carol after acl delete: exit %d\n%s%s", r.code, r.out, r.err)
	}

	out = admin("user", "delete", "carol")
	if !regexpMatch(`carol +OK`, out) {
		t.Fatalf("user delete:\n%s", out)
	}
	users = nil
	cliJSON(t, addr, &users, withFlags(adminFlags, "user", "list")...)
	if len(users) != 0 {
		t.Fatalf("user list after delete: %+v", users)
	}
	if r := carol("", "topic", "list"); r.code == 0 || !strings.Contains(r.out+r.err, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("SCRAM after user delete: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := runCLI(t, addr, "", "acl", "list"); r.code == 0 {
		t.Fatalf("acl list without credentials on a SASL listener succeeded:\n%s", r.out)
	}
}

func sortedACLs(rows []aclRow) []aclRow { return dedupACLs(slices.Clone(rows)) }

// TestUserCreatePromptsWithoutEcho: on a terminal (a pty from Python's
// pty module) `user create` asks for the password and the terminal does
// not echo it.
func TestUserCreatePromptsWithoutEcho(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for a pty")
	}
	const script = `
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], ["gregor", "user", "create", "x", "-b", "127.0.0.1:1"])
out = b""
def read(secs):
    global out
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                out += os.read(fd, 1024)
            except OSError:
                return
read(2)
os.write(fd, b"sekrit-typed\n")
read(5)
sys.stdout.write(out.decode())
`
	cmd := exec.Command("python3", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 pty: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "password: ") || !strings.Contains(string(out), "cannot reach a broker") {
		t.Fatalf("no prompt, or the password was not read:\n%s", out)
	}
	if strings.Contains(string(out), "sekrit-typed") {
		t.Fatalf("the terminal echoed the password:\n%s", out)
	}
}
