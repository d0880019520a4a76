package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/interbroker"
	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/security/authz"
)

// sharePersister is share.Persister between brokers: the leader of a
// topic partition reads and writes the durable state of the share
// partitions it serves with the share coordinator of their group, the
// leader of the group's partition of __share_group_state, with
// InitializeShareGroupState (83), ReadShareGroupState (84) and
// WriteShareGroupState (85) on its inter-broker listener (Kafka's
// DefaultStatePersister). The coordinator may be this node (during its
// load, say): the request then goes to this node's own listener.
type sharePersister struct {
	s       *Server
	clients *interbroker.Clients
}

func newSharePersister(s *Server) *sharePersister {
	return &sharePersister{s: s, clients: interbroker.NewClients(s.meta.Image, s.cfg.InterBrokerListenerName,
		kgo.ClientID(fmt.Sprintf("gregor-share-state-%d", s.cfg.NodeID)))}
}

// send sends req to the share coordinator of group and returns its answer,
// or the code that says why there is none.
func (p *sharePersister) send(ctx context.Context, group string, req kmsg.Request) (kmsg.Response, int16) {
	img := p.s.meta.Image()
	t, ok := img.Topic(share.StateTopic)
	i := p.s.shares.coord.PartitionFor(group)
	if !ok || int(i) >= len(t.Partitions) || t.Partitions[i].Leader < 0 {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	b, err := p.clients.Broker(t.Partitions[i].Leader)
	if err != nil {
		p.s.log.Debug("share state request", "group", group, "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	ctx, cancel := context.WithTimeout(ctx, interbroker.RequestTimeout)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		p.s.log.Debug("share state request", "group", group, "node", t.Partitions[i].Leader, "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return resp, 0
}

func (p *sharePersister) ReadState(ctx context.Context, key share.StateKey, leaderEpoch int32) share.State {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = key.Group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = key.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = key.Partition, leaderEpoch
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	r, code := p.send(ctx, key.Group, req)
	if code != 0 {
		return share.State{ErrorCode: code}
	}
	resp := r.(*kmsg.ReadShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return share.State{ErrorCode: kerr.UnknownServerError.Code}
	}
	ap := resp.Topics[0].Partitions[0]
	st := share.State{ErrorCode: ap.ErrorCode, StateEpoch: ap.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: ap.StartOffset}
	for _, b := range ap.StateBatches {
		st.Batches = append(st.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: b.DeliveryState, Deliveries: b.DeliveryCount})
	}
	return st
}

func (p *sharePersister) InitializeState(ctx context.Context, key share.StateKey, stateEpoch int32, startOffset int64) int16 {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = key.Group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = key.TopicID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = key.Partition, stateEpoch, startOffset
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	r, code := p.send(ctx, key.Group, req)
	if code != 0 {
		return code
	}
	resp := r.(*kmsg.InitializeShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (p *sharePersister) WriteState(ctx context.Context, key share.StateKey, w share.StateWrite) int16 {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = key.Group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = key.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = key.Partition, w.StateEpoch, w.LeaderEpoch, w.StartOffset
	for _, b := range w.Batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, b.State, b.Deliveries
		rp.StateBatches = append(rp.StateBatches, sb)
	}
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	r, code := p.send(ctx, key.Group, req)
	if code != 0 {
		return code
	}
	resp := r.(*kmsg.WriteShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// shareStateDenied checks CLUSTER_ACTION on the cluster for the share-state
// requests, which only brokers send, as Kafka's KafkaApis; it answers
// CLUSTER_AUTHORIZATION_FAILED for every partition when denied.
func (s *Server) shareStateDenied(r *request) int16 {
	if s.auth(r).cluster(authz.OpClusterAction) {
		return 0
	}
	return kerr.ClusterAuthorizationFailed.Code
}
