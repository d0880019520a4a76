package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// The controller rpcs. Each call is one entry of rpcs: its number on the
// wire, the controller method that serves it, how its request and answer
// are encoded, and what a caller gets when the call fails as a whole.
// Requests and answers travel behind the call's error (raftnode's rpc
// framing), as Kafka's own messages where those fit (kafka.go), else in
// the shape codec of codec.go; Client sends every call through the one
// path of invoke.
//
// A call's number is the API key of the Kafka request it stands for.
// raftnode.APIAddLearner, which no Kafka request is, is the node's own.
const (
	apiCreateTopics        byte = 19
	apiDeleteTopics        byte = 20
	apiCreatePartitions    byte = 37
	apiElectLeaders        byte = 43
	apiAlterConfigs        byte = 44 // IncrementalAlterConfigs
	apiAlterReassignments  byte = 45
	apiListReassignments   byte = 46
	apiDescribeQuorum      byte = 55
	apiAlterPartition      byte = 56
	apiRegisterBroker      byte = 62 // BrokerRegistration
	apiBrokerHeartbeat     byte = 63
	apiAllocateProducerIDs byte = 67
)

// The ACL calls (acls.go).
const (
	apiCreateACLs byte = 30
	apiDeleteACLs byte = 31
)

// rpc is one controller call with request Req and answer Resp.
type rpc[Req, Resp any] struct {
	api byte
	// serve runs the call on the local controller.
	serve func(ctx context.Context, c *Controller, req Req) Resp
	// notController reports whether the answer is NOT_CONTROLLER, in
	// which case the client asks the active controller again.
	notController func(Resp) bool
	// failed is the answer when no controller answered, or the one that
	// did refused the call as a whole with err.
	failed func(req Req, err error) Resp
	// codec encodes the request and answer; nil is the shape codec.
	codec bodyCodec[Req, Resp]
}

func (r *rpc[Req, Resp]) body() bodyCodec[Req, Resp] {
	if r.codec == nil {
		return shapeCodec[Req, Resp]{}
	}
	return r.codec
}

// withCodec returns r carried by codec.
func withCodec[Req, Resp any](r *rpc[Req, Resp], codec bodyCodec[Req, Resp]) *rpc[Req, Resp] {
	r.codec = codec
	return r
}

// rpcEntry is an rpc of any types, as the server's table holds it.
type rpcEntry interface {
	number() byte
	// handle decodes a request, serves it on c and encodes the answer
	// behind the call's error.
	handle(ctx context.Context, c *Controller, body []byte) []byte
}

func (r *rpc[Req, Resp]) number() byte { return r.api }

func (r *rpc[Req, Resp]) handle(ctx context.Context, c *Controller, body []byte) []byte {
	req, err := r.body().decodeReq(body)
	if err != nil {
		return encodeValue[error](apiError(kerr.InvalidRequest, "%v", err))
	}
	return append(encodeValue[error](nil), r.body().encodeResp(r.serve(ctx, c, req))...)
}

// rpcs is the table of controller calls the server answers.
var rpcs = []rpcEntry{
	createTopicsRPC, deleteTopicsRPC, createPartitionsRPC, alterConfigsRPC,
	registerBrokerRPC, allocateProducerIDsRPC, alterPartitionRPC, electLeadersRPC,
	brokerHeartbeatRPC, describeQuorumRPC, alterReassignmentsRPC, listReassignmentsRPC,
	alterUserScramCredentialsRPC, alterClientQuotasRPC,
	createACLsRPC, deleteACLsRPC,
}

// Handlers returns the server side of the controller rpcs, for
// raftnode.Config.Handlers. controller returns the node's controller, nil
// until it runs, when calls answer NOT_CONTROLLER.
func Handlers(controller func() *Controller) map[byte]raftnode.RPCHandler {
	hs := make(map[byte]raftnode.RPCHandler, len(rpcs))
	for _, r := range rpcs {
		hs[r.number()] = func(ctx context.Context, _ uint64, body []byte) []byte {
			c := controller()
			if c == nil {
				return encodeValue[error](apiError(kerr.NotController, "the metadata node is not running"))
			}
			return r.handle(ctx, c, body)
		}
	}
	return hs
}

// anyNotController reports whether some result holds NOT_CONTROLLER.
func anyNotController[T any](errOf func(T) error) func([]T) bool {
	return func(res []T) bool {
		return slices.ContainsFunc(res, func(r T) bool { return isNotController(errOf(r)) })
	}
}

// errResult is the answer of a call whose outcome is a value and an error.
type errResult[T any] struct {
	Value T
	Err   error
}

func (r errResult[T]) notController() bool { return isNotController(r.Err) }

func failedResult[Req, T any](_ Req, err error) errResult[T] { return errResult[T]{Err: err} }

// valueRPC is an rpc whose answer is an errResult.
func valueRPC[Req, T any](api byte, serve func(ctx context.Context, c *Controller, req Req) (T, error)) *rpc[Req, errResult[T]] {
	return &rpc[Req, errResult[T]]{
		api: api,
		serve: func(ctx context.Context, c *Controller, req Req) errResult[T] {
			v, err := serve(ctx, c, req)
			return errResult[T]{v, err}
		},
		notController: errResult[T].notController,
		failed:        failedResult[Req, T],
	}
}

type createTopicsReq struct {
	Topics       []CreateTopic
	ValidateOnly bool
}

