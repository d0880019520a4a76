package compat

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/compat/harness"
)

// classACLs is the class behind bin/kafka-acls.sh.
const classACLs = "org.apache.kafka.tools.AclCommand"

// aclToolJAAS is the PLAIN users of the kafka-acls test: admin is the
// super user, alice is not.
const aclToolJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret";`

// TestKafkaToolACLs runs Kafka's kafka-acls against a gregor with the
// StandardAuthorizer and a SASL_PLAINTEXT listener: the super user adds
// literal and prefixed ACLs, lists them (also with the MATCH pattern
// type) and removes one; a user without ACLs is refused with Kafka's
// ClusterAuthorizationException.
func TestKafkaToolACLs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs; not under -short")
	}
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("Kafka's tools need %s on PATH: %v", bin, err)
		}
	}
	k := newKafkaTools(t)
	plain, sasl, ctrl := ktFreePort(t), ktFreePort(t), ktFreePort(t)
	g, err := harness.Start(gregorBin, workDir, harness.Options{
		Listen: plain,
		Props: map[string]string{
			"listeners":                                           "PLAINTEXT://" + plain + ",SASL_PLAINTEXT://" + sasl + ",CONTROLLER://" + ctrl,
			"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
			"controller.quorum.voters":                            "1@" + ctrl,
			"sasl.enabled.mechanisms":                             "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": aclToolJAAS,
			"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users":                                         "User:admin",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("gregor: %v", err)
		}
	})
	clientProps := func(user string) string {
		return k.writeFile(t, user+".properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="`+user+`" password="`+user+`-secret";`+"\n")
	}
	admin := []string{"--bootstrap-server", sasl, "--command-config", clientProps("admin")}
	alice := []string{"--bootstrap-server", sasl, "--command-config", clientProps("alice")}
	acls := func(who []string, args ...string) string {
		return k.must(t, "", classACLs, append(append([]string{}, who...), args...)...)
	}

	out := acls(admin, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--topic", "orders")
	if !strings.Contains(out, "resourceType=TOPIC, name=orders, patternType=LITERAL") {
		t.Errorf("add topic ACLs printed:\n%s", out)
	}
	acls(admin, "--add", "--deny-principal", "User:bob", "--allow-host", "*", "--operation", "All", "--group", "app-", "--resource-pattern-type", "prefixed")

	out = acls(admin, "--list", "--topic", "orders")
	for _, want := range []string{"principal=User:alice, host=*, operation=READ, permissionType=ALLOW", "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW"} {
		if !strings.Contains(out, want) {
			t.Errorf("--list --topic orders lacks %q:\n%s", want, out)
		}
	}
	// MATCH: the prefixed group ACL applies to group app-1.
	out = acls(admin, "--list", "--group", "app-1", "--resource-pattern-type", "match")
	if !strings.Contains(out, "resourceType=GROUP, name=app-, patternType=PREFIXED") || !strings.Contains(out, "principal=User:bob, host=*, operation=ALL, permissionType=DENY") {
		t.Errorf("--list --group app-1 --resource-pattern-type match:\n%s", out)
	}
	out = acls(admin, "--list")
	if n := strings.Count(out, "permissionType="); n != 3 {
		t.Errorf("--list shows %d ACLs, want 3:\n%s", n, out)
	}

	// alice may not describe ACLs (DESCRIBE on the cluster).
	r := k.run(t, "", classACLs, append(alice, "--list")...)
	if !strings.Contains(r.stdout+r.stderr, "ClusterAuthorizationException") {
		t.Errorf("--list as alice: err %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}

	acls(admin, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	out = acls(admin, "--list", "--topic", "orders")
	if strings.Contains(out, "operation=WRITE") || !strings.Contains(out, "operation=READ") {
		t.Errorf("after --remove of WRITE:\n%s", out)
	}
	if os.Getenv("GREGOR_ACL_TOOL_LOG") != "" {
		t.Log(out)
	}
}
