package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func clusterCommand() *command {
	return &command{name: "cluster", short: "show the cluster's brokers and health", sub: []*command{
		{name: "info", args: "", run: clusterInfo, short: "show the cluster ID, the controller and each broker",
			examples: `  gregor cluster info
  gregor cluster info --json`},
		{name: "health", args: "", run: clusterHealth,
			short: "check that every broker is up and every partition has a leader and a full ISR; exit 1 if not",
			long: "Where it reaches a broker's HTTP listener (http.listener: its host at --http-port, or the addresses\n" +
				"given with --http), it also reads /healthz and /readyz and counts a broker not ready as unhealthy.",
			examples: `  gregor cluster health
  gregor cluster health --json && echo healthy
  gregor cluster health --http 10.0.0.5:9644 --http 10.0.0.6:9644`},
	}}
}

// clusterBroker is one broker in `cluster info`.
type clusterBroker struct {
	NodeID     int32  `json:"node_id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

func clusterInfo(c *cmd) error {
	if err := c.parse(0, 0); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	md, err := adm.BrokerMetadata(c.context())
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var brokers []clusterBroker
	var rows [][]string
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, clusterBroker{b.NodeID, b.Host, b.Port, rack, b.NodeID == md.Controller})
		id := itoa(b.NodeID)
		if b.NodeID == md.Controller {
			id += "*"
		}
		rows = append(rows, []string{id, b.Host, itoa(b.Port), dash(rack)})
	}
	if c.json {
		return c.printJSON(map[string]any{"cluster_id": md.Cluster, "controller": md.Controller, "brokers": brokers})
	}
	if err := writeRows(c.out, [][]string{{"CLUSTER", md.Cluster}, {"CONTROLLER", itoa(md.Controller)}}); err != nil {
		return err
	}
	fmt.Fprintln(c.out)
	if err := c.table([]string{"ID", "HOST", "PORT", "RACK"}, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.out, "(* the active controller)")
	return err
}

// clusterHealthReport is what `cluster health` checks.
type clusterHealthReport struct {
	Healthy                  bool     `json:"healthy"`
	Brokers                  []int32  `json:"brokers"`
	DownBrokers              []int32  `json:"down_brokers"`
	LeaderlessPartitions     []string `json:"leaderless_partitions"`
	UnderReplicatedPartition []string `json:"under_replicated_partitions"`
	// Probes are the /healthz and /readyz answers of the HTTP listeners
	// reached, one per broker at most.
	Probes []healthProbe `json:"http_probes"`
}

// healthProbe is one broker's /healthz and /readyz.
type healthProbe struct {
	NodeID  int32  `json:"node_id"`
	Address string `json:"address"`
	Live    bool   `json:"live"`
	Ready   bool   `json:"ready"`
	Detail  string `json:"detail,omitempty"` // why not ready
}

func clusterHealth(c *cmd) error {
	var httpAddrs []string
	var httpPort int
	c.listVar(&httpAddrs, "http", "", "HOST:PORT of a node's HTTP listener to probe (repeatable); default: each broker's host at --http-port")
	c.intVar(&httpPort, "http-port", "", 9644, "the port of the brokers' HTTP listeners (http.listener)")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	md, err := adm.Metadata(c.context())
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	h := clusterHealthReport{Brokers: []int32{}, DownBrokers: []int32{}, LeaderlessPartitions: []string{}, UnderReplicatedPartition: []string{}}
	for _, b := range md.Brokers {
		h.Brokers = append(h.Brokers, b.NodeID)
	}
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			name := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			if p.Leader < 0 {
				h.LeaderlessPartitions = append(h.LeaderlessPartitions, name)
			}
			if len(p.ISR) < len(p.Replicas) {
				h.UnderReplicatedPartition = append(h.UnderReplicatedPartition, name)
			}
			for _, r := range p.Replicas {
				if !slices.Contains(h.Brokers, r) && !slices.Contains(h.DownBrokers, r) {
					h.DownBrokers = append(h.DownBrokers, r)
				}
			}
		}
	}
	slices.Sort(h.DownBrokers)
	if len(httpAddrs) == 0 {
		for _, b := range md.Brokers {
			httpAddrs = append(httpAddrs, net.JoinHostPort(b.Host, strconv.Itoa(httpPort)))
		}
	}
	h.Probes = probeHTTP(c.context(), httpAddrs, md.Cluster)
	notReady := 0
	for _, p := range h.Probes {
		if !p.Live || !p.Ready {
			notReady++
		}
	}
	h.Healthy = len(h.DownBrokers) == 0 && len(h.LeaderlessPartitions) == 0 && len(h.UnderReplicatedPartition) == 0 && notReady == 0
	if err := printHealth(c, h); err != nil {
		return err
	}
	if !h.Healthy {
		return fmt.Errorf("the cluster is not healthy")
	}
	return nil
}

func printHealth(c *cmd, h clusterHealthReport) error {
	if c.json {
		return c.printJSON(h)
	}
	rows := [][]string{
		{"HEALTHY", fmt.Sprint(h.Healthy)},
		{"BROKERS", int32List(h.Brokers)},
		{"DOWN-BROKERS", dash(int32List(h.DownBrokers))},
		{"LEADERLESS-PARTITIONS", countedList(h.LeaderlessPartitions)},
		{"UNDER-REPLICATED-PARTITIONS", countedList(h.UnderReplicatedPartition)},
	}
	for _, p := range h.Probes {
		state := "live, ready"
		switch {
		case !p.Live:
			state = "not live: " + p.Detail
		case !p.Ready:
			state = "live, " + p.Detail
		}
		rows = append(rows, []string{fmt.Sprintf("NODE-%d-HTTP", p.NodeID), p.Address + " " + state})
	}
	return writeTable(c.out, []string{"CHECK", "RESULT"}, rows)
}

// countedList prints "0" or "2: t/0, t/3" (at most 10 named).
func countedList(s []string) string {
	if len(s) == 0 {
		return "0"
	}
	shown := s[:min(len(s), 10)]
	more := ""
	if len(s) > 10 {
		more = ", ..."
	}
	return fmt.Sprintf("%d: %s%s", len(s), strings.Join(shown, ", "), more)
}

func quorumCommand() *command {
	return &command{name: "quorum", short: "show the KRaft metadata quorum", sub: []*command{
		{name: "describe", args: "", run: quorumDescribe,
			short: "show the quorum's leader, epoch and high watermark, and each voter's and observer's lag (DescribeQuorum)",
			long: `As kafka-metadata-quorum describe --status and --replication together: LAG is
how many records of the metadata log a replica is behind the leader's end.`,
			examples: `  gregor quorum describe
  gregor quorum describe --json | jq .max_follower_lag`},
	}}
}

