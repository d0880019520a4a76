package broker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/broker/internal/coordhost"
	"github.com/gregorbroker/gregor/broker/internal/interbroker"
	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/storage"
)

// shareCoordinator connects broker/share to the broker: share groups and
// their share-partition state, kept in __share_group_state, which is
// created on the first share-group request. The coordinator of a share
// group is the leader of the group's partition of that topic; this node
// loads the partitions it comes to lead, as for __consumer_offsets.
type shareCoordinator struct {
	coord  *share.Coordinator
	loader *coordhost.Loader
	// persister carries the state of the share partitions this node
	// leads to their groups' share coordinators on other nodes.
	persister *sharePersister
	// forward connects to the nodes share-group requests are forwarded to (see
	// forwardShareGroup).
	forward *interbroker.Clients
}

// shareForwardClientID prefixes the client id of forwarded heartbeats,
// which are not forwarded again.
const shareForwardClientID = "gregor-share-forward"

// forwardShareGroup relays a request of one share group's coordinator
// (ShareGroupHeartbeat, ShareGroupDescribe, the offsets admin requests)
// to the node that keeps the group's membership. Clients send them to the
// group's coordinator, the leader of its __consumer_offsets partition
// (FindCoordinator), while Gregor keeps a share group with the leader of
// its __share_group_state partition. The two are one node while
// preferred leaders lead (the topic takes __consumer_offsets' replica
// assignment), but may differ after a failover until leadership is
// balanced again: then the node clients find forwards the request over
// the inter-broker listener and relays the answer, where it would
// otherwise answer NOT_COORDINATOR to a client that finds it again. It
// reports false when the request is this node's to answer.
func (s *Server) forwardShareGroup(r *request, group string, req kmsg.Request) (kmsg.Response, bool) {
	if r.hdr.ClientID != nil && strings.HasPrefix(*r.hdr.ClientID, shareForwardClientID) {
		return nil, false
	}
	img := s.meta.Image()
	st, ok1 := img.Topic(share.StateTopic)
	offs, ok2 := img.Topic(offsetsTopic)
	sp, op := s.shares.coord.PartitionFor(group), s.groups.coord.PartitionFor(group)
	if !ok1 || !ok2 || int(sp) >= len(st.Partitions) || int(op) >= len(offs.Partitions) {
		return nil, false
	}
	leader := st.Partitions[sp].Leader
	if leader < 0 || leader == s.cfg.NodeID || offs.Partitions[op].Leader != s.cfg.NodeID {
		return nil, false
	}
	b, err := s.shares.forward.Broker(leader)
	if err != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.conn.ctx, interbroker.RequestTimeout)
	defer cancel()
	version := req.GetVersion()
	resp, err := b.Request(ctx, req)
	if err != nil {
		s.log.Debug("forward share group request", "group", group, "api", kmsg.NameForKey(req.Key()), "node", leader, "err", err)
		return nil, false
	}
	resp.SetVersion(version) // answered in the client's version
	return resp, true
}

func (s *Server) startShareCoordinator() error {
	cfg := share.DefaultConfig()
	cfg.StatePartitions = s.cfg.ShareCoordinatorStateTopicNumPartitions
	cfg.UpdatesPerSnapshot = int(s.cfg.ShareCoordinatorUpdatesPerSnapshot)
	cfg.Shards = runtime.GOMAXPROCS(0)
	cfg.SessionTimeoutMs = s.cfg.GroupShareSessionTimeoutMs
	cfg.HeartbeatIntervalMs = s.cfg.GroupShareHeartbeatIntervalMs
	cfg.AssignmentIntervalMs = s.cfg.GroupShareAssignmentIntervalMs
	cfg.RecordLockDurationMs = s.cfg.GroupShareRecordLockDurationMs
	cfg.DeliveryCountLimit = s.cfg.GroupShareDeliveryCountLimit
	cfg.PartitionMaxRecordLocks = s.cfg.GroupSharePartitionMaxRecordLocks
	cfg.MaxSize = s.cfg.GroupShareMaxSize
	cfg.Topics = shareTopics{s}
	cfg.Offsets = func(topic string, partition int32) (int64, int64, bool) {
		p := s.leaderPartition(topic, partition)
		if p == nil {
			return 0, 0, false
		}
		return p.Log.LogStartOffset(), p.HighWatermark(), true
	}
	cfg.LeaderEpoch = func(topic string, partition int32) int32 {
		if p := s.leaderPartition(topic, partition); p != nil {
			return p.LeaderEpoch.Load()
		}
		return -1
	}
	cfg.GroupConfig = s.groupConfigLookup
	persister := newSharePersister(s)
	cfg.Persister = persister
	cfg.Logger = s.log.With("component", "share-groups")
	c, err := share.New(cfg, internalStore{s, share.StateTopic}, group.SystemClock{})
	if err != nil {
		return fmt.Errorf("start share coordinator: %w", err)
	}
	sc := &shareCoordinator{coord: c, persister: persister,
		forward: interbroker.NewClients(s.meta.Image, s.cfg.InterBrokerListenerName,
			kgo.ClientID(fmt.Sprintf("%s-%d", shareForwardClientID, s.cfg.NodeID)))}
	sc.loader = s.newCoordinatorLoader(share.StateTopic,
		func(ctx context.Context, partition, _ int32, log *storage.Log) error {
			return c.Load(ctx, partition, coordhost.ReadLog(ctx, log))
		},
		c.Unload)
	s.shares = sc
	return nil
}

