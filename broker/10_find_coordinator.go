package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// FindCoordinator (key 10), versions 0-6; v4+ batches keys.
//
// A group's coordinator is the leader of partition
// abs(hash(group)) % offsets.topic.num.partitions of __consumer_offsets,
// with Java's String.hashCode, so a group maps to the same partition as on
// Kafka. The topic is created on the first request, as Kafka does.
// A transactional id's coordinator (key type 1) is found the same way in
// __transaction_state. Other key types answer INVALID_REQUEST.
func init() { register(10, 0, 6, handleFindCoordinator) }

const (
	coordinatorGroup = 0
	coordinatorTxn   = 1
)

func handleFindCoordinator(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.FindCoordinatorRequest)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	// Creating __consumer_offsets commits to the metadata log: do it in the
	// background phase.
	ac := s.auth(r)
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, key := range keys {
			c := s.coordinatorDenied(ac, req.CoordinatorType, key)
			if c == nil {
				found := s.findCoordinator(req.CoordinatorType, key, r.conn.listener)
				c = &found
			}
			if req.Version < 4 {
				resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
				resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
				break
			}
			resp.Coordinators = append(resp.Coordinators, *c)
		}
		return resp
	})
}

// coordinatorDenied is KafkaApis.getCoordinator's check: DESCRIBE on the
// group, or on the transactional id, else GROUP_AUTHORIZATION_FAILED or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; nil when allowed.
func (s *Server) coordinatorDenied(ac authCheck, keyType int8, key string) *kmsg.FindCoordinatorResponseCoordinator {
	var ke *kerr.Error
	switch {
	case keyType == coordinatorGroup && !ac.group(authz.OpDescribe, key):
		ke = kerr.GroupAuthorizationFailed
	case keyType == coordinatorTxn && !ac.txnID(authz.OpDescribe, key):
		ke = kerr.TransactionalIDAuthorizationFailed
	default:
		return nil
	}
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, ke.Code
	msg := ke.Description
	c.ErrorMessage = &msg
	return &c
}

func (s *Server) findCoordinator(keyType int8, key, listener string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID, c.Port = -1, -1
	fail := func(ke *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode = ke.Code
		msg := ke.Description
		c.ErrorMessage = &msg
		return c
	}
	// Kafka finds a coordinator for the empty group id (partition 0), whose
	// offsets old clients still commit and fetch.
	if key == "" && keyType != coordinatorGroup || keyType != coordinatorGroup && keyType != coordinatorTxn {
		return fail(kerr.InvalidRequest)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	topic := offsetsTopic
	ensure := s.ensureOffsetsTopic
	if keyType == coordinatorTxn {
		topic, ensure = txnStateTopic, s.ensureTxnTopic
	}
	img, err := ensure(ctx)
	if err != nil {
		s.log.Warn("create "+topic, "err", err)
		return fail(kerr.CoordinatorNotAvailable)
	}
	t, ok := img.Topic(topic)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable)
	}
	p := group.PartitionFor(key, int32(len(t.Partitions)))
	leader := t.Partitions[p].Leader
	b, ok := img.Broker(leader)
	if !ok || leader == image.NoLeader {
		return fail(kerr.CoordinatorNotAvailable)
	}
	l, ok := b.Listener(listener)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable)
	}
	c.NodeID, c.Host, c.Port = leader, l.Host, l.Port
	return c
}