// quorumReplica is one voter or observer of the metadata quorum.
type quorumReplica struct {
	NodeID             int32  `json:"node_id"`
	Role               string `json:"role"` // Leader, Follower or Observer
	LogEndOffset       int64  `json:"log_end_offset"`
	Lag                int64  `json:"lag"`
	LastFetchMsAgo     *int64 `json:"last_fetch_ms_ago"`
	LastCaughtUpMsAgo  *int64 `json:"last_caught_up_ms_ago"`
	LastFetchTimestamp int64  `json:"last_fetch_timestamp"`
}

// quorumStatus is `quorum describe`.
type quorumStatus struct {
	LeaderID       int32           `json:"leader_id"`
	LeaderEpoch    int32           `json:"leader_epoch"`
	HighWatermark  int64           `json:"high_watermark"`
	MaxFollowerLag int64           `json:"max_follower_lag"`
	Voters         []int32         `json:"voters"`
	Observers      []int32         `json:"observers"`
	Replicas       []quorumReplica `json:"replicas"`
}

func quorumDescribe(c *cmd) error {
	if err := c.parse(0, 0); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(c.context(), cl)
	if err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("describe quorum: %w", errNoAnswer)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	return printQuorum(c, quorumFrom(p, time.Now()))
}

func quorumFrom(p kmsg.DescribeQuorumResponseTopicPartition, now time.Time) quorumStatus {
	q := quorumStatus{LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, Voters: []int32{}, Observers: []int32{}}
	var leaderEnd int64
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderEnd = v.LogEndOffset
		}
	}
	add := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		qr := quorumReplica{NodeID: r.ReplicaID, Role: role, LogEndOffset: r.LogEndOffset, Lag: max(leaderEnd-r.LogEndOffset, 0),
			LastFetchMsAgo: msAgo(r.LastFetchTimestamp, now), LastCaughtUpMsAgo: msAgo(r.LastCaughtUpTimestamp, now), LastFetchTimestamp: r.LastFetchTimestamp}
		if role == "Follower" {
			q.MaxFollowerLag = max(q.MaxFollowerLag, qr.Lag)
		}
		q.Replicas = append(q.Replicas, qr)
	}
	for _, v := range p.CurrentVoters {
		q.Voters = append(q.Voters, v.ReplicaID)
		if v.ReplicaID == p.LeaderID {
			add(v, "Leader")
		} else {
			add(v, "Follower")
		}
	}
	for _, o := range p.Observers {
		q.Observers = append(q.Observers, o.ReplicaID)
		add(o, "Observer")
	}
	return q
}

