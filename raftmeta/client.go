package raftmeta

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ControllerAPI is what a broker asks of the active controller. *Controller
// serves it on the active controller itself (and answers NOT_CONTROLLER
// elsewhere); *ControllerClient serves it on any node by forwarding to
// wherever the active controller is.
type ControllerAPI interface {
	CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult
	DeleteTopics(ctx context.Context, names []string, ids [][16]byte) []DeleteTopicResult
	CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult
	AlterConfigs(ctx context.Context, resourceType int8, name string, set map[string]*string, validateOnly bool) error
	RegisterBroker(ctx context.Context, reg RegisterBrokerRecord) (int64, error)
	AllocateProducerIDs(ctx context.Context, brokerID int32) (first, count int64, err error)
	AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, newISR []ISRMember) (PartitionImage, error)
	ElectLeaders(ctx context.Context, typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error)
	AlterPartitionReassignments(ctx context.Context, topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error)
	ListPartitionReassignments(ctx context.Context, topics []TopicPartitions) ([]OngoingTopicReassignments, error)
	BrokerHeartbeat(ctx context.Context, hb BrokerHeartbeat) (BrokerHeartbeatResult, error)
	DescribeQuorum(ctx context.Context) (QuorumInfo, error)
}

var (
	_ ControllerAPI = (*Controller)(nil)
	_ ControllerAPI = (*ControllerClient)(nil)
)

// DescribeQuorum returns the quorum's state for Kafka's DescribeQuorum,
// which only the leader can answer: elsewhere it fails with
// NOT_CONTROLLER.
func (c *Controller) DescribeQuorum(ctx context.Context) (QuorumInfo, error) {
	if !c.node.IsLeader() {
		return QuorumInfo{}, notController()
	}
	q := c.node.QuorumInfo()
	if q.LeaderID != int32(c.node.NodeID()) {
		return QuorumInfo{}, notController()
	}
	return q, nil
}

// ControllerClient sends controller requests to the active controller from
// any node: it calls the local controller when this node is the active
// one, and otherwise forwards over the transport to the leader, retrying
// on NOT_CONTROLLER and on unreachable controllers (with the leader the
// answering node names, else the next controller) until the context ends.
// A request whose commit was interrupted by a leadership change may have
// committed before the retry: a retried CreateTopics can then answer
// TOPIC_ALREADY_EXISTS, as a Kafka client's retry would.
type ControllerClient struct {
	node       *Node
	tr         *TCPTransport
	minBackoff time.Duration
	maxBackoff time.Duration
}

// NewControllerClient returns a client for node's quorum. tr may be nil for
// a single-node cluster, where the node is always the controller.
func NewControllerClient(node *Node, tr *TCPTransport) *ControllerClient {
	return &ControllerClient{node: node, tr: tr, minBackoff: 10 * time.Millisecond, maxBackoff: 250 * time.Millisecond}
}

// call runs one request. local runs it on this node's controller and
// remote decodes a forwarded answer; each reports whether its answer was
// NOT_CONTROLLER and should be retried. call returns an error only when no
// attempt produced an answer by the time ctx ended, or when the peer
// rejected the call as a whole.
func (c *ControllerClient) call(ctx context.Context, local func(*Controller) bool, api byte, req []byte, remote func([]byte) (bool, error)) error {
	var hint uint64
	var lastErr error = apiError(kerr.NotController, "no active controller was found")
	answered := false
	backoff := c.minBackoff
	for attempt := 0; ; attempt++ {
		switch {
		case c.node.IsLeader():
			answered = true
			if !local(c.node.Controller()) {
				return nil
			}
		case c.tr == nil:
			// No other node to ask: answer as the local controller does.
			local(c.node.Controller())
			return nil
		default:
			to := c.target(hint, attempt)
			hint = 0
			if to == 0 {
				break
			}
			body, leader, err := c.tr.rpcCall(ctx, to, api, req)
			if err == nil {
				var retry bool
				retry, err = remote(body)
				if err == nil {
					answered = true
					if !retry {
						return nil
					}
				}
			}
			if err != nil {
				if _, isAPI := errors.AsType[*Error](err); isAPI && !errorIs(err, kerr.NotController) {
					return err
				}
				lastErr = err
			}
			if leader != 0 && leader != to {
				hint = leader
			}
		}
		select {
		case <-ctx.Done():
			if answered {
				return nil
			}
			if errorIs(lastErr, kerr.NotController) {
				return lastErr
			}
			return &Error{Code: kerr.RequestTimedOut, Message: "no controller answered: " + lastErr.Error()}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.maxBackoff)
	}
}