// ensureShareStateTopic creates __share_group_state if it does not exist
// yet, with Kafka's settings for it except the cleanup policy: Gregor
// writes whole snapshots, so compaction keeps what it needs (Kafka's share
// coordinator prunes the topic itself).
//
// Clients send a share group's heartbeats to its group coordinator (the
// leader of its __consumer_offsets partition), while Gregor keeps the
// group with the leader of its __share_group_state partition. When both
// topics have the same partition count and replication factor, the new
// topic takes __consumer_offsets' replica assignment, so that a group's
// two partitions have the same replicas and preferred leader, and the
// same node serves both.
func (s *Server) ensureShareStateTopic(ctx context.Context) (*image.Image, error) {
	configs := map[string]string{
		"cleanup.policy":      "compact",
		"compression.type":    "producer",
		"min.insync.replicas": strconv.Itoa(int(min(s.cfg.ShareCoordinatorStateTopicMinISR, s.cfg.ShareCoordinatorStateTopicRF))),
		"segment.bytes":       strconv.Itoa(100 << 20),
	}
	partitions, rf := s.cfg.ShareCoordinatorStateTopicNumPartitions, s.cfg.ShareCoordinatorStateTopicRF
	img := s.meta.Image()
	if _, ok := img.Topic(share.StateTopic); ok {
		return img, nil
	}
	if partitions != s.cfg.OffsetsTopicNumPartitions || rf != s.cfg.OffsetsTopicReplicationFactor {
		return s.ensureInternalTopic(ctx, share.StateTopic, partitions, rf, configs)
	}
	img, err := s.ensureOffsetsTopic(ctx)
	if err != nil {
		return nil, err
	}
	offsets, ok := img.Topic(offsetsTopic)
	if !ok || int32(len(offsets.Partitions)) != partitions {
		return s.ensureInternalTopic(ctx, share.StateTopic, partitions, rf, configs)
	}
	assignments := make(map[int32][]int32, partitions)
	for i, p := range offsets.Partitions {
		// Target replicas first during a reassignment: leave out those
		// being removed.
		replicas := slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.RemovingReplicas, r) })
		assignments[int32(i)] = replicas
	}
	res := s.ctrl.CreateTopics(ctx, []controller.CreateTopic{{
		Name: share.StateTopic, NumPartitions: -1, ReplicationFactor: -1, Assignments: assignments, Configs: configs,
	}}, false)
	if err := res[0].Err; err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("create %s: %w", share.StateTopic, err)
	}
	img = s.meta.Image()
	if err := s.reconcile(img); err != nil {
		s.log.Error("apply metadata", "err", err)
	}
	return img, nil
}

