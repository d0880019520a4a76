package controller

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/security/authz"
)

// TestACLsCreateDelete runs Kafka's AclControlManager rules: a valid ACL
// is added once (a duplicate succeeds without a second copy), an invalid
// one is refused with INVALID_REQUEST while the others commit, and a
// DeleteAcls filter removes what it matches and lists it, the same ACL
// under every filter that matches it.
func TestACLsCreateDelete(t *testing.T) {
	n, c := startController(t, t.TempDir())
	read := authz.ACL{ResourceType: authz.ResourceTopic, ResourceName: "orders", PatternType: authz.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: authz.OpRead, Permission: authz.PermissionAllow}
	pre := authz.ACL{ResourceType: authz.ResourceGroup, ResourceName: "app-", PatternType: authz.PatternPrefixed,
		Principal: "User:*", Host: "*", Operation: authz.OpAll, Permission: authz.PermissionDeny}
	bad := read
	bad.PatternType = authz.PatternMatch
	errs := c.CreateACLs(ctxT(t), []authz.ACL{read, bad, pre, read})
	if errs[0] != nil || errs[2] != nil || errs[3] != nil || ErrorCode(errs[1]) != kerr.InvalidRequest.Code {
		t.Fatalf("CreateACLs errors %v", errs)
	}
	if got := n.Image().ACLs().Len(); got != 2 {
		t.Fatalf("%d ACLs in the image, want 2", got)
	}
	if errs := c.CreateACLs(ctxT(t), []authz.ACL{read}); errs[0] != nil || n.Image().ACLs().Len() != 2 {
		t.Fatalf("re-creating an existing ACL: %v, %d ACLs", errs, n.Image().ACLs().Len())
	}
	orders := "orders"
	byName := authz.Filter{ResourceType: authz.ResourceAny, ResourceName: &orders, PatternType: authz.PatternMatch, Operation: authz.OpAny, Permission: authz.PermissionAny}
	topics := authz.Filter{ResourceType: authz.ResourceTopic, PatternType: authz.PatternAny, Operation: authz.OpAny, Permission: authz.PermissionAny}
	unknown := authz.Filter{ResourceType: authz.ResourceTopic, PatternType: authz.PatternUnknown, Operation: authz.OpAny, Permission: authz.PermissionAny}
	res := c.DeleteACLs(ctxT(t), []authz.Filter{byName, topics, unknown})
	want := []DeleteACLsResult{{Deleted: []authz.ACL{read}}, {Deleted: []authz.ACL{read}}, {}}
	if ErrorCode(res[2].Err) != kerr.InvalidRequest.Code {
		t.Fatalf("unknown filter: %v", res[2].Err)
	}
	res[2].Err = nil
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("DeleteACLs = %+v, want %+v", res, want)
	}
	all := n.Image().ACLs().All()
	if len(all) != 1 || ACLOf(all[0]) != pre {
		t.Fatalf("ACLs left %+v, want %v", all, pre)
	}
	// The codecs carry both calls as Kafka's messages.
	callRoundTrip(t, "create acls", createACLsRPC, []authz.ACL{read, pre}, []error{nil, apiError(kerr.InvalidRequest, "bad")})
	callRoundTrip(t, "delete acls", deleteACLsRPC, []authz.Filter{byName, topics},
		[]DeleteACLsResult{{Deleted: []authz.ACL{read, pre}}, {Err: apiError(kerr.SecurityDisabled, "x")}})
}