var createTopicsRPC = &rpc[createTopicsReq, []CreateTopicResult]{
	api: apiCreateTopics,
	serve: func(ctx context.Context, c *Controller, r createTopicsReq) []CreateTopicResult {
		return c.CreateTopics(ctx, r.Topics, r.ValidateOnly)
	},
	notController: anyNotController(func(r CreateTopicResult) error { return r.Err }),
	failed: func(r createTopicsReq, err error) []CreateTopicResult {
		out := make([]CreateTopicResult, len(r.Topics))
		for i, t := range r.Topics {
			out[i] = CreateTopicResult{Name: t.Name, Err: err}
		}
		return out
	},
	codec: createTopicsCodec,
}

type deleteTopicsReq struct {
	Names []string
	IDs   [][16]byte
}

var deleteTopicsRPC = &rpc[deleteTopicsReq, []DeleteTopicResult]{
	api: apiDeleteTopics,
	serve: func(ctx context.Context, c *Controller, r deleteTopicsReq) []DeleteTopicResult {
		return c.DeleteTopics(ctx, r.Names, r.IDs)
	},
	notController: anyNotController(func(r DeleteTopicResult) error { return r.Err }),
	failed: func(r deleteTopicsReq, err error) []DeleteTopicResult {
		out := make([]DeleteTopicResult, 0, len(r.Names)+len(r.IDs))
		for _, n := range r.Names {
			out = append(out, DeleteTopicResult{Name: n, Err: err})
		}
		for _, id := range r.IDs {
			out = append(out, DeleteTopicResult{ID: id, Err: err})
		}
		return out
	},
	codec: deleteTopicsCodec,
}

type createPartitionsReq struct {
	Topics       []CreatePartitions
	ValidateOnly bool
}

var createPartitionsRPC = &rpc[createPartitionsReq, []CreatePartitionsResult]{
	api: apiCreatePartitions,
	serve: func(ctx context.Context, c *Controller, r createPartitionsReq) []CreatePartitionsResult {
		return c.CreatePartitions(ctx, r.Topics, r.ValidateOnly)
	},
	notController: anyNotController(func(r CreatePartitionsResult) error { return r.Err }),
	failed: func(r createPartitionsReq, err error) []CreatePartitionsResult {
		out := make([]CreatePartitionsResult, len(r.Topics))
		for i, t := range r.Topics {
			out[i] = CreatePartitionsResult{Topic: t.Topic, Err: err}
		}
		return out
	},
	codec: createPartitionsCodec,
}

type alterConfigsReq struct {
	ResourceType int8
	Name         string
	Set          map[string]*string
	ValidateOnly bool
}

var alterConfigsRPC = withCodec(valueRPC(apiAlterConfigs, func(ctx context.Context, c *Controller, r alterConfigsReq) (struct{}, error) {
	return struct{}{}, c.AlterConfigs(ctx, r.ResourceType, r.Name, r.Set, r.ValidateOnly)
}), alterConfigsCodec)

var registerBrokerRPC = valueRPC(apiRegisterBroker, func(ctx context.Context, c *Controller, r image.RegisterBrokerRecord) (int64, error) {
	return c.RegisterBroker(ctx, r)
})

type producerIDs struct{ First, Count int64 }

var allocateProducerIDsRPC = valueRPC(apiAllocateProducerIDs, func(ctx context.Context, c *Controller, brokerID int32) (producerIDs, error) {
	first, count, err := c.AllocateProducerIDs(ctx, brokerID)
	return producerIDs{first, count}, err
})

type alterPartitionReq struct {
	TopicID        [16]byte
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []ISRMember
}

var alterPartitionRPC = valueRPC(apiAlterPartition, func(ctx context.Context, c *Controller, r alterPartitionReq) (image.PartitionImage, error) {
	return c.AlterPartition(ctx, r.TopicID, r.Partition, r.LeaderEpoch, r.PartitionEpoch, r.NewISR)
})

type electLeadersReq struct {
	Type   ElectionType
	Topics []TopicPartitions
}

var electLeadersRPC = valueRPC(apiElectLeaders, func(ctx context.Context, c *Controller, r electLeadersReq) ([]ElectLeadersTopicResult, error) {
	return c.ElectLeaders(ctx, r.Type, r.Topics)
})

type alterReassignmentsReq struct {
	Topics        []ReassignTopic
	AllowRFChange bool
}

var alterReassignmentsRPC = withCodec(valueRPC(apiAlterReassignments, func(ctx context.Context, c *Controller, r alterReassignmentsReq) ([]ReassignTopicResult, error) {
	return c.AlterPartitionReassignments(ctx, r.Topics, r.AllowRFChange)
}), alterReassignmentsCodec)

var listReassignmentsRPC = withCodec(valueRPC(apiListReassignments, func(ctx context.Context, c *Controller, topics []TopicPartitions) ([]OngoingTopicReassignments, error) {
	return c.ListPartitionReassignments(ctx, topics)
}), listReassignmentsCodec)

var brokerHeartbeatRPC = valueRPC(apiBrokerHeartbeat, func(ctx context.Context, c *Controller, hb BrokerHeartbeat) (BrokerHeartbeatResult, error) {
	return c.BrokerHeartbeat(ctx, hb)
})

var describeQuorumRPC = withCodec(valueRPC(apiDescribeQuorum, func(ctx context.Context, c *Controller, _ struct{}) (raftnode.QuorumInfo, error) {
	return c.DescribeQuorum(ctx)
}), describeQuorumCodec)
