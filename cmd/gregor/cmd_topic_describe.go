package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// topicDescription is what `topic describe` shows of one topic.
type topicDescription struct {
	Topic      string             `json:"topic"`
	ID         string             `json:"id"`
	Internal   bool               `json:"internal"`
	Partitions []partitionDetails `json:"partitions"`
	Configs    []configEntry      `json:"configs"`
}

// partitionDetails is one partition's row in `topic describe`.
type partitionDetails struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	SizeBytes      int64   `json:"size_bytes"` // the leader replica's, -1 if unknown
	Error          string  `json:"error,omitempty"`
}

// configEntry is one config of a topic or broker with where its value
// comes from (DescribeConfigs' source).
type configEntry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive"`
}

func topicDescribe(c *cmd) error {
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var out []topicDescription
	for _, t := range c.args {
		d, err := describeTopic(c, adm, t)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	if c.json {
		return c.printJSON(out)
	}
	for i, d := range out {
		if i > 0 {
			fmt.Fprintln(c.out)
		}
		if err := printTopic(c, d); err != nil {
			return err
		}
	}
	return nil
}

// describeTopic gathers a topic's metadata, offsets, sizes and configs.
func describeTopic(c *cmd, adm *kadm.Client, topic string) (topicDescription, error) {
	ctx := c.context()
	ts, err := adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return topicDescription{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := ts[topic]
	if !ok || td.Err != nil {
		return topicDescription{}, fmt.Errorf("topic %s: %w", topic, orNoAnswer(td.Err))
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return topicDescription{}, fmt.Errorf("log start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return topicDescription{}, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	// Each partition named: an empty set of partitions describes none.
	set := kadm.TopicsSet{}
	set.Add(topic, td.Partitions.Numbers()...)
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return topicDescription{}, fmt.Errorf("log dirs of %s: %w", topic, err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return topicDescription{}, fmt.Errorf("configs of %s: %w", topic, err)
	}
	d := topicDescription{Topic: topic, ID: td.ID.String(), Internal: td.IsInternal, Partitions: []partitionDetails{}}
	for _, p := range td.Partitions.Sorted() {
		d.Partitions = append(d.Partitions, partitionRow(p, starts, ends, dirs))
	}
	if d.Configs, err = configEntries(rcs, topic); err != nil {
		return topicDescription{}, err
	}
	return d, nil
}

func partitionRow(p kadm.PartitionDetail, starts, ends kadm.ListedOffsets, dirs kadm.DescribedAllLogDirs) partitionDetails {
	r := partitionDetails{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		Replicas: p.Replicas, ISR: p.ISR, LogStartOffset: -1, HighWatermark: -1, SizeBytes: -1}
	if p.Err != nil {
		r.Error = p.Err.Error()
	}
	if o, ok := starts.Lookup(p.Topic, p.Partition); ok && o.Err == nil {
		r.LogStartOffset = o.Offset
	}
	if o, ok := ends.Lookup(p.Topic, p.Partition); ok && o.Err == nil {
		r.HighWatermark = o.Offset
	}
	if ld, ok := dirs[p.Leader]; ok {
		if dp, ok := ld.LookupPartition(p.Topic, p.Partition); ok {
			r.SizeBytes = dp.Size
		}
	}
	return r
}

// configEntries flattens one resource's DescribeConfigs answer.
func configEntries(rcs kadm.ResourceConfigs, name string) ([]configEntry, error) {
	rc, err := rcs.On(name, nil)
	if err != nil {
		return nil, fmt.Errorf("configs of %s: %w", name, err)
	}
	if rc.Err != nil {
		return nil, fmt.Errorf("configs of %s: %w", name, rc.Err)
	}
	out := []configEntry{}
	for _, cf := range rc.Configs {
		v := cf.MaybeValue()
		if cf.Sensitive {
			v = "(sensitive)"
		}
		out = append(out, configEntry{Name: cf.Key, Value: v, Source: cf.Source.String(), Sensitive: cf.Sensitive})
	}
	return out, nil
}

func printTopic(c *cmd, d topicDescription) error {
	replicas := 0
	if len(d.Partitions) > 0 {
		replicas = len(d.Partitions[0].Replicas)
	}
	summary := [][]string{{"NAME", d.Topic}, {"ID", d.ID}, {"INTERNAL", fmt.Sprint(d.Internal)},
		{"PARTITIONS", itoa(len(d.Partitions))}, {"REPLICAS", itoa(replicas)}}
	if err := writeRows(c.out, summary); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\nCONFIGS")
	if err := c.table([]string{"KEY", "VALUE", "SOURCE"}, configRows(d.Configs)); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\nPARTITIONS")
	var rows [][]string
	for _, p := range d.Partitions {
		size := "-"
		if p.SizeBytes >= 0 {
			size = humanBytes(p.SizeBytes)
		}
		rows = append(rows, []string{itoa(p.Partition), itoa(p.Leader), itoa(p.LeaderEpoch), int32List(p.Replicas), int32List(p.ISR),
			offsetText(p.LogStartOffset), offsetText(p.HighWatermark), size, dash(p.Error)})
	}
	return c.table([]string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK", "SIZE", "ERROR"}, rows)
}

func configRows(cs []configEntry) [][]string {
	var rows [][]string
	for _, cf := range cs {
		rows = append(rows, []string{cf.Name, dash(cf.Value), strings.TrimSpace(cf.Source)})
	}
	return rows
}

// offsetText prints -1 (unknown) as a dash.
func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return itoa(o)
}

func orNoAnswer(err error) error {
	if err == nil {
		return errNoAnswer
	}
	return err
}