// msAgo is how long ago a timestamp was; nil when unknown (-1).
func msAgo(ts int64, now time.Time) *int64 {
	if ts < 0 {
		return nil
	}
	d := max(now.UnixMilli()-ts, 0)
	return &d
}

func printQuorum(c *cmd, q quorumStatus) error {
	if c.json {
		return c.printJSON(q)
	}
	status := [][]string{
		{"LEADER-ID", itoa(q.LeaderID)}, {"LEADER-EPOCH", itoa(q.LeaderEpoch)}, {"HIGH-WATERMARK", itoa(q.HighWatermark)},
		{"MAX-FOLLOWER-LAG", itoa(q.MaxFollowerLag)}, {"VOTERS", int32List(q.Voters)}, {"OBSERVERS", dash(int32List(q.Observers))},
	}
	if err := writeRows(c.out, status); err != nil {
		return err
	}
	fmt.Fprintln(c.out)
	var rows [][]string
	for _, r := range q.Replicas {
		rows = append(rows, []string{itoa(r.NodeID), r.Role, itoa(r.LogEndOffset), itoa(r.Lag), msText(r.LastFetchMsAgo), msText(r.LastCaughtUpMsAgo)})
	}
	return c.table([]string{"NODE-ID", "ROLE", "LOG-END-OFFSET", "LAG", "LAST-FETCH-MS-AGO", "LAST-CAUGHT-UP-MS-AGO"}, rows)
}

func msText(p *int64) string {
	if p == nil {
		return "-"
	}
	return itoa(*p)
}

// probeHTTP asks each address's /healthz and /readyz, keeping the answers
// of gregor nodes of this cluster, one per node: an address nothing
// listens on, or where another cluster's node answers, is left out.
func probeHTTP(ctx context.Context, addrs []string, cluster string) []healthProbe {
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(addr, path string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return nil, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp, strings.TrimSpace(string(body)), nil
	}
	seen := map[int32]bool{}
	var out []healthProbe
	for _, addr := range addrs {
		resp, body, err := get(addr, "/healthz")
		if err != nil {
			continue
		}
		id, err := strconv.Atoi(resp.Header.Get("Gregor-Node-Id"))
		if err != nil || resp.Header.Get("Gregor-Cluster-Id") != cluster || seen[int32(id)] {
			continue
		}
		seen[int32(id)] = true
		p := healthProbe{NodeID: int32(id), Address: addr, Live: resp.StatusCode == http.StatusOK}
		if !p.Live {
			p.Detail = body
			out = append(out, p)
			continue
		}
		resp, body, err = get(addr, "/readyz")
		switch {
		case err != nil:
			p.Detail = err.Error()
		case resp.StatusCode == http.StatusOK:
			p.Ready = true
		default:
			p.Detail = body
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b healthProbe) int { return int(a.NodeID - b.NodeID) })
	return out
}
