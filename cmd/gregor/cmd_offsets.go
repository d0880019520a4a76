package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func offsetsCommand() *command {
	return &command{name: "offsets", argFlag: "topic", args: "TOPIC", run: runOffsets,
		short: "show each partition's log start and end offsets, or the offset at a time",
		long: `LOG-START-OFFSET is the first offset still held, HIGH-WATERMARK the next to be
written (ListOffsets). --time adds the first offset whose record is at or
after a time (Unix ms, RFC 3339, a duration ago as 1h), or the offset of the
record with the largest timestamp (max-timestamp), as kafka-get-offsets.`,
		examples: `  gregor offsets orders
  gregor offsets orders --time 2026-12-01T10:00:00Z
  gregor offsets orders --time 1h -p 0 --json`}
}

// partitionOffsets is one row of `gregor offsets`.
type partitionOffsets struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"log_start_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	AtTime         *int64 `json:"offset_at_time,omitempty"`    // -1: no record at or after the time
	AtTimestamp    *int64 `json:"timestamp_at_time,omitempty"` // that record's timestamp
}

func runOffsets(c *cmd) error {
	var at string
	var parts []string
	c.stringVar(&at, "time", "", "", "also list the offset at this `time` (or max-timestamp)")
	c.listVar(&parts, "partitions", "p", "only these `partitions`, as 0,2")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	only, err := parsePartitions(parts)
	if err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	topic := c.args[0]
	if err := checkTopic(c, topic); err != nil {
		return err
	}
	rows, err := listPartitionOffsets(c, adm, topic, at)
	if err != nil {
		return err
	}
	var out []partitionOffsets
	for _, r := range rows {
		if len(only) == 0 || containsPartition(only, r.Partition) {
			out = append(out, r)
		}
	}
	return printOffsets(c, out, at != "")
}

func listPartitionOffsets(c *cmd, adm *kadm.Client, topic, at string) ([]partitionOffsets, error) {
	ctx := c.context()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("log start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var atTime kadm.ListedOffsets
	switch at {
	case "":
	case "max-timestamp":
		atTime, err = adm.ListMaxTimestampOffsets(ctx, topic)
	default:
		var t time.Time
		if t, err = parseTime(at, time.Now()); err == nil {
			atTime, err = adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of %s at %s: %w", topic, at, err)
	}
	var out []partitionOffsets
	for _, s := range sortedListed(starts[topic]) {
		if s.Err != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", topic, s.Partition, s.Err)
		}
		r := partitionOffsets{Topic: topic, Partition: s.Partition, LogStartOffset: s.Offset, HighWatermark: ends[topic][s.Partition].Offset}
		if o, ok := atTime.Lookup(topic, s.Partition); ok && o.Err == nil {
			r.AtTime, r.AtTimestamp = &o.Offset, &o.Timestamp
		}
		out = append(out, r)
	}
	return out, nil
}

func sortedListed(m map[int32]kadm.ListedOffset) []kadm.ListedOffset {
	out := make([]kadm.ListedOffset, 0, len(m))
	for _, p := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[p])
	}
	return out
}

func printOffsets(c *cmd, out []partitionOffsets, withTime bool) error {
	if c.json {
		return c.printJSON(out)
	}
	header := []string{"TOPIC", "PARTITION", "LOG-START-OFFSET", "HIGH-WATERMARK"}
	if withTime {
		header = append(header, "OFFSET-AT-TIME", "TIMESTAMP")
	}
	var rows [][]string
	for _, r := range out {
		row := []string{r.Topic, itoa(r.Partition), itoa(r.LogStartOffset), itoa(r.HighWatermark)}
		if withTime {
			row = append(row, "-", "-")
			if r.AtTime != nil && *r.AtTime >= 0 {
				row[4] = itoa(*r.AtTime)
			}
			// No record at or after the time: the offset is the end, with
			// no timestamp.
			if r.AtTimestamp != nil && *r.AtTimestamp >= 0 {
				row[5] = time.UnixMilli(*r.AtTimestamp).UTC().Format(time.RFC3339Nano)
			}
		}
		rows = append(rows, row)
	}
	return c.table(header, rows)
}
