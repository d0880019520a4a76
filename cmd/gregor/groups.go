package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// groupMember is one member of a group, whatever its protocol.
type groupMember struct {
	id, host, client string
	assigned         map[string][]int32
}

// describedGroup is what `group describe` prints, gathered from
// DescribeGroups or ConsumerGroupDescribe, OffsetFetch and ListOffsets.
type describedGroup struct {
	name      string
	state     string
	members   []groupMember
	committed map[string]map[int32]int64
	logEnd    map[string]map[int32]int64 // -1 when unknown
}

// gatherGroup reads a group's members, committed offsets and the end
// offsets of the partitions it has committed or been assigned.
func gatherGroup(ctx context.Context, adm *kadm.Client, name string) (describedGroup, error) {
	d := describedGroup{name: name}
	var err error
	cgs, cgErr := adm.DescribeConsumerGroups(ctx, name)
	if cg, ok := cgs[name]; cgErr == nil && ok && cg.Err == nil {
		d.state, d.members = consumerGroupMembers(cg)
	} else if d.state, d.members, err = classicGroupMembers(ctx, adm, name); err != nil {
		return d, err
	}
	if d.committed, err = committedOffsets(ctx, adm, name); err != nil {
		return d, err
	}
	topics := map[string]bool{}
	for t := range d.committed {
		topics[t] = true
	}
	for _, m := range d.members {
		for t := range m.assigned {
			topics[t] = true
		}
	}
	d.logEnd, err = logEndOffsets(ctx, adm, slices.Sorted(maps.Keys(topics)))
	if err != nil {
		return d, fmt.Errorf("list end offsets for %s: %w", name, err)
	}
	return d, nil
}

// consumerGroupMembers reads a KIP-848 consumer group's members.
func consumerGroupMembers(cg kadm.DescribedConsumerGroup) (string, []groupMember) {
	var members []groupMember
	for _, m := range cg.Members {
		gm := groupMember{id: m.MemberID, host: m.ClientHost, client: m.ClientID, assigned: map[string][]int32{}}
		for t, ps := range m.Assignment {
			for p := range ps {
				gm.assigned[t] = append(gm.assigned[t], p)
			}
		}
		members = append(members, gm)
	}
	return cg.State, members
}

// classicGroupMembers describes a classic group (or any group on a broker
// without KIP-848).
func classicGroupMembers(ctx context.Context, adm *kadm.Client, name string) (string, []groupMember, error) {
	gs, err := adm.DescribeGroups(ctx, name)
	if err != nil {
		return "", nil, fmt.Errorf("describe group %s: %w", name, err)
	}
	g, ok := gs[name]
	if !ok {
		return "", nil, fmt.Errorf("describe group %s: not in the answer", name)
	}
	// DescribeGroups v6+ answers GROUP_ID_NOT_FOUND where older versions
	// answered the state Dead: a group that does not exist.
	if errors.Is(g.Err, kerr.GroupIDNotFound) {
		return "Dead", nil, nil
	}
	if g.Err != nil {
		return "", nil, fmt.Errorf("describe group %s: %w", name, g.Err)
	}
	var members []groupMember
	for _, m := range g.Members {
		gm := groupMember{id: m.MemberID, host: m.ClientHost, client: m.ClientID, assigned: map[string][]int32{}}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				gm.assigned[t.Topic] = append(gm.assigned[t.Topic], t.Partitions...)
			}
		}
		members = append(members, gm)
	}
	return g.State, members, nil
}

// committedOffsets is the group's committed offset per partition.
func committedOffsets(ctx context.Context, adm *kadm.Client, name string) (map[string]map[int32]int64, error) {
	offsets, err := adm.FetchOffsets(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of %s: %w", name, err)
	}
	committed := map[string]map[int32]int64{}
	for t, ps := range offsets {
		for p, o := range ps {
			if o.Err != nil || o.At < 0 {
				continue
			}
			if committed[t] == nil {
				committed[t] = map[int32]int64{}
			}
			committed[t][p] = o.At
		}
	}
	return committed, nil
}

// logEndOffsets lists the end offset of each partition of topics, -1
// where it could not be read.
func logEndOffsets(ctx context.Context, adm *kadm.Client, topics []string) (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	if len(topics) == 0 {
		return out, nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for t, ps := range ends {
		out[t] = map[int32]int64{}
		for p, o := range ps {
			out[t][p] = -1
			if o.Err == nil {
				out[t][p] = o.Offset
			}
		}
	}
	return out, nil
}

// groupRow is one line of `group describe`.
type groupRow struct {
	topic                      string
	partition                  int32
	current, logEnd, lag       string
	consumerID, host, clientID string
}

// groupRows lists the partitions a member is assigned or the group has
// committed, sorted by topic and partition, with lag where both the
// committed and the log end offset are known.
func groupRows(d describedGroup) []groupRow {
	type key struct {
		t string
		p int32
	}
	owner := map[key]groupMember{}
	seen := map[key]bool{}
	for _, m := range d.members {
		for t, ps := range m.assigned {
			for _, p := range ps {
				owner[key{t, p}] = m
				seen[key{t, p}] = true
			}
		}
	}
	for t, ps := range d.committed {
		for p := range ps {
			seen[key{t, p}] = true
		}
	}
	keys := slices.SortedFunc(maps.Keys(seen), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p, b.p))
	})
	rows := make([]groupRow, 0, len(keys))
	for _, k := range keys {
		r := groupRow{topic: k.t, partition: k.p, current: "-", logEnd: "-", lag: "-", consumerID: "-", host: "-", clientID: "-"}
		committed, hasCommit := d.committed[k.t][k.p]
		end, hasEnd := d.logEnd[k.t][k.p]
		if hasCommit {
			r.current = strconv.FormatInt(committed, 10)
		}
		if hasEnd && end >= 0 {
			r.logEnd = strconv.FormatInt(end, 10)
			if hasCommit {
				r.lag = strconv.FormatInt(max(end-committed, 0), 10)
			}
		}
		if m, ok := owner[k]; ok {
			r.consumerID, r.host, r.clientID = m.id, dash(m.host), dash(m.client)
		}
		rows = append(rows, r)
	}
	return rows
}

func printGroup(w io.Writer, d describedGroup) error {
	if len(d.members) == 0 {
		fmt.Fprintf(w, "Consumer group '%s' has no active members.\n\n", d.name)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	for _, r := range groupRows(d) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.name, r.topic, r.partition, r.current, r.logEnd, r.lag, r.consumerID, r.host, r.clientID)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
