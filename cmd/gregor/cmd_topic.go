package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicCommand is `gregor topic`: topics, as kafka-topics and rpk topic.
func topicCommand() *command {
	return &command{name: "topic", aliases: []string{"topics"}, short: "create, list, describe, alter and delete topics", sub: []*command{
		{name: "create", argFlag: "topic", args: "TOPIC...", run: topicCreate, short: "create topics",
			examples: `  gregor topic create orders -p 3 -r 1
  gregor topic create logs -c retention.ms=86400000 -c cleanup.policy=delete
  gregor topic create a b c --if-not-exists -b broker1:9092`},
		{name: "list", aliases: []string{"ls"}, args: "", run: topicList, short: "list topics with their partition and replica counts",
			examples: `  gregor topic list
  gregor topic list --internal --json`},
		{name: "describe", argFlag: "topic", args: "TOPIC...", run: topicDescribe, short: "show a topic's configs (with their sources) and partitions (leaders, replicas, ISR, offsets, sizes)",
			examples: `  gregor topic describe orders
  gregor topic describe orders --json | jq '.[0].partitions'`},
		{name: "alter-config", argFlag: "topic", args: "TOPIC...", run: topicAlterConfig, short: "set or remove topic configs (IncrementalAlterConfigs)",
			examples: `  gregor topic alter-config orders --add-config retention.ms=3600000
  gregor topic alter-config orders --delete-config retention.ms`},
		{name: "add-partitions", argFlag: "topic", args: "TOPIC...", run: topicAddPartitions, short: "grow topics to --partitions N in all, or by -n N more",
			examples: `  gregor topic add-partitions orders --partitions 6
  gregor topic add-partitions orders -n 2`},
		{name: "delete", argFlag: "topic", args: "TOPIC...", run: topicDelete, short: "delete topics",
			examples: `  gregor topic delete orders
  gregor topic delete a b c`},
		{name: "trim-prefix", argFlag: "topic", args: "TOPIC", run: topicTrimPrefix, short: "delete the records before an offset (DeleteRecords)",
			examples: `  gregor topic trim-prefix orders --offset 1000            # every partition
  gregor topic trim-prefix orders --offset 1000 -p 0,2
  gregor topic trim-prefix orders --offset end              # everything written so far`},
	}}
}

func topicCreate(c *cmd) error {
	var partitions, replicas int
	var configs []string
	var ifNotExists bool
	c.intVar(&partitions, "partitions", "p", -1, "partitions per topic (-1: the broker's num.partitions)")
	c.intVar(&replicas, "replication-factor", "r", -1, "replicas per partition (-1: the broker's default.replication.factor)")
	c.listVar(&configs, "config", "c", "a topic config `name=value` (repeatable)")
	c.boolVar(&ifNotExists, "if-not-exists", "", false, "succeed when a topic already exists")
	if err := c.parse(1, -1); err != nil {
		return err
	}
	cfg, err := parseConfigPairs(configs)
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	resp, err := adm.CreateTopics(c.context(), int32(partitions), int16(replicas), cfg, c.args...)
	if err != nil {
		return err
	}
	type created struct {
		Topic             string `json:"topic"`
		ID                string `json:"id,omitempty"`
		Partitions        int32  `json:"partitions"`
		ReplicationFactor int16  `json:"replication_factor"`
		Error             string `json:"error,omitempty"`
	}
	var rows [][]string
	var out []created
	failed := 0
	for _, r := range resp.Sorted() {
		if r.Err != nil && !(ifNotExists && errors.Is(r.Err, kerr.TopicAlreadyExists)) {
			failed++
		} else {
			r.Err = nil
		}
		rows = append(rows, []string{r.Topic, itoa(r.NumPartitions), itoa(r.ReplicationFactor), errText(r.Err, r.ErrMessage)})
		out = append(out, created{r.Topic, r.ID.String(), r.NumPartitions, r.ReplicationFactor, jsonErr(r.Err, r.ErrMessage)})
	}
	return c.report([]string{"TOPIC", "PARTITIONS", "REPLICAS", "STATUS"}, rows, out, failed, "topics")
}

func topicList(c *cmd) error {
	var internal bool
	c.boolVar(&internal, "internal", "i", false, "include internal topics (__consumer_offsets, ...)")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	list := adm.ListTopics
	if internal {
		list = adm.ListTopicsWithInternal
	}
	topics, err := list(c.context())
	if err != nil {
		return err
	}
	type listed struct {
		Topic      string `json:"topic"`
		ID         string `json:"id"`
		Partitions int    `json:"partitions"`
		Replicas   int    `json:"replicas"`
		Internal   bool   `json:"internal"`
	}
	out := []listed{}
	var rows [][]string
	for _, t := range topics.Sorted() {
		out = append(out, listed{t.Topic, t.ID.String(), len(t.Partitions), t.Partitions.NumReplicas(), t.IsInternal})
		rows = append(rows, []string{t.Topic, strconv.Itoa(len(t.Partitions)), strconv.Itoa(t.Partitions.NumReplicas())})
	}
	if c.json {
		return c.printJSON(out)
	}
	return c.table([]string{"NAME", "PARTITIONS", "REPLICAS"}, rows)
}

