package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func aclCommand() *command {
	const long = `Principals are User:NAME or User:* (every user). A resource is a --topic, --group,
--transactional-id or the --cluster; a name may be * (every one), or a prefix with
--resource-pattern-type prefixed. Operations are Kafka's: All, Read, Write, Create,
Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite.
The broker needs an authorizer (authorizer.class.name); see docs/security.md.`
	return &command{name: "acl", aliases: []string{"acls"}, short: "create, list and delete ACLs", sub: []*command{
		{name: "create", aliases: []string{"add"}, run: aclCreate, long: long,
			short: "add ALLOW or DENY entries for principals on resources",
			examples: `  gregor acl create --allow-principal User:alice --operation Write --operation Describe --topic orders
  gregor acl create --allow-principal User:bob --operation Read --group app- --resource-pattern-type prefixed
  gregor acl create --deny-principal User:mallory --deny-host 10.0.0.9 --operation All --topic '*'
  gregor acl create --allow-principal User:ops --operation Alter --cluster`},
		{name: "list", aliases: []string{"ls", "describe"}, run: aclList, long: long,
			short: "list the ACLs matching a filter (every ACL without one)",
			examples: `  gregor acl list
  gregor acl list --topic orders --resource-pattern-type match
  gregor acl list --principal User:alice --json`},
		{name: "delete", aliases: []string{"remove", "rm"}, run: aclDelete, long: long,
			short: "delete the ACLs matching a filter, and print them",
			examples: `  gregor acl delete --allow-principal User:alice --operation Write --topic orders
  gregor acl delete --principal User:bob --resource-pattern-type any --group '*'`},
	}}
}

// aclFlags are the kafka-acls flags a command was given.
type aclFlags struct {
	allow, deny, principal []string
	allowHosts, denyHosts  []string
	ops                    []string
	topics, groups, txnIDs []string
	cluster                bool
	pattern                string
}

func (c *cmd) aclFlags(filter bool, defPattern string) *aclFlags {
	f := &aclFlags{}
	c.listVar(&f.allow, "allow-principal", "", "a `principal` (User:NAME) the entries ALLOW (repeatable)")
	c.listVar(&f.deny, "deny-principal", "", "a `principal` (User:NAME) the entries DENY (repeatable)")
	if filter {
		c.listVar(&f.principal, "principal", "", "match ALLOW and DENY entries of this `principal` (repeatable)")
	}
	c.listVar(&f.allowHosts, "allow-host", "", "a `host` the ALLOW entries apply to (default * when creating; repeatable)")
	c.listVar(&f.denyHosts, "deny-host", "", "a `host` the DENY entries apply to (default * when creating; repeatable)")
	c.listVar(&f.ops, "operation", "", "an `operation` (Read, Write, Describe, All, ...; repeatable)")
	c.listVar(&f.topics, "topic", "", "a topic `name`, * or a prefix (repeatable)")
	c.listVar(&f.groups, "group", "", "a group `name`, * or a prefix (repeatable)")
	c.listVar(&f.txnIDs, "transactional-id", "", "a transactional `id`, * or a prefix (repeatable)")
	c.fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	c.fs.StringVar(&f.pattern, "resource-pattern-type", defPattern, "`literal|prefixed` (and match|any to filter)")
	return f
}

// builder turns the flags into kadm's ACL builder. A filter matches any
// resource, principal and operation it was not narrowed to.
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || pattern == kmsg.ACLResourcePatternTypeUnknown || (!filter && pattern != kmsg.ACLResourcePatternTypeLiteral && pattern != kmsg.ACLResourcePatternTypePrefixed) {
		return nil, usagef("--resource-pattern-type %q is not literal or prefixed (or, for list and delete, match or any)", f.pattern)
	}
	b.ResourcePatternType(pattern)
	var ops []kadm.ACLOperation
	for _, s := range f.ops {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown || (!filter && op == kmsg.ACLOperationAny) {
			return nil, usagef("--operation %q is not one of All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite", s)
		}
		ops = append(ops, op)
	}
	for _, p := range slices.Concat(f.allow, f.deny, f.principal) {
		if !strings.Contains(p, ":") {
			return nil, usagef("principal %q is not TYPE:NAME (User:alice)", p)
		}
	}
	hasResource := len(f.topics) > 0 || len(f.groups) > 0 || len(f.txnIDs) > 0 || f.cluster
	if len(f.topics) > 0 {
		b.Topics(f.topics...)
	}
	if len(f.groups) > 0 {
		b.Groups(f.groups...)
	}
	if len(f.txnIDs) > 0 {
		b.TransactionalIDs(f.txnIDs...)
	}
	if f.cluster {
		b.Clusters()
	}
	if !filter {
		if len(f.allow)+len(f.deny) == 0 {
			return nil, usagef("give --allow-principal or --deny-principal")
		}
		if len(ops) == 0 {
			return nil, usagef("give --operation")
		}
		if !hasResource {
			return nil, usagef("give a resource: --topic, --group, --transactional-id or --cluster")
		}
		if len(f.allowHosts) > 0 && len(f.allow) == 0 || len(f.denyHosts) > 0 && len(f.deny) == 0 {
			return nil, usagef("--allow-host needs --allow-principal, --deny-host needs --deny-principal")
		}
		b.MaybeAllow(f.allow...).MaybeAllowHosts(f.allowHosts...).MaybeDeny(f.deny...).MaybeDenyHosts(f.denyHosts...)
		b.Operations(ops...)
		return b, nil
	}
	if !hasResource {
		b.AnyResource()
	}
	allow, deny := slices.Concat(f.allow, f.principal), slices.Concat(f.deny, f.principal)
	switch {
	case len(allow)+len(deny) == 0:
		b.Allow().Deny()
	default:
		b.MaybeAllow(allow...).MaybeDeny(deny...)
	}
	// A filter without hosts matches any host (kadm's empty AllowHosts,
	// not MaybeAllowHosts, which would match none).
	if len(f.allowHosts) > 0 {
		b.MaybeAllowHosts(f.allowHosts...)
	} else {
		b.AllowHosts()
	}
	if len(f.denyHosts) > 0 {
		b.MaybeDenyHosts(f.denyHosts...)
	} else {
		b.DenyHosts()
	}
	b.Operations(ops...)
	return b, nil
}

