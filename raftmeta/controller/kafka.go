package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// Calls whose request and answer Kafka's own messages carry without loss
// travel as those messages, encoded by kmsg at one version, so that what
// goes between Gregor nodes reads as the Kafka requests they stand for:
// CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
// AlterPartitionReassignments, ListPartitionReassignments and
// DescribeQuorum. (An empty assignment or config map of a topic to create
// reads back as nil, which the controller does not tell apart.) The
// others keep the shape codec: Kafka's BrokerRegistration,
// AllocateProducerIds and ElectLeaders answers carry no message with
// their error code, Gregor's heartbeat names offline partitions where
// Kafka's names log dirs, and its AlterPartition answers with the whole
// partition, replicas and reassignment included.

// bodyCodec turns a call's request and answer into bytes and back.
type bodyCodec[Req, Resp any] interface {
	encodeReq(Req) []byte
	decodeReq([]byte) (Req, error)
	encodeResp(Resp) []byte
	decodeResp([]byte) (Resp, error)
}

// shapeCodec is codec.go's encoding of the Go values themselves.
type shapeCodec[Req, Resp any] struct{}

func (shapeCodec[Req, Resp]) encodeReq(r Req) []byte            { return encodeValue(r) }
func (shapeCodec[Req, Resp]) decodeReq(b []byte) (Req, error)   { return decodeValue[Req](b) }
func (shapeCodec[Req, Resp]) encodeResp(r Resp) []byte          { return encodeValue(r) }
func (shapeCodec[Req, Resp]) decodeResp(b []byte) (Resp, error) { return decodeValue[Resp](b) }

// kafkaCodec carries a call on Kafka's request KReq and response KResp at
// version.
type kafkaCodec[Req, Resp any, KReq kmsg.Request, KResp kmsg.Response] struct {
	version  int16
	newReq   func() KReq
	newResp  func() KResp
	toReq    func(Req) KReq
	fromReq  func(KReq) (Req, error)
	toResp   func(Resp) KResp
	fromResp func(KResp) (Resp, error)
}

func (k kafkaCodec[Req, Resp, KReq, KResp]) encodeReq(r Req) []byte {
	m := k.toReq(r)
	m.SetVersion(k.version)
	return m.AppendTo(nil)
}

func (k kafkaCodec[Req, Resp, KReq, KResp]) decodeReq(b []byte) (Req, error) {
	m := k.newReq()
	m.SetVersion(k.version)
	if err := m.ReadFrom(b); err != nil {
		var zero Req
		return zero, fmt.Errorf("decode %T: %w", m, err)
	}
	return k.fromReq(m)
}

func (k kafkaCodec[Req, Resp, KReq, KResp]) encodeResp(r Resp) []byte {
	m := k.toResp(r)
	m.SetVersion(k.version)
	return m.AppendTo(nil)
}

func (k kafkaCodec[Req, Resp, KReq, KResp]) decodeResp(b []byte) (Resp, error) {
	m := k.newResp()
	m.SetVersion(k.version)
	if err := m.ReadFrom(b); err != nil {
		var zero Resp
		return zero, fmt.Errorf("decode %T: %w", m, err)
	}
	return k.fromResp(m)
}

// kafkaErr splits err into Kafka's error code and message fields, as
// putErr writes them.
func kafkaErr(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := ErrorMessage(err)
	if _, ok := errors.AsType[*kerr.Error](err); !ok {
		s := err.Error()
		msg = &s
	}
	return ErrorCode(err), msg
}

// fromKafkaErr is what getErr reads for code and msg.
func fromKafkaErr(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	e := &Error{Code: kerr.TypedErrorForCode(code)}
	if msg != nil {
		e.Message = *msg
	}
	return e
}

