package console

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type brokerJSON struct {
	NodeID     int32   `json:"node_id"`
	Host       string  `json:"host"`
	Port       int32   `json:"port"`
	Rack       *string `json:"rack"`
	Controller bool    `json:"controller"`
}

type quorumReplicaJSON struct {
	NodeID         int32  `json:"node_id"`
	Role           string `json:"role"` // Leader, Follower, Observer
	LogEndOffset   int64  `json:"log_end_offset"`
	Lag            int64  `json:"lag"`
	LastFetchMsAgo *int64 `json:"last_fetch_ms_ago"`
}

type quorumJSON struct {
	LeaderID      int32               `json:"leader_id"`
	LeaderEpoch   int32               `json:"leader_epoch"`
	HighWatermark int64               `json:"high_watermark"`
	Replicas      []quorumReplicaJSON `json:"replicas"`
	Error         string              `json:"error,omitempty"`
}

// cluster is the brokers (Metadata) and the metadata quorum
// (DescribeQuorum), as `gregor cluster info` and `quorum describe` show.
func (c *Console) cluster(r *http.Request, cl *kgo.Client, adm *kadm.Client, seeds []string) (any, error) {
	md, err := adm.BrokerMetadata(r.Context())
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := struct {
		ClusterID    string       `json:"cluster_id"`
		ControllerID int32        `json:"controller_id"`
		Brokers      []brokerJSON `json:"brokers"`
		Quorum       quorumJSON   `json:"quorum"`
		Via          []string     `json:"via"`
	}{ClusterID: md.Cluster, ControllerID: md.Controller, Via: seeds, Brokers: []brokerJSON{}}
	for _, b := range md.Brokers {
		out.Brokers = append(out.Brokers, brokerJSON{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == md.Controller})
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].NodeID < out.Brokers[j].NodeID })
	q, err := describeQuorum(r, cl)
	if err != nil {
		q.Error = err.Error()
	}
	out.Quorum = q
	return out, nil
}

func describeQuorum(r *http.Request, cl *kgo.Client) (quorumJSON, error) {
	q := quorumJSON{Replicas: []quorumReplicaJSON{}}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(r.Context(), cl)
	if err != nil {
		return q, fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return q, fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return q, fmt.Errorf("describe quorum: no partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return q, fmt.Errorf("describe quorum: %w", err)
	}
	q.LeaderID, q.LeaderEpoch, q.HighWatermark = p.LeaderID, p.LeaderEpoch, p.HighWatermark
	var leaderEnd int64
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderEnd = v.LogEndOffset
		}
	}
	now := time.Now().UnixMilli()
	add := func(s kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		rj := quorumReplicaJSON{NodeID: s.ReplicaID, Role: role, LogEndOffset: s.LogEndOffset, Lag: max(leaderEnd-s.LogEndOffset, 0)}
		if s.LastFetchTimestamp >= 0 {
			ago := max(now-s.LastFetchTimestamp, 0)
			rj.LastFetchMsAgo = &ago
		}
		q.Replicas = append(q.Replicas, rj)
	}
	for _, v := range p.CurrentVoters {
		role := "Follower"
		if v.ReplicaID == p.LeaderID {
			role = "Leader"
		}
		add(v, role)
	}
	for _, o := range p.Observers {
		add(o, "Observer")
	}
	return q, nil
}

type listedTxnJSON struct {
	TxnID          string   `json:"transactional_id"`
	Coordinator    int32    `json:"coordinator"`
	State          string   `json:"state"`
	ProducerID     int64    `json:"producer_id"`
	ProducerEpoch  int16    `json:"producer_epoch"`
	TimeoutMs      int32    `json:"timeout_ms"`
	StartTimestamp int64    `json:"start_timestamp"`
	Partitions     []string `json:"partitions"`
	Error          string   `json:"error,omitempty"`
}

type producerJSON struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	Leader                int32  `json:"leader"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	LastSequence          int32  `json:"last_sequence"`
	LastTimestamp         int64  `json:"last_timestamp"`
	CurrentTxnStartOffset int64  `json:"current_txn_start_offset"`
}

// transactions lists the transactional ids (ListTransactions,
// DescribeTransactions) and the active producers of every topic's
// partitions (DescribeProducers).
func (c *Console) transactions(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	ctx := r.Context()
	out := struct {
		Transactions []listedTxnJSON `json:"transactions"`
		Producers    []producerJSON  `json:"producers"`
		Error        string          `json:"error,omitempty"`
	}{Transactions: []listedTxnJSON{}, Producers: []producerJSON{}}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	var ids []string
	for _, t := range listed.Sorted() {
		ids = append(ids, t.TxnID)
	}
	if len(ids) > 0 {
		described, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil && len(described) == 0 {
			return nil, fmt.Errorf("describe transactions: %w", err)
		}
		for _, id := range ids {
			l := listed[id]
			t := listedTxnJSON{TxnID: id, Coordinator: l.Coordinator, State: l.State, ProducerID: l.ProducerID, Partitions: []string{}}
			if d, ok := described[id]; ok {
				t.State, t.ProducerEpoch, t.TimeoutMs, t.StartTimestamp = d.State, d.ProducerEpoch, d.TimeoutMillis, d.StartTimestamp
				for _, tp := range d.Topics.Sorted() {
					for _, p := range tp.Partitions {
						t.Partitions = append(t.Partitions, fmt.Sprintf("%s-%d", tp.Topic, p))
					}
				}
				t.Error = errString(d.Err)
			}
			out.Transactions = append(out.Transactions, t)
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	if len(topics) > 0 {
		producers, err := adm.DescribeProducers(ctx, topics.TopicsSet())
		if err != nil && len(producers) == 0 {
			out.Error = "describe producers: " + err.Error()
		}
		for _, t := range producers {
			for _, p := range t.Partitions {
				for _, ap := range p.ActiveProducers {
					out.Producers = append(out.Producers, producerJSON{Topic: ap.Topic, Partition: ap.Partition, Leader: ap.Leader,
						ProducerID: ap.ProducerID, ProducerEpoch: ap.ProducerEpoch, LastSequence: ap.LastSequence,
						LastTimestamp: ap.LastTimestamp, CurrentTxnStartOffset: ap.CurrentTxnStartOffset})
				}
			}
		}
		slices.SortFunc(out.Producers, func(a, b producerJSON) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			if a.Partition != b.Partition {
				return int(a.Partition - b.Partition)
			}
			return int(a.ProducerID - b.ProducerID)
		})
	}
	return out, nil
}
