package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
	"github.com/gregorbroker/gregor/security/authz"
)

// API is what a broker asks of the active controller. *Controller
// serves it on the active controller itself (and answers NOT_CONTROLLER
// elsewhere); *Client serves it on any node by forwarding to
// wherever the active controller is.
type API interface {
	CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult
	DeleteTopics(ctx context.Context, names []string, ids [][16]byte) []DeleteTopicResult
	CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult
	AlterConfigs(ctx context.Context, resourceType int8, name string, set map[string]*string, validateOnly bool) error
	RegisterBroker(ctx context.Context, reg image.RegisterBrokerRecord) (int64, error)
	AllocateProducerIDs(ctx context.Context, brokerID int32) (first, count int64, err error)
	AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, newISR []ISRMember) (image.PartitionImage, error)
	ElectLeaders(ctx context.Context, typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error)
	AlterPartitionReassignments(ctx context.Context, topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error)
	ListPartitionReassignments(ctx context.Context, topics []TopicPartitions) ([]OngoingTopicReassignments, error)
	BrokerHeartbeat(ctx context.Context, hb BrokerHeartbeat) (BrokerHeartbeatResult, error)
	DescribeQuorum(ctx context.Context) (raftnode.QuorumInfo, error)
	AlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse
	AlterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse
	CreateACLs(ctx context.Context, acls []authz.ACL) []error
	DeleteACLs(ctx context.Context, filters []authz.Filter) []DeleteACLsResult
}

var (
	_ API = (*Controller)(nil)
	_ API = (*Client)(nil)
)

// DescribeQuorum returns the quorum's state for Kafka's DescribeQuorum,
// which only the leader can answer: elsewhere it fails with
// NOT_CONTROLLER.
func (c *Controller) DescribeQuorum(ctx context.Context) (raftnode.QuorumInfo, error) {
	if !c.node.IsLeader() {
		return raftnode.QuorumInfo{}, notController()
	}
	q := c.node.QuorumInfo()
	if q.LeaderID != int32(c.node.NodeID()) {
		return raftnode.QuorumInfo{}, notController()
	}
	return q, nil
}

// Client sends controller requests to the active controller from
// any node: it calls the local controller when this node is the active
// one, and otherwise forwards over the transport to the leader, retrying
// on NOT_CONTROLLER and on unreachable controllers (with the leader the
// answering node names, else the next controller) until the context ends.
// A request whose commit was interrupted by a leadership change may have
// committed before the retry: a retried CreateTopics can then answer
// TOPIC_ALREADY_EXISTS, as a Kafka client's retry would.
type Client struct {
	node       Local
	tr         *raftnode.TCPTransport
	minBackoff time.Duration
	maxBackoff time.Duration
}

// Local is the node a Client runs on, with its controller (a
// *raftmeta.Node).
type Local interface {
	NodeID() uint64
	IsLeader() bool
	LeaderID() (uint64, bool)
	Controller() *Controller
}

// NewClient returns a client for node's quorum. tr may be nil for a
// single-node cluster, where the node is always the controller.
func NewClient(node Local, tr *raftnode.TCPTransport) *Client {
	return &Client{node: node, tr: tr, minBackoff: 10 * time.Millisecond, maxBackoff: 250 * time.Millisecond}
}

// invoke runs one call of the table (rpc.go) through call and returns its
// answer, or r.failed's when no attempt produced one.
func invoke[Req, Resp any](ctx context.Context, c *Client, r *rpc[Req, Resp], req Req) Resp {
	var out Resp
	err := c.call(ctx,
		func(ctrl *Controller) bool { out = r.serve(ctx, ctrl, req); return r.notController(out) },
		r.api, r.body().encodeReq(req),
		func(b []byte) (bool, error) {
			d := compact.Decoder{Buf: b}
			if err := getErr(&d); err != nil {
				return false, err // the peer refused the call as a whole
			}
			if d.Err != nil {
				return false, fmt.Errorf("decode answer: %w", d.Err)
			}
			res, err := r.body().decodeResp(d.Buf)
			if err != nil {
				return false, err
			}
			out = res
			return r.notController(out), nil
		})
	if err != nil {
		return r.failed(req, err)
	}
	return out
}