var createTopicsCodec = kafkaCodec[createTopicsReq, []CreateTopicResult, *kmsg.CreateTopicsRequest, *kmsg.CreateTopicsResponse]{
	version: 7,
	newReq:  kmsg.NewPtrCreateTopicsRequest,
	newResp: kmsg.NewPtrCreateTopicsResponse,
	toReq: func(r createTopicsReq) *kmsg.CreateTopicsRequest {
		m := kmsg.NewPtrCreateTopicsRequest()
		m.ValidateOnly = r.ValidateOnly
		for _, t := range r.Topics {
			kt := kmsg.NewCreateTopicsRequestTopic()
			kt.Topic, kt.NumPartitions, kt.ReplicationFactor = t.Name, t.NumPartitions, t.ReplicationFactor
			for _, p := range slices.Sorted(maps.Keys(t.Assignments)) {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, t.Assignments[p]
				kt.ReplicaAssignment = append(kt.ReplicaAssignment, a)
			}
			for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = k, new(t.Configs[k])
				kt.Configs = append(kt.Configs, c)
			}
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromReq: func(m *kmsg.CreateTopicsRequest) (createTopicsReq, error) {
		r := createTopicsReq{ValidateOnly: m.ValidateOnly, Topics: make([]CreateTopic, len(m.Topics))}
		for i, kt := range m.Topics {
			t := CreateTopic{Name: kt.Topic, NumPartitions: kt.NumPartitions, ReplicationFactor: kt.ReplicationFactor}
			for _, a := range kt.ReplicaAssignment {
				if t.Assignments == nil {
					t.Assignments = map[int32][]int32{}
				}
				t.Assignments[a.Partition] = a.Replicas
			}
			for _, c := range kt.Configs {
				if c.Value == nil {
					return createTopicsReq{}, fmt.Errorf("config %s of topic %s has no value", c.Name, kt.Topic)
				}
				if t.Configs == nil {
					t.Configs = map[string]string{}
				}
				t.Configs[c.Name] = *c.Value
			}
			r.Topics[i] = t
		}
		return r, nil
	},
	toResp: func(res []CreateTopicResult) *kmsg.CreateTopicsResponse {
		m := kmsg.NewPtrCreateTopicsResponse()
		for _, r := range res {
			kt := kmsg.NewCreateTopicsResponseTopic()
			kt.Topic, kt.TopicID, kt.NumPartitions, kt.ReplicationFactor = r.Name, r.ID, r.NumPartitions, r.ReplicationFactor
			kt.ErrorCode, kt.ErrorMessage = kafkaErr(r.Err)
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromResp: func(m *kmsg.CreateTopicsResponse) ([]CreateTopicResult, error) {
		res := make([]CreateTopicResult, len(m.Topics))
		for i, kt := range m.Topics {
			res[i] = CreateTopicResult{Name: kt.Topic, ID: kt.TopicID, Err: fromKafkaErr(kt.ErrorCode, kt.ErrorMessage),
				NumPartitions: kt.NumPartitions, ReplicationFactor: kt.ReplicationFactor}
		}
		return res, nil
	},
}

// DeleteTopics carries the names first and the IDs after, each as a topic
// entry with only its name or only its ID; the answer's entries are in
// the same order, as DeleteTopicResult lists them.
var deleteTopicsCodec = kafkaCodec[deleteTopicsReq, []DeleteTopicResult, *kmsg.DeleteTopicsRequest, *kmsg.DeleteTopicsResponse]{
	version: 6,
	newReq:  kmsg.NewPtrDeleteTopicsRequest,
	newResp: kmsg.NewPtrDeleteTopicsResponse,
	toReq: func(r deleteTopicsReq) *kmsg.DeleteTopicsRequest {
		m := kmsg.NewPtrDeleteTopicsRequest()
		for _, n := range r.Names {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = new(n)
			m.Topics = append(m.Topics, t)
		}
		for _, id := range r.IDs {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.TopicID = id
			m.Topics = append(m.Topics, t)
		}
		return m
	},
	fromReq: func(m *kmsg.DeleteTopicsRequest) (deleteTopicsReq, error) {
		var r deleteTopicsReq
		for _, t := range m.Topics {
			switch {
			case t.Topic != nil && len(r.IDs) > 0:
				return deleteTopicsReq{}, errors.New("a topic name after the topic IDs")
			case t.Topic != nil:
				r.Names = append(r.Names, *t.Topic)
			default:
				r.IDs = append(r.IDs, t.TopicID)
			}
		}
		return r, nil
	},
	toResp: func(res []DeleteTopicResult) *kmsg.DeleteTopicsResponse {
		m := kmsg.NewPtrDeleteTopicsResponse()
		for _, r := range res {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID = new(r.Name), r.ID
			t.ErrorCode, t.ErrorMessage = kafkaErr(r.Err)
			m.Topics = append(m.Topics, t)
		}
		return m
	},
	fromResp: func(m *kmsg.DeleteTopicsResponse) ([]DeleteTopicResult, error) {
		res := make([]DeleteTopicResult, len(m.Topics))
		for i, t := range m.Topics {
			res[i] = DeleteTopicResult{ID: t.TopicID, Err: fromKafkaErr(t.ErrorCode, t.ErrorMessage)}
			if t.Topic != nil {
				res[i].Name = *t.Topic
			}
		}
		return res, nil
	},
}

var createPartitionsCodec = kafkaCodec[createPartitionsReq, []CreatePartitionsResult, *kmsg.CreatePartitionsRequest, *kmsg.CreatePartitionsResponse]{
	version: 3,
	newReq:  kmsg.NewPtrCreatePartitionsRequest,
	newResp: kmsg.NewPtrCreatePartitionsResponse,
	toReq: func(r createPartitionsReq) *kmsg.CreatePartitionsRequest {
		m := kmsg.NewPtrCreatePartitionsRequest()
		m.ValidateOnly = r.ValidateOnly
		for _, t := range r.Topics {
			kt := kmsg.NewCreatePartitionsRequestTopic()
			kt.Topic, kt.Count = t.Topic, t.Count
			if t.Assignments != nil {
				kt.Assignment = make([]kmsg.CreatePartitionsRequestTopicAssignment, len(t.Assignments))
				for i, replicas := range t.Assignments {
					kt.Assignment[i] = kmsg.NewCreatePartitionsRequestTopicAssignment()
					kt.Assignment[i].Replicas = replicas
				}
			}
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromReq: func(m *kmsg.CreatePartitionsRequest) (createPartitionsReq, error) {
		r := createPartitionsReq{ValidateOnly: m.ValidateOnly, Topics: make([]CreatePartitions, len(m.Topics))}
		for i, kt := range m.Topics {
			r.Topics[i] = CreatePartitions{Topic: kt.Topic, Count: kt.Count}
			if kt.Assignment != nil {
				r.Topics[i].Assignments = make([][]int32, len(kt.Assignment))
				for j, a := range kt.Assignment {
					r.Topics[i].Assignments[j] = a.Replicas
				}
			}
		}
		return r, nil
	},
	toResp: func(res []CreatePartitionsResult) *kmsg.CreatePartitionsResponse {
		m := kmsg.NewPtrCreatePartitionsResponse()
		for _, r := range res {
			kt := kmsg.NewCreatePartitionsResponseTopic()
			kt.Topic = r.Topic
			kt.ErrorCode, kt.ErrorMessage = kafkaErr(r.Err)
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromResp: func(m *kmsg.CreatePartitionsResponse) ([]CreatePartitionsResult, error) {
		res := make([]CreatePartitionsResult, len(m.Topics))
		for i, kt := range m.Topics {
			res[i] = CreatePartitionsResult{Topic: kt.Topic, Err: fromKafkaErr(kt.ErrorCode, kt.ErrorMessage)}
		}
		return res, nil
	},
}

// AlterConfigs is one resource of an IncrementalAlterConfigs: a set value
// is SET, a nil one DELETE.
var alterConfigsCodec = kafkaCodec[alterConfigsReq, errResult[struct{}], *kmsg.IncrementalAlterConfigsRequest, *kmsg.IncrementalAlterConfigsResponse]{
	version: 1,
	newReq:  kmsg.NewPtrIncrementalAlterConfigsRequest,
	newResp: kmsg.NewPtrIncrementalAlterConfigsResponse,
	toReq: func(r alterConfigsReq) *kmsg.IncrementalAlterConfigsRequest {
		m := kmsg.NewPtrIncrementalAlterConfigsRequest()
		m.ValidateOnly = r.ValidateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceType(r.ResourceType), r.Name
		for _, k := range slices.Sorted(maps.Keys(r.Set)) {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value, c.Op = k, r.Set[k], kmsg.IncrementalAlterConfigOpSet
			if c.Value == nil {
				c.Op = kmsg.IncrementalAlterConfigOpDelete
			}
			res.Configs = append(res.Configs, c)
		}
		m.Resources = append(m.Resources, res)
		return m
	},
	fromReq: func(m *kmsg.IncrementalAlterConfigsRequest) (alterConfigsReq, error) {
		if len(m.Resources) != 1 {
			return alterConfigsReq{}, fmt.Errorf("%d resources, want 1", len(m.Resources))
		}
		res := m.Resources[0]
		r := alterConfigsReq{ResourceType: int8(res.ResourceType), Name: res.ResourceName, ValidateOnly: m.ValidateOnly}
		for _, c := range res.Configs {
			if r.Set == nil {
				r.Set = map[string]*string{}
			}
			switch {
			case c.Op == kmsg.IncrementalAlterConfigOpDelete:
				r.Set[c.Name] = nil
			case c.Op == kmsg.IncrementalAlterConfigOpSet && c.Value != nil:
				r.Set[c.Name] = c.Value
			default:
				return alterConfigsReq{}, fmt.Errorf("config %s: operation %v with value %v", c.Name, c.Op, c.Value)
			}
		}
		return r, nil
	},
	toResp: func(r errResult[struct{}]) *kmsg.IncrementalAlterConfigsResponse {
		m := kmsg.NewPtrIncrementalAlterConfigsResponse()
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ErrorCode, res.ErrorMessage = kafkaErr(r.Err)
		m.Resources = append(m.Resources, res)
		return m
	},
	fromResp: func(m *kmsg.IncrementalAlterConfigsResponse) (errResult[struct{}], error) {
		if len(m.Resources) != 1 {
			return errResult[struct{}]{}, fmt.Errorf("%d resources answered, want 1", len(m.Resources))
		}
		return errResult[struct{}]{Err: fromKafkaErr(m.Resources[0].ErrorCode, m.Resources[0].ErrorMessage)}, nil
	},
}

var alterReassignmentsCodec = kafkaCodec[alterReassignmentsReq, errResult[[]ReassignTopicResult], *kmsg.AlterPartitionAssignmentsRequest, *kmsg.AlterPartitionAssignmentsResponse]{
	version: 1,
	newReq:  kmsg.NewPtrAlterPartitionAssignmentsRequest,
	newResp: kmsg.NewPtrAlterPartitionAssignmentsResponse,
	toReq: func(r alterReassignmentsReq) *kmsg.AlterPartitionAssignmentsRequest {
		m := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		m.AllowReplicationFactorChange = r.AllowRFChange
		for _, t := range r.Topics {
			kt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			kt.Topic = t.Topic
			for _, p := range t.Partitions {
				kp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				kp.Partition, kp.Replicas = p.Partition, p.Replicas // nil, a cancel, stays nil
				kt.Partitions = append(kt.Partitions, kp)
			}
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromReq: func(m *kmsg.AlterPartitionAssignmentsRequest) (alterReassignmentsReq, error) {
		r := alterReassignmentsReq{AllowRFChange: m.AllowReplicationFactorChange, Topics: make([]ReassignTopic, len(m.Topics))}
		for i, kt := range m.Topics {
			r.Topics[i] = ReassignTopic{Topic: kt.Topic, Partitions: make([]ReassignPartition, len(kt.Partitions))}
			for j, kp := range kt.Partitions {
				r.Topics[i].Partitions[j] = ReassignPartition{Partition: kp.Partition, Replicas: kp.Replicas}
			}
		}
		return r, nil
	},
	toResp: func(r errResult[[]ReassignTopicResult]) *kmsg.AlterPartitionAssignmentsResponse {
		m := kmsg.NewPtrAlterPartitionAssignmentsResponse()
		m.ErrorCode, m.ErrorMessage = kafkaErr(r.Err)
		for _, t := range r.Value {
			kt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			kt.Topic = t.Topic
			for _, p := range t.Partitions {
				kp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				kp.Partition = p.Partition
				kp.ErrorCode, kp.ErrorMessage = kafkaErr(p.Err)
				kt.Partitions = append(kt.Partitions, kp)
			}
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromResp: func(m *kmsg.AlterPartitionAssignmentsResponse) (errResult[[]ReassignTopicResult], error) {
		if err := fromKafkaErr(m.ErrorCode, m.ErrorMessage); err != nil {
			return errResult[[]ReassignTopicResult]{Err: err}, nil
		}
		res := make([]ReassignTopicResult, len(m.Topics))
		for i, kt := range m.Topics {
			res[i] = ReassignTopicResult{Topic: kt.Topic, Partitions: make([]ReassignPartitionResult, len(kt.Partitions))}
			for j, kp := range kt.Partitions {
				res[i].Partitions[j] = ReassignPartitionResult{Partition: kp.Partition, Err: fromKafkaErr(kp.ErrorCode, kp.ErrorMessage)}
			}
		}
		return errResult[[]ReassignTopicResult]{Value: res}, nil
	},
}

var listReassignmentsCodec = kafkaCodec[[]TopicPartitions, errResult[[]OngoingTopicReassignments], *kmsg.ListPartitionReassignmentsRequest, *kmsg.ListPartitionReassignmentsResponse]{
	version: 0,
	newReq:  kmsg.NewPtrListPartitionReassignmentsRequest,
	newResp: kmsg.NewPtrListPartitionReassignmentsResponse,
	toReq: func(topics []TopicPartitions) *kmsg.ListPartitionReassignmentsRequest {
		m := kmsg.NewPtrListPartitionReassignmentsRequest()
		if topics != nil {
			m.Topics = make([]kmsg.ListPartitionReassignmentsRequestTopic, len(topics)) // nil, all topics, stays nil
		}
		for i, t := range topics {
			m.Topics[i] = kmsg.NewListPartitionReassignmentsRequestTopic()
			m.Topics[i].Topic, m.Topics[i].Partitions = t.Topic, t.Partitions
		}
		return m
	},
	fromReq: func(m *kmsg.ListPartitionReassignmentsRequest) ([]TopicPartitions, error) {
		if m.Topics == nil {
			return nil, nil
		}
		topics := make([]TopicPartitions, len(m.Topics))
		for i, t := range m.Topics {
			topics[i] = TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
		}
		return topics, nil
	},
	toResp: func(r errResult[[]OngoingTopicReassignments]) *kmsg.ListPartitionReassignmentsResponse {
		m := kmsg.NewPtrListPartitionReassignmentsResponse()
		m.ErrorCode, m.ErrorMessage = kafkaErr(r.Err)
		for _, t := range r.Value {
			kt := kmsg.NewListPartitionReassignmentsResponseTopic()
			kt.Topic = t.Topic
			for _, p := range t.Partitions {
				kp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				kp.Partition, kp.Replicas, kp.AddingReplicas, kp.RemovingReplicas = p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas
				kt.Partitions = append(kt.Partitions, kp)
			}
			m.Topics = append(m.Topics, kt)
		}
		return m
	},
	fromResp: func(m *kmsg.ListPartitionReassignmentsResponse) (errResult[[]OngoingTopicReassignments], error) {
		if err := fromKafkaErr(m.ErrorCode, m.ErrorMessage); err != nil {
			return errResult[[]OngoingTopicReassignments]{Err: err}, nil
		}
		// As the controller builds them: every list is non-nil.
		res := make([]OngoingTopicReassignments, len(m.Topics))
		for i, kt := range m.Topics {
			res[i] = OngoingTopicReassignments{Topic: kt.Topic, Partitions: make([]OngoingReassignment, len(kt.Partitions))}
			for j, kp := range kt.Partitions {
				res[i].Partitions[j] = OngoingReassignment{Partition: kp.Partition,
					Replicas:         append([]int32{}, kp.Replicas...),
					AddingReplicas:   append([]int32{}, kp.AddingReplicas...),
					RemovingReplicas: append([]int32{}, kp.RemovingReplicas...)}
			}
		}
		return errResult[[]OngoingTopicReassignments]{Value: res}, nil
	},
}

// DescribeQuorum asks about the one metadata partition, as Kafka's
// clients do.
var describeQuorumCodec = kafkaCodec[struct{}, errResult[raftnode.QuorumInfo], *kmsg.DescribeQuorumRequest, *kmsg.DescribeQuorumResponse]{
	version: 2,
	newReq:  kmsg.NewPtrDescribeQuorumRequest,
	newResp: kmsg.NewPtrDescribeQuorumResponse,
	toReq: func(struct{}) *kmsg.DescribeQuorumRequest {
		m := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = image.ClusterMetadataTopic
		t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		m.Topics = append(m.Topics, t)
		return m
	},
	fromReq: func(m *kmsg.DescribeQuorumRequest) (struct{}, error) {
		if len(m.Topics) != 1 || m.Topics[0].Topic != image.ClusterMetadataTopic ||
			len(m.Topics[0].Partitions) != 1 || m.Topics[0].Partitions[0].Partition != 0 {
			return struct{}{}, fmt.Errorf("DescribeQuorum of anything but %s-0", image.ClusterMetadataTopic)
		}
		return struct{}{}, nil
	},
	toResp: func(r errResult[raftnode.QuorumInfo]) *kmsg.DescribeQuorumResponse {
		m := kmsg.NewPtrDescribeQuorumResponse()
		m.ErrorCode, m.ErrorMessage = kafkaErr(r.Err)
		if r.Err != nil {
			return m
		}
		q := r.Value
		p := kmsg.NewDescribeQuorumResponseTopicPartition()
		p.LeaderID, p.LeaderEpoch, p.HighWatermark = q.LeaderID, q.LeaderEpoch, q.HighWatermark
		p.CurrentVoters, p.Observers = toReplicaStates(q.Voters), toReplicaStates(q.Observers)
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic, t.Partitions = image.ClusterMetadataTopic, []kmsg.DescribeQuorumResponseTopicPartition{p}
		m.Topics = append(m.Topics, t)
		return m
	},
	fromResp: func(m *kmsg.DescribeQuorumResponse) (errResult[raftnode.QuorumInfo], error) {
		if err := fromKafkaErr(m.ErrorCode, m.ErrorMessage); err != nil {
			return errResult[raftnode.QuorumInfo]{Err: err}, nil
		}
		if len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 1 {
			return errResult[raftnode.QuorumInfo]{}, errors.New("DescribeQuorum answer without its one partition")
		}
		p := m.Topics[0].Partitions[0]
		return errResult[raftnode.QuorumInfo]{Value: raftnode.QuorumInfo{
			LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark,
			Voters: fromReplicaStates(p.CurrentVoters), Observers: fromReplicaStates(p.Observers),
		}}, nil
	},
}

func toReplicaStates(rs []raftnode.ReplicaInfo) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, len(rs))
	for i, r := range rs {
		out[i] = kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		out[i].ReplicaID, out[i].LogEndOffset = r.ID, r.LogEndOffset
		out[i].LastFetchTimestamp, out[i].LastCaughtUpTimestamp = r.LastFetchTimestamp, r.LastCaughtUpTimestamp
	}
	return out
}

// fromReplicaStates mirrors the node's list, built by append: none is nil.
func fromReplicaStates(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []raftnode.ReplicaInfo {
	var out []raftnode.ReplicaInfo
	for _, r := range rs {
		out = append(out, raftnode.ReplicaInfo{ID: r.ReplicaID, LogEndOffset: r.LogEndOffset,
			LastFetchTimestamp: r.LastFetchTimestamp, LastCaughtUpTimestamp: r.LastCaughtUpTimestamp})
	}
	return out
}
