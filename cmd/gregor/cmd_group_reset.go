package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// resetTarget is where reset-offsets moves each partition: kind is
// earliest, latest, offset (n), datetime (at) or shift (n).
type resetTarget struct {
	kind string
	n    int64
	at   time.Time
}

// resetRow is one partition of a reset plan.
type resetRow struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   *int64 `json:"current_offset"`
	New       int64  `json:"new_offset"`
	Error     string `json:"error,omitempty"`
}

func groupResetOffsets(c *cmd) error {
	var topics []string
	var all, earliest, latest, execute, dryRun bool
	var toOffset, toDatetime, shiftBy string
	c.listVar(&topics, "topic", "t", "a `topic`, or topic:0,2 for some partitions (repeatable)")
	c.boolVar(&all, "all-topics", "", false, "every topic the group has committed offsets for")
	c.boolVar(&earliest, "to-earliest", "", false, "to each partition's log start offset")
	c.boolVar(&latest, "to-latest", "", false, "to each partition's end offset")
	c.stringVar(&toOffset, "to-offset", "", "", "to this `offset`")
	c.stringVar(&toDatetime, "to-datetime", "", "", "to the first offset at or after this `time` (RFC 3339, Unix ms, or 1h ago)")
	c.stringVar(&shiftBy, "shift-by", "", "", "move each committed offset by `n` (negative: back)")
	c.boolVar(&execute, "execute", "", false, "commit the new offsets (without it, only print the plan)")
	c.boolVar(&dryRun, "dry-run", "", false, "only print the plan (the default)")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	if execute && dryRun {
		return usagef("%s: give --execute or --dry-run, not both", c.path)
	}
	target, err := chooseTarget(earliest, latest, toOffset, toDatetime, shiftBy)
	if err != nil {
		return err
	}
	if all == (len(topics) > 0) {
		return usagef("%s: give --topic T (repeatable) or --all-topics", c.path)
	}
	return resetOffsets(c, c.args[0], topics, target, execute)
}

// chooseTarget checks that exactly one --to-* or --shift-by is given.
func chooseTarget(earliest, latest bool, toOffset, toDatetime, shiftBy string) (resetTarget, error) {
	var chosen []resetTarget
	if earliest {
		chosen = append(chosen, resetTarget{kind: "earliest"})
	}
	if latest {
		chosen = append(chosen, resetTarget{kind: "latest"})
	}
	if toOffset != "" {
		n, err := strconv.ParseInt(toOffset, 10, 64)
		if err != nil || n < 0 {
			return resetTarget{}, usagef("--to-offset %q is not an offset", toOffset)
		}
		chosen = append(chosen, resetTarget{kind: "offset", n: n})
	}
	if toDatetime != "" {
		t, err := parseTime(toDatetime, time.Now())
		if err != nil {
			return resetTarget{}, err
		}
		chosen = append(chosen, resetTarget{kind: "datetime", at: t})
	}
	if shiftBy != "" {
		n, err := strconv.ParseInt(shiftBy, 10, 64)
		if err != nil {
			return resetTarget{}, usagef("--shift-by %q is not a number", shiftBy)
		}
		chosen = append(chosen, resetTarget{kind: "shift", n: n})
	}
	if len(chosen) != 1 {
		return resetTarget{}, usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
	}
	return chosen[0], nil
}

func groupSeek(c *cmd) error {
	var to string
	var topics []string
	c.stringVar(&to, "to", "", "", "where: start, end, an offset N, or @TIME")
	c.listVar(&topics, "topic", "t", "only this `topic` (or topic:0,2), repeatable; default every topic the group committed")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	var target resetTarget
	switch {
	case to == "start":
		target.kind = "earliest"
	case to == "end":
		target.kind = "latest"
	case strings.HasPrefix(to, "@"):
		t, err := parseTime(to[1:], time.Now())
		if err != nil {
			return err
		}
		target = resetTarget{kind: "datetime", at: t}
	default:
		n, err := strconv.ParseInt(to, 10, 64)
		if err != nil || n < 0 {
			return usagef("%s: --to %q: want start, end, an offset or @TIME", c.path, to)
		}
		target = resetTarget{kind: "offset", n: n}
	}
	return resetOffsets(c, c.args[0], topics, target, true)
}

// resetOffsets plans the new offsets and, when execute, commits them.
func resetOffsets(c *cmd, group string, topics []string, target resetTarget, execute bool) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	d, err := gatherGroup(c.context(), adm, group)
	if err != nil {
		return err
	}
	if execute && len(d.members) > 0 {
		return fmt.Errorf("group %s has %d active members (state %s): offsets can only be reset while it has none; stop its consumers first",
			group, len(d.members), d.state)
	}
	set, err := resetSelection(c, adm, d, topics)
	if err != nil {
		return err
	}
	rows, err := planReset(c, adm, d, set, target)
	if err != nil {
		return err
	}
	if execute {
		if err := commitReset(c, adm, group, rows); err != nil {
			return err
		}
	}
	return printReset(c, rows, execute)
}

