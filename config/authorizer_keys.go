package config

import "strings"

// StandardAuthorizer is the one authorizer.class.name Gregor serves:
// Kafka's KRaft authorizer, whose ACLs live in the metadata log.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// Authorizer is the authorization part of a broker's configuration.
type Authorizer struct {
	// ClassName is authorizer.class.name: "" (no authorizer, everyone
	// may do everything) or StandardAuthorizer.
	ClassName string
	// SuperUsers is super.users as written ("User:a;User:b").
	SuperUsers string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
}

// Enabled reports whether an authorizer is configured.
func (a Authorizer) Enabled() bool { return a.ClassName != "" }

// authorizerClass refuses any authorizer but Kafka's StandardAuthorizer:
// another class (a Java plug-in, or ZooKeeper's AclAuthorizer) would
// decide who may do what by rules Gregor cannot run, and serving without
// it would let everyone in.
func authorizerClass(name, raw string, v value) error {
	s := strings.TrimSpace(v.s)
	if s == "" || s == StandardAuthorizer {
		return nil
	}
	return invalid(name, raw, "not supported: gregor serves only %s (ACLs in the metadata log); no other authorizer class can run", StandardAuthorizer)
}

// authorizerKeys are the authorizer's properties: Kafka's
// authorizer.class.name and the two StandardAuthorizer reads.
var authorizerKeys = []brokerKey{
	{name: "authorizer.class.name", typ: TypeString, dflt: "", check: authorizerClass,
		doc: "The authorizer: empty (none: every principal may do everything, and the ACL APIs answer SECURITY_DISABLED) or " + StandardAuthorizer + "; any other class is refused at start.",
		set: func(b *Broker, v value) { b.Authorizer.ClassName = strings.TrimSpace(v.s) }},
	{name: "super.users", typ: TypeString, null: true,
		doc: "Principals, separated by ';' (User:admin;User:ops), that the authorizer allows everything whatever the ACLs say.",
		set: func(b *Broker, v value) { b.Authorizer.SuperUsers = v.s }},
	{name: "allow.everyone.if.no.acl.found", typ: TypeBoolean, dflt: "false",
		doc: "Whether the authorizer allows an operation on a resource that no ACL names; with false (Kafka's default) only ACLs and super users allow.",
		set: func(b *Broker, v value) { b.Authorizer.AllowEveryoneIfNoACLFound = v.b }},
}
