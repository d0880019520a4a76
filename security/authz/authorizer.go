package authz

import (
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
)

// ClassName is the one authorizer.class.name Gregor serves: Kafka's
// KRaft authorizer, whose semantics this package has.
const ClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// Authorizer answers authorization questions against a set of ACLs that
// the broker replaces whenever the metadata image's ACLs change. It is
// safe for concurrent use: questions read an immutable snapshot.
type Authorizer struct {
	superUsers    map[string]bool
	allowEveryone bool
	acls          atomic.Pointer[aclIndex]
}

// New returns an authorizer with no ACLs. superUsers are principals
// ("User:admin") allowed everything; allowEveryone is
// allow.everyone.if.no.acl.found, the answer for a resource no ACL
// names.
func New(superUsers []string, allowEveryone bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowEveryone: allowEveryone}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	a.acls.Store(newIndex(nil))
	return a
}

// ParseSuperUsers splits Kafka's super.users, principals separated by
// ';' ("User:a;User:b"), as StandardAuthorizer.getConfiguredSuperUsers.
func ParseSuperUsers(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// SetACLs replaces the ACLs the authorizer decides with.
func (a *Authorizer) SetACLs(acls []ACL) { a.acls.Store(newIndex(acls)) }

// ACLs returns the current ACLs (the slice is shared: do not modify it).
func (a *Authorizer) ACLs() []ACL { return a.acls.Load().all }

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Request is who asks: the principal ("User:alice") and the client's
// address.
type Request struct {
	Principal string
	// Host is the client's IP address as Java's InetAddress.getHostAddress
	// writes it, which is what ACL hosts are compared with (see HostOf).
	Host string
}

// HostOf returns the client address as Java writes it: dotted IPv4, and
// IPv6 as eight uncompressed groups of lower-case hex (0:0:0:0:0:0:0:1),
// so that an ACL written for a Kafka broker matches here too.
func HostOf(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	b := addr.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = strconv.FormatUint(uint64(b[2*i])<<8|uint64(b[2*i+1]), 16)
	}
	s := strings.Join(groups, ":")
	if z := addr.Zone(); z != "" {
		s += "%" + z
	}
	return s
}

// Authorize reports whether r may perform op on the resource of type rt
// named name, as StandardAuthorizerData.authorize decides: a super user
// may do anything; otherwise a matching DENY entry denies, else a
// matching ALLOW entry allows, else the resource is denied if any ACL
// names it (whoever for) and otherwise allowed only with
// allow.everyone.if.no.acl.found.
func (a *Authorizer) Authorize(r Request, op Operation, rt ResourceType, name string) bool {
	return a.Decide(r, op, rt, name).Allowed
}

// Decision is an authorization answer and the rule that gave it, as
// Kafka's audit log names it.
type Decision struct {
	Allowed bool
	// Rule is Kafka's MatchingRule: "SuperUser", "DefaultAllow",
	// "DefaultDeny", or the entry that decided ("MatchingAcl(acl=...)").
	Rule string
}

// Decide is Authorize with the rule that decided.
func (a *Authorizer) Decide(r Request, op Operation, rt ResourceType, name string) Decision {
	if a.superUsers[r.Principal] {
		return Decision{Allowed: true, Rule: "SuperUser"}
	}
	allowed, acl := a.acls.Load().decide(r, op, rt, name, a.allowEveryone)
	switch {
	case acl != nil:
		return Decision{Allowed: allowed, Rule: "MatchingAcl(acl=StandardAcl" + acl.String() + ")"}
	case allowed:
		return Decision{Allowed: true, Rule: "DefaultAllow"}
	default:
		return Decision{Rule: "DefaultDeny"}
	}
}

// ResourceTypeName is the resource type as Kafka's audit log writes it
// (SecurityUtils.resourceTypeName): Topic, Group, Cluster,
// TransactionalId, DelegationToken, User.
func ResourceTypeName(rt ResourceType) string {
	switch rt {
	case ResourceTopic:
		return "Topic"
	case ResourceGroup:
		return "Group"
	case ResourceCluster:
		return "Cluster"
	case ResourceTransactionalID:
		return "TransactionalId"
	case ResourceDelegationToken:
		return "DelegationToken"
	case ResourceUser:
		return "User"
	}
	return rt.String()
}