// call runs one request. local runs it on this node's controller and
// remote decodes a forwarded answer; each reports whether its answer was
// NOT_CONTROLLER and should be retried. call returns an error only when no
// attempt produced an answer by the time ctx ended, or when the peer
// rejected the call as a whole.
func (c *Client) call(ctx context.Context, local func(*Controller) bool, api byte, req []byte, remote func([]byte) (bool, error)) error {
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
			body, leader, err := c.tr.Call(ctx, to, api, req)
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
func (c *Client) target(hint uint64, attempt int) uint64 {
	self := c.node.NodeID()
	if hint != 0 && hint != self {
		return hint
	}
	if lead, ok := c.node.LeaderID(); ok && lead != self && attempt%4 != 3 {
		return lead
	}
	ids := slices.DeleteFunc(c.tr.ControllerIDs(), func(id uint64) bool { return id == self })
	if len(ids) == 0 {
		return 0
	}
	return ids[attempt%len(ids)]
}

func isNotController(err error) bool { return err != nil && errorIs(err, kerr.NotController) }

// CreateTopics implements API.
func (c *Client) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult {
	return invoke(ctx, c, createTopicsRPC, createTopicsReq{topics, validateOnly})
}

// DeleteTopics implements API.
func (c *Client) DeleteTopics(ctx context.Context, names []string, ids [][16]byte) []DeleteTopicResult {
	return invoke(ctx, c, deleteTopicsRPC, deleteTopicsReq{names, ids})
}

// CreatePartitions implements API.
func (c *Client) CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	return invoke(ctx, c, createPartitionsRPC, createPartitionsReq{reqs, validateOnly})
}

// AlterConfigs implements API.
func (c *Client) AlterConfigs(ctx context.Context, resourceType int8, name string, set map[string]*string, validateOnly bool) error {
	return invoke(ctx, c, alterConfigsRPC, alterConfigsReq{resourceType, name, set, validateOnly}).Err
}

// RegisterBroker implements API.
func (c *Client) RegisterBroker(ctx context.Context, reg image.RegisterBrokerRecord) (int64, error) {
	r := invoke(ctx, c, registerBrokerRPC, reg)
	return r.Value, r.Err
}

// AllocateProducerIDs implements API.
func (c *Client) AllocateProducerIDs(ctx context.Context, brokerID int32) (int64, int64, error) {
	r := invoke(ctx, c, allocateProducerIDsRPC, brokerID)
	return r.Value.First, r.Value.Count, r.Err
}

// AlterPartition implements API.
func (c *Client) AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, newISR []ISRMember) (image.PartitionImage, error) {
	r := invoke(ctx, c, alterPartitionRPC, alterPartitionReq{topicID, partition, leaderEpoch, partitionEpoch, newISR})
	return r.Value, r.Err
}

// ElectLeaders implements API.
func (c *Client) ElectLeaders(ctx context.Context, typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error) {
	r := invoke(ctx, c, electLeadersRPC, electLeadersReq{typ, topics})
	return r.Value, r.Err
}

// AlterPartitionReassignments implements API.
func (c *Client) AlterPartitionReassignments(ctx context.Context, topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error) {
	r := invoke(ctx, c, alterReassignmentsRPC, alterReassignmentsReq{topics, allowRFChange})
	return r.Value, r.Err
}

// ListPartitionReassignments implements API.
func (c *Client) ListPartitionReassignments(ctx context.Context, topics []TopicPartitions) ([]OngoingTopicReassignments, error) {
	r := invoke(ctx, c, listReassignmentsRPC, topics)
	return r.Value, r.Err
}

// BrokerHeartbeat implements API.
func (c *Client) BrokerHeartbeat(ctx context.Context, hb BrokerHeartbeat) (BrokerHeartbeatResult, error) {
	r := invoke(ctx, c, brokerHeartbeatRPC, hb)
	return r.Value, r.Err
}

// DescribeQuorum implements API: it answers with the leader's view of the
// quorum.
func (c *Client) DescribeQuorum(ctx context.Context) (raftnode.QuorumInfo, error) {
	r := invoke(ctx, c, describeQuorumRPC, struct{}{})
	return r.Value, r.Err
}