// target picks the node to forward to: the leader named by the last
// answer, else the leader this node knows, else the controllers in turn.
func (c *ControllerClient) target(hint uint64, attempt int) uint64 {
	self := c.node.NodeID()
	if hint != 0 && hint != self {
		return hint
	}
	if lead, ok := c.node.LeaderID(); ok && lead != self && attempt%4 != 3 {
		return lead
	}
	ids := slices.DeleteFunc(c.tr.voterIDs(), func(id uint64) bool { return id == self })
	if len(ids) == 0 {
		return 0
	}
	return ids[attempt%len(ids)]
}

func isNotController(err error) bool { return err != nil && errorIs(err, kerr.NotController) }

// CreateTopics implements ControllerAPI.
func (c *ControllerClient) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult {
	var out []CreateTopicResult
	retry := func() bool {
		return slices.ContainsFunc(out, func(r CreateTopicResult) bool { return isNotController(r.Err) })
	}
	err := c.call(ctx,
		func(ctrl *Controller) bool { out = ctrl.CreateTopics(ctx, topics, validateOnly); return retry() },
		rpcCreateTopics, encodeCreateTopicsReq(topics, validateOnly),
		func(b []byte) (bool, error) {
			res, err := decodeCreateTopicsResp(b)
			if err == nil {
				out = res
			}
			return retry(), err
		})
	if err != nil {
		out = make([]CreateTopicResult, len(topics))
		for i, t := range topics {
			out[i] = CreateTopicResult{Name: t.Name, Err: err}
		}
	}
	return out
}

// DeleteTopics implements ControllerAPI.
func (c *ControllerClient) DeleteTopics(ctx context.Context, names []string, ids [][16]byte) []DeleteTopicResult {
	var out []DeleteTopicResult
	retry := func() bool {
		return slices.ContainsFunc(out, func(r DeleteTopicResult) bool { return isNotController(r.Err) })
	}
	err := c.call(ctx,
		func(ctrl *Controller) bool { out = ctrl.DeleteTopics(ctx, names, ids); return retry() },
		rpcDeleteTopics, encodeDeleteTopicsReq(names, ids),
		func(b []byte) (bool, error) {
			res, err := decodeDeleteTopicsResp(b)
			if err == nil {
				out = res
			}
			return retry(), err
		})
	if err != nil {
		out = make([]DeleteTopicResult, 0, len(names)+len(ids))
		for _, n := range names {
			out = append(out, DeleteTopicResult{Name: n, Err: err})
		}
		for _, id := range ids {
			out = append(out, DeleteTopicResult{ID: id, Err: err})
		}
	}
	return out
}

// CreatePartitions implements ControllerAPI.
func (c *ControllerClient) CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	var out []CreatePartitionsResult
	retry := func() bool {
		return slices.ContainsFunc(out, func(r CreatePartitionsResult) bool { return isNotController(r.Err) })
	}
	err := c.call(ctx,
		func(ctrl *Controller) bool { out = ctrl.CreatePartitions(ctx, reqs, validateOnly); return retry() },
		rpcCreatePartitions, encodeCreatePartitionsReq(reqs, validateOnly),
		func(b []byte) (bool, error) {
			res, err := decodeCreatePartitionsResp(b)
			if err == nil {
				out = res
			}
			return retry(), err
		})
	if err != nil {
		out = make([]CreatePartitionsResult, len(reqs))
		for i, r := range reqs {
			out[i] = CreatePartitionsResult{Topic: r.Topic, Err: err}
		}
	}
	return out
}

// errCall is the remote half of a call whose answer is a single error.
func errCall(out *error) func([]byte) (bool, error) {
	return func(b []byte) (bool, error) {
		res, err := decodeErrResp(b)
		if err == nil {
			*out = res
		}
		return isNotController(*out), err
	}
}

// AlterConfigs implements ControllerAPI.
func (c *ControllerClient) AlterConfigs(ctx context.Context, resourceType int8, name string, set map[string]*string, validateOnly bool) error {
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			out = ctrl.AlterConfigs(ctx, resourceType, name, set, validateOnly)
			return isNotController(out)
		},
		rpcAlterConfigs, encodeAlterConfigsReq(alterConfigsReq{resourceType, name, set, validateOnly}),
		errCall(&out))
	if err != nil {
		return err
	}
	return out
}

// RegisterBroker implements ControllerAPI.
func (c *ControllerClient) RegisterBroker(ctx context.Context, reg RegisterBrokerRecord) (int64, error) {
	var epoch int64
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool { epoch, out = ctrl.RegisterBroker(ctx, reg); return isNotController(out) },
		rpcRegisterBroker, encodeRegisterBrokerReq(reg),
		func(b []byte) (bool, error) {
			v, res, err := decodeInt64sResp(b, 1)
			if err == nil {
				epoch, out = v[0], res
			}
			return isNotController(out), err
		})
	if err != nil {
		return 0, err
	}
	return epoch, out
}