// shareReady creates __share_group_state if needed and, when this node
// leads the group's partition of it, waits (a few seconds at most) for
// the partition to be loaded: the first share-group request of a
// cluster creates the topic, and its answer should not be a
// NOT_COORDINATOR that only says the load is still running.
func (s *Server) shareReady(ctx context.Context, group string) error {
	img, err := s.ensureShareStateTopic(ctx)
	if err != nil {
		return err
	}
	t, ok := img.Topic(share.StateTopic)
	if !ok {
		return nil
	}
	p := s.shares.coord.PartitionFor(group)
	if int(p) >= len(t.Partitions) || t.Partitions[p].Leader != s.cfg.NodeID {
		return nil // the coordinator answers NOT_COORDINATOR
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for !s.shares.coord.Loaded(ctx, group) {
		select {
		case <-ctx.Done():
			return nil // the coordinator answers for itself
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// shareTopics is the share coordinator's view of the topics.
type shareTopics struct{ s *Server }

func (v shareTopics) Topics() map[string]share.TopicInfo {
	img := v.s.meta.Image()
	out := make(map[string]share.TopicInfo)
	for _, name := range img.TopicNames() {
		if isInternalTopic(name) {
			continue
		}
		t, _ := img.Topic(name)
		out[name] = share.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	return out
}

// shareClientInfo describes the connection for ShareGroupDescribe.
func (r *request) shareClientInfo() share.ClientInfo {
	ci := r.clientInfo()
	return share.ClientInfo{ClientID: ci.ClientID, ClientHost: ci.ClientHost}
}

// shareGroupConflict answers GROUP_ID_NOT_FOUND when a member joins a share
// group whose id a classic or consumer group holds, as Kafka, which keeps
// one group of a kind per id; 0 otherwise. Only joins (epoch 0) can
// create a share group, so only they are checked.
func (s *Server) shareGroupConflict(r *request, groupID string) int16 {
	req, ok := r.req.(*kmsg.ShareGroupHeartbeatRequest)
	if !ok || req.MemberEpoch != 0 {
		return 0
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 5
	d.Groups = []string{groupID}
	resp := s.groups.coord.DescribeGroups(r.conn.ctx, d)()
	if len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && resp.Groups[0].State != "Dead" {
		return kerr.GroupIDNotFound.Code // a classic group
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{groupID}
	cresp := s.groups.coord.ConsumerGroupDescribe(r.conn.ctx, cd)()
	if len(cresp.Groups) == 1 && cresp.Groups[0].ErrorCode == 0 {
		return kerr.GroupIDNotFound.Code // a consumer group
	}
	if sg := s.groups.coord.StreamsGroupDescribe(r.conn.ctx, []string{groupID}, 0, false)(); len(sg) == 1 && sg[0].ErrorCode == 0 {
		return kerr.GroupIDNotFound.Code // a streams group
	}
	return 0
}

// listShareGroups adds the share groups to a ListGroups answer, with the
// request's filters (case-insensitive): Kafka lists a share group with
// protocol type "share" and group type "share" (GroupType.SHARE).
func (s *Server) listShareGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "share") }) {
		return
	}
	for _, g := range s.shares.coord.ListGroups() {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(st string) bool { return strings.EqualFold(st, g.State) }) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, "share", g.State, "share"
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
}

// deleteGroups deletes share groups through the share coordinator and the
// others through the group coordinator, answering in request order.
func (s *Server) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	var others []string
	shares := map[string]coord.Pending[int16]{}
	for _, g := range req.Groups {
		if _, dup := shares[g]; !dup && s.shares.coord.IsShareGroup(ctx, g) {
			shares[g] = s.shares.coord.DeleteGroup(ctx, g)
			continue
		}
		others = append(others, g)
	}
	var rest *kmsg.DeleteGroupsResponse
	if len(others) > 0 || len(shares) == 0 {
		sub := *req
		sub.Groups = others
		rest = s.groups.coord.DeleteGroups(ctx, &sub)()
	}
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	next := 0
	for _, g := range req.Groups {
		if p, ok := shares[g]; ok {
			d := kmsg.NewDeleteGroupsResponseGroup()
			d.Group, d.ErrorCode = g, p()
			resp.Groups = append(resp.Groups, d)
			continue
		}
		resp.Groups = append(resp.Groups, rest.Groups[next])
		next++
	}
	return resp
}

// closeShareSessions ends the share sessions the connection opened, once
// it has ended: Kafka ties a share session to its connection and releases
// what the member holds when the connection goes away, so another member
// gets those records without waiting for their locks to end.
func (c *conn) closeShareSessions() {
	if c.shareSessions.Load() && c.s.shares != nil {
		c.s.shares.coord.ConnectionClosed(c.id)
	}
}