// resetSelection is the partitions --topic names, or (without it) every
// partition the group has committed.
func resetSelection(c *cmd, adm *kadm.Client, d describedGroup, topics []string) (kadm.TopicsSet, error) {
	if len(topics) > 0 {
		return topicSelection(c, adm, topics)
	}
	set := kadm.TopicsSet{}
	for t, ps := range d.committed {
		for p := range ps {
			set.Add(t, p)
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("group %s has no committed offsets; name the topics with --topic", d.name)
	}
	return set, nil
}

// topicSelection resolves --topic T and T:0,2 arguments to partitions.
func topicSelection(c *cmd, adm *kadm.Client, topics []string) (kadm.TopicsSet, error) {
	set := kadm.TopicsSet{}
	for _, arg := range topics {
		topic, ps, err := splitTopicArg(arg)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			if ps, err = topicPartitions(c, adm, topic); err != nil {
				return nil, err
			}
		}
		set.Add(topic, ps...)
	}
	return set, nil
}

type topicPartition struct {
	topic     string
	partition int32
}

func sortedSelection(set kadm.TopicsSet) []topicPartition {
	var out []topicPartition
	set.Each(func(t string, p int32) { out = append(out, topicPartition{t, p}) })
	slices.SortFunc(out, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out
}

// planReset computes each partition's new offset, kept between its log
// start and end offsets.
func planReset(c *cmd, adm *kadm.Client, d describedGroup, set kadm.TopicsSet, target resetTarget) ([]resetRow, error) {
	ctx := c.context()
	topics := slices.Sorted(maps.Keys(set))
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("log start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if target.kind == "datetime" {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), topics...); err != nil {
			return nil, fmt.Errorf("offsets at %v: %w", target.at, err)
		}
	}
	var rows []resetRow
	for _, tp := range sortedSelection(set) {
		row := resetRow{Group: d.name, Topic: tp.topic, Partition: tp.partition}
		if cur, ok := d.committed[tp.topic][tp.partition]; ok {
			row.Current = &cur
		}
		start, ok1 := starts.Lookup(tp.topic, tp.partition)
		end, ok2 := ends.Lookup(tp.topic, tp.partition)
		if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", tp.topic, tp.partition, cmp.Or(start.Err, end.Err, errNoAnswer))
		}
		want, err := resetWant(target, row.Current, start.Offset, end.Offset, atTime, tp)
		if err != nil {
			return nil, err
		}
		row.New = min(max(want, start.Offset), end.Offset)
		rows = append(rows, row)
	}
	return rows, nil
}

func resetWant(target resetTarget, current *int64, start, end int64, atTime kadm.ListedOffsets, tp topicPartition) (int64, error) {
	switch target.kind {
	case "earliest":
		return start, nil
	case "latest":
		return end, nil
	case "offset":
		return target.n, nil
	case "datetime":
		o, ok := atTime.Lookup(tp.topic, tp.partition)
		if !ok || o.Err != nil || o.Offset < 0 {
			return end, nil // no record at or after the time
		}
		return o.Offset, nil
	}
	if current == nil {
		return 0, fmt.Errorf("--shift-by: the group has no committed offset on %s/%d to shift", tp.topic, tp.partition)
	}
	return *current + target.n, nil
}

func commitReset(c *cmd, adm *kadm.Client, group string, rows []resetRow) error {
	var offs kadm.Offsets
	for _, r := range rows {
		offs.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(c.context(), group, offs)
	if err != nil {
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	failed := 0
	for i, r := range rows {
		o, ok := resp.Lookup(r.Topic, r.Partition)
		if !ok {
			o.Err = errNoAnswer
		}
		if o.Err != nil {
			rows[i].Error = o.Err.Error()
			failed++
		}
	}
	if failed > 0 {
		printReset(c, rows, true)
		return fmt.Errorf("%d of %d offsets of group %s not committed", failed, len(rows), group)
	}
	return nil
}

func printReset(c *cmd, rows []resetRow, executed bool) error {
	if c.json {
		return c.printJSON(map[string]any{"executed": executed, "partitions": rows})
	}
	var table [][]string
	for _, r := range rows {
		cur := "-"
		if r.Current != nil {
			cur = itoa(*r.Current)
		}
		table = append(table, []string{r.Group, r.Topic, itoa(r.Partition), cur, itoa(r.New), dash(r.Error)})
	}
	if err := c.table([]string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "ERROR"}, table); err != nil {
		return err
	}
	if !executed {
		fmt.Fprintln(c.errOut, "Dry run: nothing changed. Add --execute to commit these offsets.")
	}
	return nil
}