// AllocateProducerIDs implements ControllerAPI.
func (c *ControllerClient) AllocateProducerIDs(ctx context.Context, brokerID int32) (int64, int64, error) {
	var first, count int64
	var out error
	e := encoder{}
	e.int32(brokerID)
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			first, count, out = ctrl.AllocateProducerIDs(ctx, brokerID)
			return isNotController(out)
		},
		rpcAllocateProducerIDs, e.buf,
		func(b []byte) (bool, error) {
			v, res, err := decodeInt64sResp(b, 2)
			if err == nil {
				first, count, out = v[0], v[1], res
			}
			return isNotController(out), err
		})
	if err != nil {
		return 0, 0, err
	}
	return first, count, out
}

// AlterPartition implements ControllerAPI.
func (c *ControllerClient) AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, newISR []ISRMember) (PartitionImage, error) {
	var p PartitionImage
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			p, out = ctrl.AlterPartition(ctx, topicID, partition, leaderEpoch, partitionEpoch, newISR)
			return isNotController(out)
		},
		rpcAlterPartition, encodeAlterPartitionReq(alterPartitionReq{topicID, partition, leaderEpoch, partitionEpoch, newISR}),
		func(b []byte) (bool, error) {
			res, rerr, err := decodeAlterPartitionResp(b)
			if err == nil {
				p, out = res, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return PartitionImage{}, err
	}
	return p, out
}

// ElectLeaders implements ControllerAPI.
func (c *ControllerClient) ElectLeaders(ctx context.Context, typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error) {
	var res []ElectLeadersTopicResult
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			res, out = ctrl.ElectLeaders(ctx, typ, topics)
			return isNotController(out)
		},
		rpcElectLeaders, encodeElectLeadersReq(typ, topics),
		func(b []byte) (bool, error) {
			r, rerr, err := decodeElectLeadersResp(b)
			if err == nil {
				res, out = r, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return nil, err
	}
	return res, out
}

// AlterPartitionReassignments implements ControllerAPI.
func (c *ControllerClient) AlterPartitionReassignments(ctx context.Context, topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error) {
	var res []ReassignTopicResult
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			res, out = ctrl.AlterPartitionReassignments(ctx, topics, allowRFChange)
			return isNotController(out)
		},
		rpcAlterReassignments, encodeAlterReassignmentsReq(topics, allowRFChange),
		func(b []byte) (bool, error) {
			r, rerr, err := decodeAlterReassignmentsResp(b)
			if err == nil {
				res, out = r, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return nil, err
	}
	return res, out
}

// ListPartitionReassignments implements ControllerAPI.
func (c *ControllerClient) ListPartitionReassignments(ctx context.Context, topics []TopicPartitions) ([]OngoingTopicReassignments, error) {
	var res []OngoingTopicReassignments
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool {
			res, out = ctrl.ListPartitionReassignments(ctx, topics)
			return isNotController(out)
		},
		rpcListReassignments, encodeListReassignmentsReq(topics),
		func(b []byte) (bool, error) {
			r, rerr, err := decodeListReassignmentsResp(b)
			if err == nil {
				res, out = r, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return nil, err
	}
	return res, out
}

// BrokerHeartbeat implements ControllerAPI.
func (c *ControllerClient) BrokerHeartbeat(ctx context.Context, hb BrokerHeartbeat) (BrokerHeartbeatResult, error) {
	var res BrokerHeartbeatResult
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool { res, out = ctrl.BrokerHeartbeat(ctx, hb); return isNotController(out) },
		rpcBrokerHeartbeat, encodeHeartbeatReq(hb),
		func(b []byte) (bool, error) {
			r, rerr, err := decodeHeartbeatResp(b)
			if err == nil {
				res, out = r, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return BrokerHeartbeatResult{}, err
	}
	return res, out
}

// DescribeQuorum implements ControllerAPI: it answers with the leader's
// view of the quorum.
func (c *ControllerClient) DescribeQuorum(ctx context.Context) (QuorumInfo, error) {
	var q QuorumInfo
	var out error
	err := c.call(ctx,
		func(ctrl *Controller) bool { q, out = ctrl.DescribeQuorum(ctx); return isNotController(out) },
		rpcDescribeQuorum, nil,
		func(b []byte) (bool, error) {
			r, rerr, err := decodeQuorumResp(b)
			if err == nil {
				q, out = r, rerr
			}
			return isNotController(out), err
		})
	if err != nil {
		return QuorumInfo{}, err
	}
	return q, out
}
