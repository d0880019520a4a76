package main

import (
	"fmt"
	"strconv"
	"strings"
)

// groupCommand is `gregor group`: consumer groups, as
// kafka-consumer-groups and rpk group. `gregor groups` is the same.
func groupCommand() *command {
	return &command{name: "group", aliases: []string{"groups"}, short: "list, describe, reset and delete consumer groups", sub: []*command{
		{name: "list", aliases: []string{"ls"}, args: "", run: groupList, short: "list groups with their type (classic or consumer) and state",
			examples: `  gregor group list
  gregor group list --json`},
		{name: "describe", argFlag: "group", args: "GROUP...", run: groupDescribe,
			short: "show members, assignments, committed offsets and lag per partition, with the total lag",
			examples: `  gregor group describe billing
  gregor group describe billing --json | jq .total_lag`},
		{name: "reset-offsets", argFlag: "group", args: "GROUP", run: groupResetOffsets,
			short: "move a group's committed offsets (a dry run unless --execute), as kafka-consumer-groups --reset-offsets",
			long: `Prints the plan: each partition's committed offset and the new one. Nothing
changes without --execute. The group must have no members (stop its
consumers first), as in Kafka. New offsets are kept between each
partition's log start and end offsets.

--topic T takes every partition of T; T:0,2 only those. --all-topics takes
the topics the group has committed offsets for.`,
			examples: `  gregor group reset-offsets billing --topic orders --to-earliest
  gregor group reset-offsets billing --topic orders:0,1 --to-offset 42 --execute
  gregor group reset-offsets billing --all-topics --shift-by -10 --execute
  gregor group reset-offsets billing --topic orders --to-datetime 2026-12-01T10:00:00Z --execute`},
		{name: "seek", argFlag: "group", args: "GROUP", run: groupSeek,
			short: "move a group's offsets at once, as rpk group seek: --to start|end|N|@TIME",
			examples: `  gregor group seek billing --to start
  gregor group seek billing --to @1h --topic orders`},
		{name: "delete", argFlag: "group", args: "GROUP...", run: groupDelete, short: "delete groups that have no members, with their offsets",
			examples: `  gregor group delete billing old-billing`},
		{name: "delete-offsets", argFlag: "group", args: "GROUP", run: groupDeleteOffsets, short: "delete a group's committed offsets for topics or partitions",
			examples: `  gregor group delete-offsets billing --topic orders
  gregor group delete-offsets billing --topic orders:0,1`},
	}}
}

func groupList(c *cmd) error {
	if err := c.parse(0, 0); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	listed, err := adm.ListGroups(c.context())
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	type group struct {
		Group        string `json:"group"`
		Type         string `json:"type"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Coordinator  int32  `json:"coordinator"`
	}
	out := []group{}
	var rows [][]string
	for _, g := range listed.Sorted() {
		out = append(out, group{g.Group, g.GroupType, g.State, g.ProtocolType, g.Coordinator})
		rows = append(rows, []string{g.Group, dash(g.GroupType), dash(g.State), dash(g.ProtocolType)})
	}
	if c.json {
		return c.printJSON(out)
	}
	return c.table([]string{"GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"}, rows)
}

// groupJSON is `group describe --json`.
type groupJSON struct {
	Group      string         `json:"group"`
	State      string         `json:"state"`
	Members    int            `json:"members"`
	TotalLag   int64          `json:"total_lag"`
	Partitions []groupJSONRow `json:"partitions"`
}

type groupJSONRow struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"`
	LogEndOffset  *int64 `json:"log_end_offset"`
	Lag           *int64 `json:"lag"`
	MemberID      string `json:"member_id,omitempty"`
	Host          string `json:"host,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
}

func groupDescribe(c *cmd) error {
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var all []groupJSON
	for i, name := range c.args {
		d, err := gatherGroup(c.context(), adm, name)
		if err != nil {
			return err
		}
		if d.state == "Dead" {
			return fmt.Errorf("consumer group %s does not exist", name)
		}
		j := groupAsJSON(d)
		if c.json {
			all = append(all, j)
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.out)
		}
		fmt.Fprintf(c.out, "GROUP %s  STATE %s  MEMBERS %d  TOTAL-LAG %d\n\n", d.name, d.state, len(d.members), j.TotalLag)
		if err := printGroup(c.out, d); err != nil {
			return err
		}
	}
	if c.json {
		return c.printJSON(all)
	}
	return nil
}

func groupAsJSON(d describedGroup) groupJSON {
	j := groupJSON{Group: d.name, State: d.state, Members: len(d.members), Partitions: []groupJSONRow{}}
	for _, r := range groupRows(d) {
		row := groupJSONRow{Topic: r.topic, Partition: r.partition, CurrentOffset: numberOrNil(r.current),
			LogEndOffset: numberOrNil(r.logEnd), Lag: numberOrNil(r.lag)}
		if r.consumerID != "-" {
			row.MemberID, row.Host, row.ClientID = r.consumerID, r.host, r.clientID
		}
		if row.Lag != nil {
			j.TotalLag += *row.Lag
		}
		j.Partitions = append(j.Partitions, row)
	}
	return j
}

func numberOrNil(s string) *int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

func groupDelete(c *cmd) error {
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	resp, err := adm.DeleteGroups(c.context(), c.args...)
	if err != nil {
		return err
	}
	var res []outcome
	for _, r := range resp.Sorted() {
		res = append(res, outcome{r.Group, r.Err, r.ErrMessage})
	}
	return c.reportOutcomes("group", res)
}

func groupDeleteOffsets(c *cmd) error {
	var topics []string
	c.listVar(&topics, "topic", "t", "a `topic`, or topic:0,2 for some partitions (repeatable)")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	if len(topics) == 0 {
		return usagef("%s: give --topic", c.path)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	set, err := topicSelection(c, adm, topics)
	if err != nil {
		return err
	}
	resp, err := adm.DeleteOffsets(c.context(), c.args[0], set)
	if err != nil {
		return err
	}
	var rows [][]string
	out := []map[string]any{}
	failed := 0
	for _, tp := range sortedSelection(set) {
		err, ok := resp.Lookup(tp.topic, tp.partition)
		if !ok {
			err = errNoAnswer
		}
		if err != nil {
			failed++
		}
		rows = append(rows, []string{c.args[0], tp.topic, itoa(tp.partition), errText(err, "")})
		out = append(out, map[string]any{"group": c.args[0], "topic": tp.topic, "partition": tp.partition, "error": jsonErr(err, "")})
	}
	return c.report([]string{"GROUP", "TOPIC", "PARTITION", "STATUS"}, rows, out, failed, "partitions")
}

// splitTopicArg reads "topic" or "topic:0,2".
func splitTopicArg(s string) (string, []int32, error) {
	topic, list, ok := strings.Cut(s, ":")
	if topic == "" {
		return "", nil, usagef("%q names no topic", s)
	}
	if !ok {
		return topic, nil, nil
	}
	ps, err := parsePartitions([]string{list})
	return topic, ps, err
}