// AuthorizeByResourceType reports whether r may perform op on some
// resource of type rt, Kafka's Authorizer.authorizeByResourceType: true
// when a matching ALLOW entry (literal, prefixed or wildcard) is not
// covered by a DENY entry, used for IDEMPOTENT_WRITE's fallback to WRITE
// on any topic.
func (a *Authorizer) AuthorizeByResourceType(r Request, op Operation, rt ResourceType) bool {
	// Kafka checks a made-up literal name first so that super users and
	// allow.everyone.if.no.acl.found apply.
	if a.Authorize(r, op, rt, "hardcode") {
		return true
	}
	denyLiteral := map[string]bool{}
	denyPrefix := map[string]bool{}
	var allowLiteral, allowPrefix []string
	t := a.acls.Load().byType[rt]
	if t == nil {
		return false
	}
	for _, acl := range t.all {
		if acl.Host != Wildcard && acl.Host != r.Host {
			continue
		}
		if acl.Principal != r.Principal && acl.Principal != wildcardPrincipal {
			continue
		}
		if acl.Operation != op && acl.Operation != OpAll {
			continue
		}
		switch acl.Permission {
		case PermissionDeny:
			switch acl.PatternType {
			case PatternLiteral:
				if acl.ResourceName == Wildcard {
					return false
				}
				denyLiteral[acl.ResourceName] = true
			case PatternPrefixed:
				denyPrefix[acl.ResourceName] = true
			}
		case PermissionAllow:
			switch acl.PatternType {
			case PatternLiteral:
				if acl.ResourceName == Wildcard {
					return true
				}
				allowLiteral = append(allowLiteral, acl.ResourceName)
			case PatternPrefixed:
				allowPrefix = append(allowPrefix, acl.ResourceName)
			}
		}
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// Operations returns, of ops, the ones r may perform on the resource, as
// KIP-430's authorized operations: a bit field with bit n set for the
// operation of code n (Kafka's Utils.to32BitField).
func (a *Authorizer) Operations(r Request, rt ResourceType, name string, ops []Operation) int32 {
	var bits int32
	for _, op := range ops {
		if a.Authorize(r, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// Supported operations of each resource type, as Kafka's
// AclEntry.supportedOperations lists them for KIP-430 answers.
var (
	TopicOperations = []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter,
		OpDescribeConfigs, OpAlterConfigs}
	GroupOperations   = []Operation{OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs}
	ClusterOperations = []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs,
		OpIdempotentWrite, OpAlter, OpDescribe}
)

// aclIndex is an immutable snapshot of the ACLs, split by resource type.
type aclIndex struct {
	all    []ACL
	byType map[ResourceType]*typeIndex
}

// typeIndex holds one resource type's ACLs by pattern: literal ones by
// name (the '*' wildcard among them), prefixed ones in a list.
type typeIndex struct {
	all      []ACL
	literal  map[string][]ACL
	prefixed []ACL
}

func newIndex(acls []ACL) *aclIndex {
	ix := &aclIndex{all: acls, byType: map[ResourceType]*typeIndex{}}
	for _, acl := range acls {
		t := ix.byType[acl.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]ACL{}}
			ix.byType[acl.ResourceType] = t
		}
		t.all = append(t.all, acl)
		switch acl.PatternType {
		case PatternLiteral:
			t.literal[acl.ResourceName] = append(t.literal[acl.ResourceName], acl)
		case PatternPrefixed:
			t.prefixed = append(t.prefixed, acl)
		}
	}
	return ix
}

// decide is StandardAuthorizerData.findAclRule: DENY wins over ALLOW;
// with neither, any ACL on the resource denies, and none gives the
// default.
func (ix *aclIndex) decide(r Request, op Operation, rt ResourceType, name string, dflt bool) (bool, *ACL) {
	t := ix.byType[rt]
	if t == nil {
		return dflt, nil
	}
	found := false
	var allow *ACL
	// check returns the DENY entry that matched, which settles it.
	check := func(acls []ACL) *ACL {
		for i, acl := range acls {
			found = true
			switch matchEntry(acl, r, op) {
			case PermissionDeny:
				return &acls[i]
			case PermissionAllow:
				if allow == nil {
					allow = &acls[i]
				}
			}
		}
		return nil
	}
	if d := check(t.literal[name]); d != nil {
		return false, d
	}
	for i := range t.prefixed {
		if strings.HasPrefix(name, t.prefixed[i].ResourceName) {
			if d := check(t.prefixed[i : i+1]); d != nil {
				return false, d
			}
		}
	}
	if name != Wildcard {
		if d := check(t.literal[Wildcard]); d != nil {
			return false, d
		}
	}
	switch {
	case allow != nil:
		return true, allow
	case found:
		return false, nil
	default:
		return dflt, nil
	}
}

// matchEntry is StandardAuthorizerData.findResult: the permission of acl
// if it applies to r and op, else PermissionUnknown. An ALLOW entry for
// READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one for
// ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY entry denies only its own
// operation (or all of them).
func matchEntry(acl ACL, r Request, op Operation) Permission {
	if acl.Principal != r.Principal && acl.Principal != wildcardPrincipal {
		return PermissionUnknown
	}
	if acl.Host != Wildcard && acl.Host != r.Host {
		return PermissionUnknown
	}
	if acl.Operation != OpAll {
		if acl.Permission == PermissionAllow {
			switch op {
			case OpDescribe:
				switch acl.Operation {
				case OpDescribe, OpRead, OpWrite, OpDelete, OpAlter:
				default:
					return PermissionUnknown
				}
			case OpDescribeConfigs:
				if acl.Operation != OpDescribeConfigs && acl.Operation != OpAlterConfigs {
					return PermissionUnknown
				}
			default:
				if acl.Operation != op {
					return PermissionUnknown
				}
			}
		} else if acl.Operation != op {
			return PermissionUnknown
		}
	}
	return acl.Permission
}