func topicAlterConfig(c *cmd) error {
	var set, del []string
	c.listVar(&set, "add-config", "s", "set a config, `name=value` (repeatable)")
	c.listVar(&del, "delete-config", "d", "remove a config, back to its default, by `name` (repeatable)")
	if err := c.parse(1, -1); err != nil {
		return err
	}
	alter, err := alterations(set, del)
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	resp, err := adm.AlterTopicConfigs(c.context(), alter, c.args...)
	if err != nil {
		return err
	}
	return c.reportAltered(resp, "TOPIC")
}

// alterations turns --add-config and --delete-config into incremental
// config changes.
func alterations(set, del []string) ([]kadm.AlterConfig, error) {
	if len(set) == 0 && len(del) == 0 {
		return nil, usagef("give --add-config name=value or --delete-config name")
	}
	pairs, err := parseConfigPairs(set)
	if err != nil {
		return nil, err
	}
	var out []kadm.AlterConfig
	for _, name := range slices.Sorted(maps.Keys(pairs)) {
		out = append(out, kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: pairs[name]})
	}
	for _, name := range del {
		out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
	}
	return out, nil
}

// reportAltered prints the per-resource result of an alter-configs call.
func (c *cmd) reportAltered(resp kadm.AlterConfigsResponses, kind string) error {
	type altered struct {
		Name  string `json:"name"`
		Error string `json:"error,omitempty"`
	}
	var rows [][]string
	out := []altered{}
	failed := 0
	for _, r := range resp {
		if r.Err != nil {
			failed++
		}
		rows = append(rows, []string{r.Name, errText(r.Err, r.ErrMessage)})
		out = append(out, altered{r.Name, jsonErr(r.Err, r.ErrMessage)})
	}
	return c.report([]string{kind, "STATUS"}, rows, out, failed, "changes")
}

func topicAddPartitions(c *cmd) error {
	var total, add int
	c.intVar(&total, "partitions", "", 0, "the number of partitions each topic should have in all")
	c.intVar(&add, "num", "n", 0, "how many partitions to add to each topic")
	if err := c.parse(1, -1); err != nil {
		return err
	}
	if (total > 0) == (add > 0) {
		return usagef("%s: give one of --partitions N (in all) or -n N (to add)", c.path)
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var resp kadm.CreatePartitionsResponses
	if total > 0 {
		resp, err = adm.UpdatePartitions(c.context(), total, c.args...)
	} else {
		resp, err = adm.CreatePartitions(c.context(), add, c.args...)
	}
	if err != nil {
		return err
	}
	var res []outcome
	for _, r := range resp.Sorted() {
		res = append(res, outcome{r.Topic, r.Err, r.ErrMessage})
	}
	return c.reportOutcomes("topic", res)
}

func topicDelete(c *cmd) error {
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	resp, err := adm.DeleteTopics(c.context(), c.args...)
	if err != nil {
		return err
	}
	var res []outcome
	for _, r := range resp.Sorted() {
		res = append(res, outcome{r.Topic, r.Err, r.ErrMessage})
	}
	return c.reportOutcomes("topic", res)
}

func topicTrimPrefix(c *cmd) error {
	var offset string
	var parts []string
	c.stringVar(&offset, "offset", "o", "", "delete the records below this `offset`, or \"end\" for all records written so far")
	c.listVar(&parts, "partitions", "p", "the `partitions` to trim, as 0,2 (default all)")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	at := int64(-1) // DeleteRecords' -1 is the high watermark
	if offset != "end" {
		n, err := strconv.ParseInt(offset, 10, 64)
		if err != nil || n < 0 {
			return usagef("%s: --offset must be an offset or \"end\", got %q", c.path, offset)
		}
		at = n
	}
	ps, err := parsePartitions(parts)
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	topic := c.args[0]
	if len(ps) == 0 {
		ps, err = topicPartitions(c, adm, topic)
		if err != nil {
			return err
		}
	}
	var req kadm.Offsets
	for _, p := range ps {
		req.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
	}
	resp, err := adm.DeleteRecords(c.context(), req)
	if err != nil {
		return err
	}
	return c.reportTrimmed(resp, topic, ps)
}

func (c *cmd) reportTrimmed(resp kadm.DeleteRecordsResponses, topic string, ps []int32) error {
	type trimmed struct {
		Topic          string `json:"topic"`
		Partition      int32  `json:"partition"`
		LogStartOffset int64  `json:"log_start_offset"`
		Error          string `json:"error,omitempty"`
	}
	var rows [][]string
	out := []trimmed{}
	failed := 0
	for _, p := range ps {
		r, ok := resp.Lookup(topic, p)
		if !ok {
			r.Err = errNoAnswer
		}
		if r.Err != nil {
			failed++
		}
		rows = append(rows, []string{topic, itoa(p), itoa(r.LowWatermark), errText(r.Err, "")})
		out = append(out, trimmed{topic, p, r.LowWatermark, jsonErr(r.Err, "")})
	}
	return c.report([]string{"TOPIC", "PARTITION", "LOG-START-OFFSET", "STATUS"}, rows, out, failed, "partitions")
}

// topicPartitions returns the partition numbers of topic.
func topicPartitions(c *cmd, adm *kadm.Client, topic string) ([]int32, error) {
	ts, err := adm.ListTopicsWithInternal(c.context(), topic)
	if err != nil {
		return nil, err
	}
	td, ok := ts[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, cmp.Or(td.Err, errNoAnswer))
	}
	return td.Partitions.Numbers(), nil
}
