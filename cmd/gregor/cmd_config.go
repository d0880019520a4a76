package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

func configCommand() *command {
	return &command{name: "config", aliases: []string{"configs"}, short: "read and change broker and topic configs", sub: []*command{
		{name: "get", args: "[NAME...]", run: configGet,
			short: "show the configs of a broker, the cluster-wide broker defaults, or a topic, with their sources",
			examples: `  gregor config get --broker 1
  gregor config get --broker-defaults log.retention.ms
  gregor config get --topic orders retention.ms cleanup.policy --json`},
		{name: "set", args: "NAME=VALUE...", run: configSet,
			short: "set or remove configs of a broker, the broker defaults or a topic (IncrementalAlterConfigs)",
			examples: `  gregor config set --topic orders retention.ms=3600000
  gregor config set --broker 1 log.cleaner.threads=2
  gregor config set --broker-defaults --delete-config log.retention.ms`},
	}}
}

// configTarget is the resource a config command acts on, as
// kafka-configs' --broker, --broker-defaults and --topic (or
// --entity-type and --entity-name).
type configTarget struct {
	broker, topic, entityType, entityName string
	defaults                              bool
}

func (t *configTarget) flags(c *cmd) {
	c.stringVar(&t.broker, "broker", "", "", "the broker `id`")
	c.boolVar(&t.defaults, "broker-defaults", "", false, "the cluster-wide broker defaults")
	c.stringVar(&t.topic, "topic", "", "", "the `topic`")
	c.stringVar(&t.entityType, "entity-type", "", "", "brokers or topics, with --entity-name (as kafka-configs)")
	c.stringVar(&t.entityName, "entity-name", "", "", "the broker id or topic `name`; a broker type without it is the defaults")
}

// resolve returns the kind ("broker" or "topic") and the name ("" for
// the broker defaults).
func (t *configTarget) resolve() (kind, name string, err error) {
	switch t.entityType {
	case "":
	case "brokers", "broker":
		if t.entityName == "" {
			t.defaults = true
		}
		t.broker = t.entityName
	case "topics", "topic":
		t.topic = t.entityName
	default:
		return "", "", usagef("--entity-type %q: want brokers or topics", t.entityType)
	}
	given := 0
	for _, set := range []bool{t.broker != "", t.defaults, t.topic != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return "", "", usagef("give one of --broker ID, --broker-defaults or --topic T")
	}
	if t.topic != "" {
		return "topic", t.topic, nil
	}
	return "broker", t.broker, nil
}

func brokerIDs(name string) ([]int32, error) {
	if name == "" {
		return nil, nil // the cluster-wide defaults
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return nil, usagef("broker %q is not a node id", name)
	}
	return []int32{int32(id)}, nil
}

func configGet(c *cmd) error {
	var t configTarget
	t.flags(c)
	if err := c.parse(0, -1); err != nil {
		return err
	}
	kind, name, err := t.resolve()
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var rcs kadm.ResourceConfigs
	if kind == "topic" {
		rcs, err = adm.DescribeTopicConfigs(c.context(), name)
	} else {
		ids, idErr := brokerIDs(name)
		if idErr != nil {
			return idErr
		}
		rcs, err = adm.DescribeBrokerConfigs(c.context(), ids...)
	}
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	entries, err := configEntries(rcs, name)
	if err != nil {
		return err
	}
	if len(c.args) > 0 {
		entries = slices.DeleteFunc(entries, func(e configEntry) bool { return !slices.Contains(c.args, e.Name) })
		if len(entries) == 0 {
			return fmt.Errorf("no config named %v on %s %s", c.args, kind, dash(name))
		}
	}
	if c.json {
		return c.printJSON(entries)
	}
	return c.table([]string{"KEY", "VALUE", "SOURCE"}, configRows(entries))
}

func configSet(c *cmd) error {
	var t configTarget
	var set, del []string
	t.flags(c)
	c.listVar(&set, "add-config", "", "set `name=value` (repeatable; positional NAME=VALUE works too)")
	c.listVar(&del, "delete-config", "", "remove a config by `name`, back to its default (repeatable)")
	if err := c.parse(0, -1); err != nil {
		return err
	}
	kind, name, err := t.resolve()
	if err != nil {
		return err
	}
	alter, err := alterations(append(set, c.args...), del)
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var resp kadm.AlterConfigsResponses
	if kind == "topic" {
		resp, err = adm.AlterTopicConfigs(c.context(), alter, name)
	} else {
		ids, idErr := brokerIDs(name)
		if idErr != nil {
			return idErr
		}
		resp, err = adm.AlterBrokerConfigs(c.context(), alter, ids...)
	}
	if err != nil {
		return fmt.Errorf("alter configs: %w", err)
	}
	return c.reportAltered(resp, "RESOURCE")
}
