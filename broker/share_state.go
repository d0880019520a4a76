package broker

import (
	"context"
	"fmt"
	"time"

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
// load, say): the request then goes to this node's own listener. While
// the coordinator moves or loads, a request is retried for a few seconds
// (retry), so that acknowledgements wait for the new coordinator rather
// than fail.
type sharePersister struct {
	s       *Server
	clients *interbroker.Clients
}

func newSharePersister(s *Server) *sharePersister {
	return &sharePersister{s: s, clients: interbroker.NewClients(s.meta.Image, s.cfg.InterBrokerListenerName,
		kgo.ClientID(fmt.Sprintf("gregor-share-state-%d", s.cfg.NodeID)))}
}

// shareStateRetryFor bounds how long a share-state request is retried
// while its group has no share coordinator that answers: the partition of
// __share_group_state is moving to another node or loading there, which
// takes seconds. Kafka's persister retries these errors with backoff too.
const shareStateRetryFor = 10 * time.Second

// coordinatorMoving reports whether code says the share coordinator is
// moving or loading, so that the request may succeed again soon.
func coordinatorMoving(code int16) bool {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		return true
	}
	return false
}

// retry runs call until it answers something other than a coordinator
// moving, for at most shareStateRetryFor, with backoff from 50 ms to 1 s.
func retry(ctx context.Context, call func() int16) int16 {
	deadline := time.Now().Add(shareStateRetryFor)
	backoff := 50 * time.Millisecond
	for {
		code := call()
		if !coordinatorMoving(code) || time.Now().Add(backoff).After(deadline) {
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
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
	var st share.State
	retry(ctx, func() int16 {
		st = share.State{}
		r, code := p.send(ctx, key.Group, req)
		if code != 0 {
			st.ErrorCode = code
			return code
		}
		resp := r.(*kmsg.ReadShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			st.ErrorCode = kerr.UnknownServerError.Code
			return st.ErrorCode
		}
		ap := resp.Topics[0].Partitions[0]
		st = share.State{ErrorCode: ap.ErrorCode, StateEpoch: ap.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: ap.StartOffset}
		for _, b := range ap.StateBatches {
			st.Batches = append(st.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: b.DeliveryState, Deliveries: b.DeliveryCount})
		}
		return st.ErrorCode
	})
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
	return retry(ctx, func() int16 {
		r, code := p.send(ctx, key.Group, req)
		if code != 0 {
			return code
		}
		resp := r.(*kmsg.InitializeShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError.Code
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})
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
	return retry(ctx, func() int16 {
		r, code := p.send(ctx, key.Group, req)
		if code != 0 {
			return code
		}
		resp := r.(*kmsg.WriteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError.Code
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})
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