// aclRow is one ACL in tables and JSON.
type aclRow struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Error        string `json:"error,omitempty"`
}

var aclHeader = []string{"PRINCIPAL", "HOST", "RESOURCE", "NAME", "PATTERN", "OPERATION", "PERMISSION"}

func (r aclRow) cells() []string {
	return []string{r.Principal, r.Host, r.ResourceType, r.Name, r.PatternType, r.Operation, r.Permission}
}

func newACLRow(principal, host string, typ kmsg.ACLResourceType, name string, pattern kadm.ACLPattern, op kadm.ACLOperation, perm kmsg.ACLPermissionType) aclRow {
	return aclRow{Principal: principal, Host: host, ResourceType: typ.String(), Name: name,
		PatternType: pattern.String(), Operation: op.String(), Permission: perm.String()}
}

func aclCreate(c *cmd) error {
	f := c.aclFlags(false, "literal")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	b, err := f.builder(false)
	if err != nil {
		return usagef("%s: %v", c.path, err)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	res, err := adm.CreateACLs(c.context(), b)
	if err != nil {
		return fmt.Errorf("create ACLs: %w", err)
	}
	rows, out := [][]string{}, []aclRow{}
	failed := 0
	for _, r := range res {
		row := newACLRow(r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission)
		row.Error = jsonErr(r.Err, r.ErrMessage)
		if r.Err != nil {
			failed++
		}
		rows = append(rows, append(row.cells(), errText(r.Err, r.ErrMessage)))
		out = append(out, row)
	}
	return c.report(append(slices.Clone(aclHeader), "STATUS"), rows, out, failed, "ACLs")
}

func aclList(c *cmd) error {
	f := c.aclFlags(true, "any")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	b, err := f.builder(true)
	if err != nil {
		return usagef("%s: %v", c.path, err)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	res, err := adm.DescribeACLs(c.context(), b)
	if err != nil {
		return fmt.Errorf("describe ACLs: %w", err)
	}
	var rows []aclRow
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("describe ACLs: %s", errText(r.Err, r.ErrMessage))
		}
		for _, d := range r.Described {
			rows = append(rows, newACLRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission))
		}
	}
	return c.printACLs(dedupACLs(rows))
}

func aclDelete(c *cmd) error {
	f := c.aclFlags(true, "literal")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	if len(f.topics)+len(f.groups)+len(f.txnIDs)+len(f.allow)+len(f.deny)+len(f.principal) == 0 && !f.cluster {
		return usagef("%s: give a resource or a principal; use --topic '*' --resource-pattern-type any and so on to delete widely", c.path)
	}
	b, err := f.builder(true)
	if err != nil {
		return usagef("%s: %v", c.path, err)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	res, err := adm.DeleteACLs(c.context(), b)
	if err != nil {
		return fmt.Errorf("delete ACLs: %w", err)
	}
	var rows []aclRow
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("delete ACLs: %s", errText(r.Err, r.ErrMessage))
		}
		for _, d := range r.Deleted {
			row := newACLRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
			row.Error = jsonErr(d.Err, d.ErrMessage)
			rows = append(rows, row)
		}
	}
	return c.printACLs(dedupACLs(rows))
}

// dedupACLs sorts the rows and drops the repeats that several filters
// (one per resource type and permission) matched.
func dedupACLs(rows []aclRow) []aclRow {
	slices.SortFunc(rows, func(a, b aclRow) int {
		return strings.Compare(strings.Join(a.cells(), "\x00"), strings.Join(b.cells(), "\x00"))
	})
	return slices.CompactFunc(rows, func(a, b aclRow) bool { return slices.Equal(a.cells(), b.cells()) })
}

func (c *cmd) printACLs(rows []aclRow) error {
	if c.json {
		if rows == nil {
			rows = []aclRow{}
		}
		return c.printJSON(rows)
	}
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, r.cells())
	}
	return c.table(aclHeader, cells)
}
