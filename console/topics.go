package console

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type topicJSON struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Internal   bool   `json:"internal"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replication_factor"`
	// Records is the sum over partitions of end − start offsets (what
	// the logs hold, counting transaction markers and compacted gaps).
	Records int64 `json:"records"`
	// Size is the bytes of the leaders' logs (DescribeLogDirs).
	Size  int64  `json:"size"`
	Error string `json:"error,omitempty"`
}

type partitionJSON struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline_replicas"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	Size        int64   `json:"size"`
	Error       string  `json:"error,omitempty"`
}

type configJSON struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

// offsetsAndSizes lists the start and end offsets and the leaders' log
// sizes of topics' partitions. A failure of one of the three leaves its
// numbers at -1 and is reported, not fatal: the rest is still worth
// showing.
type offsetsAndSizes struct {
	start, end kadm.ListedOffsets
	sizes      map[string]map[int32]int64
	errs       []string
}

func listOffsetsAndSizes(r *http.Request, adm *kadm.Client, leaders map[string]map[int32]int32, topics ...string) offsetsAndSizes {
	o := offsetsAndSizes{errs: []string{}}
	var err error
	ctx := r.Context()
	if o.start, err = adm.ListStartOffsets(ctx, topics...); err != nil {
		o.errs = append(o.errs, "list start offsets: "+err.Error())
	}
	if o.end, err = adm.ListEndOffsets(ctx, topics...); err != nil {
		o.errs = append(o.errs, "list end offsets: "+err.Error())
	}
	// Partitions named one by one: a topic with none listed asks for none.
	set := make(kadm.TopicsSet)
	for _, t := range topics {
		for p := range leaders[t] {
			set.Add(t, p)
		}
	}
	o.sizes = make(map[string]map[int32]int64)
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		o.errs = append(o.errs, "describe log dirs: "+err.Error())
	}
	for broker, bd := range dirs {
		bd.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if leaders[p.Topic][p.Partition] != broker || p.IsFuture {
				return
			}
			if o.sizes[p.Topic] == nil {
				o.sizes[p.Topic] = make(map[int32]int64)
			}
			o.sizes[p.Topic][p.Partition] += p.Size
		})
	}
	return o
}

func (o offsetsAndSizes) partition(t string, p int32) (start, end, size int64) {
	start, end, size = -1, -1, -1
	if l, ok := o.start.Lookup(t, p); ok && l.Err == nil {
		start = l.Offset
	}
	if l, ok := o.end.Lookup(t, p); ok && l.Err == nil {
		end = l.Offset
	}
	if s, ok := o.sizes[t][p]; ok {
		size = s
	}
	return start, end, size
}

func leadersOf(md kadm.TopicDetails) map[string]map[int32]int32 {
	out := make(map[string]map[int32]int32)
	for _, t := range md {
		out[t.Topic] = make(map[int32]int32)
		for _, p := range t.Partitions {
			out[t.Topic][p.Partition] = p.Leader
		}
	}
	return out
}

// topics lists every topic, internal ones included, with its partition
// count, records held and size.
func (c *Console) topics(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	md, err := adm.ListTopicsWithInternal(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	names := md.Names()
	o := listOffsetsAndSizes(r, adm, leadersOf(md), names...)
	out := struct {
		Topics []topicJSON `json:"topics"`
		Errors []string    `json:"errors"`
	}{Topics: []topicJSON{}, Errors: o.errs}
	for _, name := range names {
		t := md[name]
		tj := topicJSON{Name: name, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: len(t.Partitions), Error: errString(t.Err)}
		for _, p := range t.Partitions {
			tj.Replicas = max(tj.Replicas, len(p.Replicas))
			start, end, size := o.partition(name, p.Partition)
			if start >= 0 && end >= start {
				tj.Records += end - start
			}
			if size > 0 {
				tj.Size += size
			}
		}
		out.Topics = append(out.Topics, tj)
	}
	return out, nil
}

// topic describes one topic: its partitions with leaders, replicas, ISR,
// offsets and sizes, and its configs with their sources (DescribeConfigs).
func (c *Console) topic(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	name := r.PathValue("topic")
	md, err := adm.ListTopicsWithInternal(r.Context(), name)
	if err != nil {
		return nil, fmt.Errorf("describe topic %s: %w", name, err)
	}
	t, ok := md[name]
	if !ok || t.Err != nil {
		err := t.Err
		if err == nil {
			err = fmt.Errorf("not in the metadata")
		}
		return nil, httpError{http.StatusNotFound, fmt.Errorf("topic %s: %w", name, err)}
	}
	o := listOffsetsAndSizes(r, adm, leadersOf(md), name)
	out := struct {
		topicJSON
		PartitionList []partitionJSON `json:"partition_list"`
		Configs       []configJSON    `json:"configs"`
		Errors        []string        `json:"errors"`
	}{topicJSON: topicJSON{Name: name, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: len(t.Partitions)},
		PartitionList: []partitionJSON{}, Configs: []configJSON{}, Errors: o.errs}
	for _, p := range t.Partitions.Sorted() {
		start, end, size := o.partition(name, p.Partition)
		out.PartitionList = append(out.PartitionList, partitionJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), Offline: nonNil(p.OfflineReplicas),
			StartOffset: start, EndOffset: end, Size: size, Error: errString(p.Err)})
		out.Replicas = max(out.Replicas, len(p.Replicas))
		if start >= 0 && end >= start {
			out.Records += end - start
		}
		if size > 0 {
			out.Size += size
		}
	}
	rcs, err := adm.DescribeTopicConfigs(r.Context(), name)
	if err != nil {
		out.Errors = append(out.Errors, "describe configs: "+err.Error())
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			out.Errors = append(out.Errors, "describe configs: "+rc.Err.Error())
			continue
		}
		for _, cf := range rc.Configs {
			out.Configs = append(out.Configs, configJSON{Name: cf.Key, Value: cf.Value, Source: cf.Source.String(), Sensitive: cf.Sensitive})
		}
	}
	sort.Slice(out.Configs, func(i, j int) bool { return out.Configs[i].Name < out.Configs[j].Name })
	return out, nil
}

// topicID is a topic id as Kafka prints it (Uuid.toString): URL-safe
// base64 without padding.
func topicID(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
