package authz

import (
	"net/netip"
	"testing"
)

func allow(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) ACL {
	return ACL{rt, name, pt, principal, host, op, PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) ACL {
	return ACL{rt, name, pt, principal, host, op, PermissionDeny}
}

// TestAuthorize checks StandardAuthorizerData's rules one by one: each
// case is a set of ACLs, a question and Kafka's answer.
func TestAuthorize(t *testing.T) {
	alice := Request{Principal: "User:alice", Host: "10.0.0.1"}
	bob := Request{Principal: "User:bob", Host: "10.0.0.2"}
	admin := Request{Principal: "User:admin", Host: "10.0.0.9"}
	tests := []struct {
		name          string
		acls          []ACL
		allowEveryone bool
		r             Request
		op            Operation
		rt            ResourceType
		res           string
		want          bool
	}{
		{"no acls, default deny", nil, false, alice, OpRead, ResourceTopic, "t", false},
		{"no acls, allow everyone", nil, true, alice, OpRead, ResourceTopic, "t", true},
		{"super user despite deny", []ACL{deny(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpAll)}, false, admin, OpWrite, ResourceTopic, "t", true},
		{"literal allow", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "t", true},
		{"literal allow other name", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "t2", false},
		{"literal name is not a prefix", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, true, alice, OpRead, ResourceTopic, "tt", true},
		{"acl for someone else denies with allow everyone", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpRead)}, true, alice, OpRead, ResourceTopic, "t", false},
		{"acl of another type does not count", []ACL{allow(ResourceGroup, "t", PatternLiteral, "User:bob", "*", OpRead)}, true, alice, OpRead, ResourceTopic, "t", true},
		{"prefixed allow", []ACL{allow(ResourceTopic, "orders-", PatternPrefixed, "User:alice", "*", OpWrite)}, false, alice, OpWrite, ResourceTopic, "orders-eu", true},
		{"prefixed is whole name too", []ACL{allow(ResourceTopic, "orders-", PatternPrefixed, "User:alice", "*", OpWrite)}, false, alice, OpWrite, ResourceTopic, "orders-", true},
		{"prefixed no match", []ACL{allow(ResourceTopic, "orders-", PatternPrefixed, "User:alice", "*", OpWrite)}, false, alice, OpWrite, ResourceTopic, "order", false},
		{"wildcard resource", []ACL{allow(ResourceTopic, "*", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "anything", true},
		{"prefixed star is not wildcard", []ACL{allow(ResourceTopic, "*", PatternPrefixed, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "anything", false},
		{"wildcard principal", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:*", "*", OpRead)}, false, bob, OpRead, ResourceTopic, "t", true},
		{"deny wins over allow", []ACL{
			allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "t", false},
		{"prefixed deny wins over literal allow", []ACL{
			allow(ResourceTopic, "secret-x", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceTopic, "secret-", PatternPrefixed, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "secret-x", false},
		{"wildcard deny wins", []ACL{
			allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "t", false},
		{"deny for another principal", []ACL{
			allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpRead)}, false, alice, OpRead, ResourceTopic, "t", true},
		{"host match", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "10.0.0.1", OpRead)}, false, alice, OpRead, ResourceTopic, "t", true},
		{"host mismatch", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "10.0.0.7", OpRead)}, false, alice, OpRead, ResourceTopic, "t", false},
		{"deny on another host", []ACL{
			allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceTopic, "t", PatternLiteral, "User:alice", "10.0.0.7", OpRead)}, false, alice, OpRead, ResourceTopic, "t", true},
		{"read implies describe", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpDescribe, ResourceTopic, "t", true},
		{"write implies describe", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpWrite)}, false, alice, OpDescribe, ResourceTopic, "t", true},
		{"delete implies describe", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpDelete)}, false, alice, OpDescribe, ResourceTopic, "t", true},
		{"alter implies describe", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpAlter)}, false, alice, OpDescribe, ResourceTopic, "t", true},
		{"create does not imply describe", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpCreate)}, false, alice, OpDescribe, ResourceTopic, "t", false},
		{"describe does not imply read", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpDescribe)}, false, alice, OpRead, ResourceTopic, "t", false},
		{"alter_configs implies describe_configs", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpAlterConfigs)}, false, alice, OpDescribeConfigs, ResourceTopic, "t", true},
		{"alter does not imply describe_configs", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpAlter)}, false, alice, OpDescribeConfigs, ResourceTopic, "t", false},
		{"deny read does not deny describe", []ACL{
			allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpDescribe),
			deny(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpDescribe, ResourceTopic, "t", true},
		{"all allows everything", []ACL{allow(ResourceCluster, ClusterName, PatternLiteral, "User:alice", "*", OpAll)}, false, alice, OpClusterAction, ResourceCluster, ClusterName, true},
		{"deny all denies everything", []ACL{
			allow(ResourceGroup, "g", PatternLiteral, "User:alice", "*", OpRead),
			deny(ResourceGroup, "g", PatternLiteral, "User:alice", "*", OpAll)}, false, alice, OpRead, ResourceGroup, "g", false},
		{"group read", []ACL{allow(ResourceGroup, "g", PatternLiteral, "User:alice", "*", OpRead)}, false, alice, OpRead, ResourceGroup, "g", true},
		{"transactional id write", []ACL{allow(ResourceTransactionalID, "tx-", PatternPrefixed, "User:alice", "*", OpWrite)}, false, alice, OpWrite, ResourceTransactionalID, "tx-1", true},
		{"delegation token describe", []ACL{allow(ResourceDelegationToken, "tok", PatternLiteral, "User:alice", "*", OpDescribe)}, false, alice, OpDescribe, ResourceDelegationToken, "tok", true},
		{"user create tokens", []ACL{allow(ResourceUser, "User:bob", PatternLiteral, "User:alice", "*", OpCreateTokens)}, false, alice, OpCreateTokens, ResourceUser, "User:bob", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New([]string{"User:admin"}, tc.allowEveryone)
			a.SetACLs(tc.acls)
			if got := a.Authorize(tc.r, tc.op, tc.rt, tc.res); got != tc.want {
				t.Errorf("Authorize(%s %s %s %s) = %v, want %v", tc.r.Principal, tc.op, tc.rt, tc.res, got, tc.want)
			}
		})
	}
}

