package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type groupJSON struct {
	Group        string `json:"group"`
	Type         string `json:"type"` // classic, consumer or share
	ProtocolType string `json:"protocol_type"`
	State        string `json:"state"`
	Coordinator  int32  `json:"coordinator"`
	// Lag is the total of the latest sample, nil before the first.
	Lag *int64 `json:"lag"`
}

type memberJSON struct {
	MemberID   string   `json:"member_id"`
	InstanceID *string  `json:"instance_id"`
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Assigned   []string `json:"assigned"` // topic-partition
}

type partLagJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the committed offset (classic and consumer groups)
	// or the share-partition start offset (share groups); -1 when none.
	Committed int64  `json:"committed"`
	End       int64  `json:"end_offset"`
	Lag       int64  `json:"lag"` // -1 when not known
	Member    string `json:"member,omitempty"`
	Error     string `json:"error,omitempty"`
}

// groupType names a listed group's type; brokers before KIP-848 leave it
// empty, and every group there is classic.
func groupType(g kadm.ListedGroup) string {
	if g.GroupType == "" {
		return "classic"
	}
	return g.GroupType
}

// groups lists every group with its type, state and latest sampled lag.
func (c *Console) groups(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	listed, err := adm.ListGroups(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := struct {
		Groups []groupJSON `json:"groups"`
	}{Groups: []groupJSON{}}
	for _, g := range listed.Sorted() {
		gj := groupJSON{Group: g.Group, Type: groupType(g), ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator}
		if s, ok := c.lag.latest(g.Group); ok {
			gj.Lag = &s.Lag
		}
		out.Groups = append(out.Groups, gj)
	}
	return out, nil
}

// group describes one group: its members and their assignments (with
// the describe call of its type), its lag per partition now, and its lag
// history as sampled.
func (c *Console) group(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	name := r.PathValue("group")
	ctx := r.Context()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	lg, ok := listed[name]
	if !ok {
		return nil, httpError{http.StatusNotFound, fmt.Errorf("no group %q", name)}
	}
	out := struct {
		groupJSON
		Assignor string        `json:"assignor"`
		Members  []memberJSON  `json:"members"`
		Lags     []partLagJSON `json:"partitions"`
		Total    int64         `json:"total_lag"`
		History  []sample      `json:"history"`
		Error    string        `json:"error,omitempty"`
	}{groupJSON: groupJSON{Group: name, Type: groupType(lg), ProtocolType: lg.ProtocolType, State: lg.State, Coordinator: lg.Coordinator},
		Members: []memberJSON{}}
	owner := make(map[string]map[int32]string) // topic → partition → member
	assign := func(m *memberJSON, t string, ps []int32) {
		for _, p := range ps {
			m.Assigned = append(m.Assigned, fmt.Sprintf("%s-%d", t, p))
			if owner[t] == nil {
				owner[t] = make(map[int32]string)
			}
			owner[t][p] = m.MemberID
		}
	}
	switch out.Type {
	case "consumer":
		d, err := adm.DescribeConsumerGroups(ctx, name)
		if err != nil && len(d) == 0 {
			return nil, fmt.Errorf("describe group %s: %w", name, err)
		}
		g := d[name]
		out.State, out.Assignor, out.Error = g.State, g.AssignorName, errString(g.Err)
		for _, m := range g.Members {
			mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: []string{}}
			for _, tp := range m.Assignment.Sorted() {
				assign(&mj, tp.Topic, tp.Partitions)
			}
			out.Members = append(out.Members, mj)
		}
	case "share":
		d, err := adm.DescribeShareGroups(ctx, name)
		if err != nil && len(d) == 0 {
			return nil, fmt.Errorf("describe group %s: %w", name, err)
		}
		g := d[name]
		out.State, out.Assignor, out.Error = g.GroupState, g.Assignor, errString(g.Err)
		for _, m := range g.Members {
			mj := memberJSON{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: []string{}}
			for _, tp := range m.Assignment.Sorted() {
				assign(&mj, tp.Topic, tp.Partitions)
			}
			out.Members = append(out.Members, mj)
		}
	default:
		d, err := adm.DescribeGroups(ctx, name)
		if err != nil && len(d) == 0 {
			return nil, fmt.Errorf("describe group %s: %w", name, err)
		}
		g := d[name]
		out.State, out.Assignor, out.Error = g.State, g.Protocol, errString(g.Err)
		for _, m := range g.Members {
			mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: []string{}}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					assign(&mj, t.Topic, t.Partitions)
				}
			}
			out.Members = append(out.Members, mj)
		}
	}
	lags, total, err := groupLag(ctx, adm, name, out.Type)
	if err != nil {
		return nil, err
	}
	for i := range lags {
		lags[i].Member = owner[lags[i].Topic][lags[i].Partition]
	}
	out.Lags, out.Total = lags, total
	out.History = c.lag.history(name)
	return out, nil
}

