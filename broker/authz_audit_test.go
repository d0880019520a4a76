package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// auditLines returns the authorizer's log lines written after from (a
// length of the server log) at level.
func auditLines(s *secureServer, from int, level string) []string {
	var out []string
	for _, line := range strings.Split(s.log.String()[from:], "\n") {
		if strings.Contains(line, "component=authorizer") && strings.Contains(line, "level="+level+" ") {
			out = append(out, line)
		}
	}
	return out
}

// TestAuthorizerAuditLog checks the audit lines of Kafka's
// kafka.authorizer.logger: a denied Produce writes one INFO line naming
// the principal, operation, host, resource, request and rule; an allowed
// one writes only at DEBUG; the topics an all-topics Metadata leaves out
// (Kafka's logIfDenied=false) write no INFO line.
func TestAuthorizerAuditLog(t *testing.T) {
	s, clients := aclServer(t, false)
	if s == nil {
		t.Skip("the audit log is Gregor's own log")
	}
	setUpACLs(t, clients["admin"])

	from := len(s.log.String())
	if code := produceCode("t")(t, clients["bob"], "bob"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	info := auditLines(s, from, "INFO")
	if len(info) != 1 {
		t.Fatalf("a denied produce wrote %d INFO audit lines, want 1:\n%s", len(info), strings.Join(info, "\n"))
	}
	want := "Principal = User:bob is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:t for request = Produce with resourceRefCount = 1 based on rule MatchingAcl(acl=StandardAcl(resourceType=TOPIC, name=t, patternType=LITERAL, principal=User:bob, host=*, operation=ALL, permissionType=DENY))"
	if !strings.Contains(info[0], want) {
		t.Fatalf("audit line\n%s\nwant it to hold\n%s", info[0], want)
	}

	from = len(s.log.String())
	if code := produceCode("t")(t, clients["alice"], "alice"); code != 0 {
		t.Fatalf("alice's produce: %v", kerr.ErrorForCode(code))
	}
	if info := auditLines(s, from, "INFO"); len(info) != 0 {
		t.Fatalf("an allowed produce wrote INFO audit lines:\n%s", strings.Join(info, "\n"))
	}
	debug := strings.Join(auditLines(s, from, "DEBUG"), "\n")
	if !strings.Contains(debug, "Principal = User:alice is Allowed operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:t for request = Produce") {
		t.Fatalf("no DEBUG audit line for alice's produce in:\n%s", debug)
	}

	// Alice may not describe "free" (no ACL names it, and
	// allow.everyone.if.no.acl.found=false): an all-topics Metadata
	// leaves it out without an INFO line; naming it is an attempt and
	// logs one.
	from = len(s.log.String())
	resp := send[*kmsg.MetadataResponse](t, clients["alice"], kmsg.NewPtrMetadataRequest())
	for _, mt := range resp.Topics {
		if *mt.Topic == "free" {
			t.Fatal("alice was shown the topic free")
		}
	}
	if info := auditLines(s, from, "INFO"); len(info) != 0 {
		t.Fatalf("the all-topics Metadata wrote INFO audit lines:\n%s", strings.Join(info, "\n"))
	}
	from = len(s.log.String())
	if code := metadataCode("free")(t, clients["alice"], "alice"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's Metadata for free: %v", kerr.ErrorForCode(code))
	}
	info = auditLines(s, from, "INFO")
	if len(info) != 1 || !strings.Contains(info[0], "Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = Topic:LITERAL:free for request = Metadata with resourceRefCount = 1 based on rule DefaultDeny") {
		t.Fatalf("Metadata naming free: INFO audit lines\n%s", strings.Join(info, "\n"))
	}
}
