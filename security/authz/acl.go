// Package authz decides whether a principal may perform an operation on a
// resource, with the semantics of Kafka's StandardAuthorizer
// (org.apache.kafka.metadata.authorizer): ACLs of literal and prefixed
// resource patterns and the '*' wildcard, ALLOW and DENY entries with
// DENY winning, host matching, operations that imply DESCRIBE and
// DESCRIBE_CONFIGS, super users and allow.everyone.if.no.acl.found. It
// holds no connection or metadata state of its own: the broker hands it the
// ACLs of the metadata image and asks it questions.
package authz

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's ResourceType, by its wire code.
type ResourceType int8

// Kafka's resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's PatternType, by its wire code. ANY and MATCH are
// for filters only.
type PatternType int8

// Kafka's pattern types.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation, by its wire code.
type Operation int8

// Kafka's operations.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// Permission is Kafka's AclPermissionType, by its wire code.
type Permission int8

// Kafka's permission types.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcard is the resource name, principal name and host that match any.
const Wildcard = "*"

// ClusterName is the only name of the cluster resource.
const ClusterName = "kafka-cluster"

// wildcardPrincipal is Kafka's WILDCARD_KAFKA_PRINCIPAL, "User:*".
const wildcardPrincipal = "User:*"

// ACL is one access control entry bound to a resource pattern, Kafka's
// AclBinding (and StandardAcl).
type ACL struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	// Principal is "Type:name", e.g. "User:alice" or "User:*".
	Principal  string
	Host       string
	Operation  Operation
	Permission Permission
}

// String writes the ACL as Kafka's tools list it, for logs and errors.
func (a ACL) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
}

// Filter selects ACLs, Kafka's AclBindingFilter. A nil name, principal
// or host matches any; ResourceAny, PatternAny, OpAny and PermissionAny
// match any value; PatternMatch matches the literal, wildcard and
// prefixed patterns that would apply to the named resource.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether the filter selects a, as Kafka's
// AclBindingFilter.matches does.
func (f Filter) Matches(a ACL) bool {
	return f.matchesPattern(a) && f.matchesEntry(a)
}

func (f Filter) matchesPattern(a ACL) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != a.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType == PatternAny || f.PatternType == a.PatternType {
		return name == a.ResourceName
	}
	switch a.PatternType {
	case PatternLiteral:
		return name == a.ResourceName || a.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	default:
		return false
	}
}

func (f Filter) matchesEntry(a ACL) bool {
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != a.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == a.Permission
}

// HasUnknown reports whether a field of the filter is UNKNOWN (or a code
// Kafka does not know, which it reads as UNKNOWN): Kafka refuses such a
// request as malformed.
func (f Filter) HasUnknown() bool {
	return !f.ResourceType.known() || !f.PatternType.known() || !f.Operation.known() || !f.Permission.known()
}

// HasUnknown reports whether a field of the ACL is UNKNOWN or not a code
// Kafka knows.
func (a ACL) HasUnknown() bool {
	return !a.ResourceType.known() || !a.PatternType.known() || !a.Operation.known() || !a.Permission.known()
}

// Validate checks a new ACL as Kafka's broker (AclApis) and controller
// (AclControlManager.validateNewAcl) do; the error's text is Kafka's
// message, to be answered with INVALID_REQUEST.
func (a ACL) Validate() error {
	switch {
	case a.ResourceType == ResourceCluster && a.ResourceName != ClusterName:
		return fmt.Errorf("The only valid name for the CLUSTER resource is %s", ClusterName)
	case a.ResourceName == "":
		return fmt.Errorf("Invalid empty resource name")
	case a.ResourceType == ResourceAny || !a.ResourceType.known():
		return fmt.Errorf("Invalid resourceType %s", a.ResourceType)
	case a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed:
		return fmt.Errorf("Invalid patternType %s", a.PatternType)
	case a.Operation == OpAny || !a.Operation.known():
		return fmt.Errorf("Invalid operation %s", a.Operation)
	case a.Permission != PermissionAllow && a.Permission != PermissionDeny:
		return fmt.Errorf("Invalid permissionType %s", a.Permission)
	}
	if _, _, ok := strings.Cut(a.Principal, ":"); !ok {
		return fmt.Errorf("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", a.Principal)
	}
	return nil
}

func (t ResourceType) known() bool { return t > ResourceUnknown && t <= ResourceUser }
func (t PatternType) known() bool  { return t > PatternUnknown && t <= PatternPrefixed }
func (o Operation) known() bool    { return o > OpUnknown && o <= OpTwoPhaseCommit }
func (p Permission) known() bool   { return p > PermissionUnknown && p <= PermissionAllow }

var resourceNames = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
var patternNames = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
var operationNames = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}
var permissionNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func nameOf(names []string, code int8) string {
	if code >= 0 && int(code) < len(names) {
		return names[code]
	}
	return "UNKNOWN"
}

// String returns Kafka's name of the resource type.
func (t ResourceType) String() string { return nameOf(resourceNames, int8(t)) }

// String returns Kafka's name of the pattern type.
func (t PatternType) String() string { return nameOf(patternNames, int8(t)) }

// String returns Kafka's name of the operation.
func (o Operation) String() string { return nameOf(operationNames, int8(o)) }

// String returns Kafka's name of the permission type.
func (p Permission) String() string { return nameOf(permissionNames, int8(p)) }