// groupLag is a group's lag per partition and in total: for classic and
// consumer groups the partition's end offset (the high watermark) minus
// the committed offset, as kafka-consumer-groups shows it; for share
// groups the lag DescribeShareGroupOffsets reports (KIP-932), else end
// minus the share-partition start offset. Partitions without a commit
// count nothing towards the total.
func groupLag(ctx context.Context, adm *kadm.Client, group, typ string) ([]partLagJSON, int64, error) {
	out := []partLagJSON{}
	var total int64
	committed := make(map[string]map[int32]int64)
	known := make(map[string]map[int32]int64) // lag reported by the broker
	set := func(m map[string]map[int32]int64, t string, p int32, v int64) {
		if m[t] == nil {
			m[t] = make(map[int32]int64)
		}
		m[t][p] = v
	}
	if typ == "share" {
		d, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil && len(d) == 0 {
			return nil, 0, fmt.Errorf("describe share group offsets of %s: %w", group, err)
		}
		g := d[group]
		if g.Err != nil {
			return nil, 0, fmt.Errorf("describe share group offsets of %s: %w", group, g.Err)
		}
		g.Offsets.Each(func(o kadm.ShareOffset) {
			if o.Err == nil {
				set(committed, o.Topic, o.Partition, o.StartOffset)
				if o.Lag >= 0 {
					set(known, o.Topic, o.Partition, o.Lag)
				}
			}
		})
	} else {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return nil, 0, fmt.Errorf("fetch offsets of %s: %w", group, err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil {
				set(committed, o.Topic, o.Partition, o.At)
			}
		})
	}
	var topics []string
	for t := range committed {
		topics = append(topics, t)
	}
	if len(topics) == 0 {
		return out, 0, nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, 0, fmt.Errorf("list end offsets for %s: %w", group, err)
	}
	for t, ps := range committed {
		for p, at := range ps {
			pl := partLagJSON{Topic: t, Partition: p, Committed: at, End: -1, Lag: -1}
			if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
				pl.End = e.Offset
				if at >= 0 {
					pl.Lag = max(e.Offset-at, 0)
				}
			} else if ok {
				pl.Error = e.Err.Error()
			}
			if l, ok := known[t][p]; ok {
				pl.Lag = l
			}
			if pl.Lag >= 0 {
				total += pl.Lag
			}
			out = append(out, pl)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, total, nil
}

// sampleLoop samples every group's total lag each SampleEvery until ctx
// ends.
func (c *Console) sampleLoop(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.cfg.SampleEvery)
	defer t.Stop()
	for {
		c.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Console) sampleOnce(ctx context.Context) {
	_, adm, _, err := c.clients()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.SampleEvery, 5*time.Second))
	defer cancel()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		c.log.Debug("console: lag sample: list groups", "err", err)
		return
	}
	now := time.Now().UnixMilli()
	seen := make(map[string]bool)
	for _, g := range listed.Sorted() {
		if len(seen) >= c.cfg.MaxGroups {
			break
		}
		seen[g.Group] = true
		_, total, err := groupLag(ctx, adm, g.Group, groupType(g))
		if err != nil {
			c.log.Debug("console: lag sample", "group", g.Group, "err", err)
			continue
		}
		c.lag.add(g.Group, sample{T: now, Lag: total})
	}
	c.lag.keepOnly(seen)
}