// TestAuthorizeByResourceType checks Kafka's
// Authorizer.authorizeByResourceType, which IDEMPOTENT_WRITE falls back
// to (WRITE on any topic).
func TestAuthorizeByResourceType(t *testing.T) {
	alice := Request{Principal: "User:alice", Host: "10.0.0.1"}
	tests := []struct {
		name string
		acls []ACL
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpWrite)}, true},
		{"other op", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead)}, false},
		{"literal denied", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpWrite),
			deny(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpWrite)}, false},
		{"prefix dominates", []ACL{allow(ResourceTopic, "ab", PatternPrefixed, "User:alice", "*", OpWrite),
			deny(ResourceTopic, "a", PatternPrefixed, "User:alice", "*", OpWrite)}, false},
		{"deny narrower prefix", []ACL{allow(ResourceTopic, "a", PatternPrefixed, "User:alice", "*", OpWrite),
			deny(ResourceTopic, "ab", PatternPrefixed, "User:alice", "*", OpWrite)}, true},
		{"wildcard deny", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpWrite),
			deny(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpWrite)}, false},
		{"all counts", []ACL{allow(ResourceTopic, "t", PatternLiteral, "User:*", "*", OpAll)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(nil, false)
			a.SetACLs(tc.acls)
			if got := a.AuthorizeByResourceType(alice, OpWrite, ResourceTopic); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFilterMatches checks Kafka's AclBindingFilter.matches, including
// MATCH, which selects the ACLs that apply to a resource.
func TestFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := allow(ResourceTopic, "foo", PatternLiteral, "User:alice", "*", OpRead)
	wild := allow(ResourceTopic, "*", PatternLiteral, "User:alice", "*", OpRead)
	pre := allow(ResourceTopic, "fo", PatternPrefixed, "User:alice", "*", OpRead)
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	tests := []struct {
		name string
		f    Filter
		acl  ACL
		want bool
	}{
		{"any", any, lit, true},
		{"type", Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, lit, false},
		{"any pattern by name", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, lit, true},
		{"any pattern exact name only", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, wild, false},
		{"match literal", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, lit, true},
		{"match wildcard", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, wild, true},
		{"match prefix", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{"match prefix longer", Filter{ResourceType: ResourceTopic, ResourceName: str("f"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, pre, false},
		{"prefixed only", Filter{ResourceType: ResourceTopic, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, lit, false},
		{"principal", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: str("User:bob"), Operation: OpAny, Permission: PermissionAny}, lit, false},
		{"host", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: str("*"), Operation: OpAny, Permission: PermissionAny}, lit, true},
		{"operation", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpWrite, Permission: PermissionAny}, lit, false},
		{"permission", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, lit, false},
	}
	for _, tc := range tests {
		if got := tc.f.Matches(tc.acl); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3":         "10.1.2.3",
		"::ffff:10.1.2.3":  "10.1.2.3",
		"::1":              "0:0:0:0:0:0:0:1",
		"fe80::abcd:12":    "fe80:0:0:0:0:0:abcd:12",
		"2001:db8::0:1:ff": "2001:db8:0:0:0:0:1:ff",
	} {
		if got := HostOf(netip.MustParseAddr(in)); got != want {
			t.Errorf("HostOf(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestValidateAndSuperUsers(t *testing.T) {
	if err := allow(ResourceCluster, "c", PatternLiteral, "User:a", "*", OpAlter).Validate(); err == nil {
		t.Error("a cluster resource not named kafka-cluster was accepted")
	}
	if err := allow(ResourceTopic, "t", PatternMatch, "User:a", "*", OpAlter).Validate(); err == nil {
		t.Error("pattern type MATCH was accepted for a new ACL")
	}
	if err := allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpAny).Validate(); err == nil {
		t.Error("operation ANY was accepted for a new ACL")
	}
	if err := allow(ResourceTopic, "t", PatternLiteral, "alice", "*", OpRead).Validate(); err == nil {
		t.Error("a principal without a type was accepted")
	}
	if err := allow(ResourceTopic, "t", PatternPrefixed, "User:a", "*", OpRead).Validate(); err != nil {
		t.Error(err)
	}
	got := ParseSuperUsers(" User:a ;User:b;;")
	if len(got) != 2 || got[0] != "User:a" || got[1] != "User:b" {
		t.Errorf("ParseSuperUsers = %q", got)
	}
}
