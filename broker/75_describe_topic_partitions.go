package broker

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeTopicPartitions (key 75, KIP-966), version 0.
//
// The paged topic description Kafka's admin client and kafka-topics
// --describe use in place of Metadata: the topics named (each once, sorted)
// or, with an empty list, every topic, answered from the metadata image as
// Kafka's DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse do. At most
// ResponsePartitionLimit partitions are answered (clamped to 1 ..
// maxDescribePartitions); Cursor says which topic and partition to start
// at, and NextCursor where the next page starts when the limit cut the
// answer short. A named topic that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
// name); a cursor whose topic is not in the list, or whose partition is
// negative, fails the request with INVALID_REQUEST on every named topic.
// Gregor has no eligible leader replicas (KIP-966's ELR), so both ELR
// lists are empty, as Kafka prints them without ELR enabled.
func init() { register(75, 0, 0, handleDescribeTopicPartitions) }

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default, the most partitions one DescribeTopicPartitions answer holds
// whatever the request asks. Gregor does not make it configurable.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeTopicPartitionsRequest)
	img := s.meta.Image()
	names, err := describePartitionsTopics(req, img)
	if err != nil {
		s.log.Debug("describe topic partitions", "err", err)
		return respond(describePartitionsErrorResponse(req, kerr.InvalidRequest))
	}
	limit := max(min(req.ResponsePartitionLimit, maxDescribePartitions), 1)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	// DescribeTopicPartitionsRequestHandler: a topic the principal may
	// not DESCRIBE is left out of an all-topics answer and answered
	// TOPIC_AUTHORIZATION_FAILED (without its id) when named; every topic
	// answered carries the principal's operations on it.
	ac := s.auth(r)
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	allowed := names[:0:0]
	for _, n := range names {
		if ac.topic(authz.OpDescribe, n) {
			allowed = append(allowed, n)
			continue
		}
		if len(req.Topics) > 0 {
			dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			dt.Topic, dt.ErrorCode = &n, kerr.TopicAuthorizationFailed.Code
			dt.AuthorizedOperations = authorizedOpsNotRequested
			dt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			denied = append(denied, dt)
		}
	}
	s.describePartitions(resp, img, allowed, req.Cursor, limit, len(req.Topics) == 0, r.conn.listener)
	for i := range resp.Topics {
		if dt := &resp.Topics[i]; dt.Topic != nil {
			dt.AuthorizedOperations = ac.operations(authz.ResourceTopic, *dt.Topic, authz.TopicOperations)
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return respond(resp)
}

// describePartitionsTopics is the handler's choice of topics: every topic,
// or the named ones, from the cursor's topic on, each once and sorted. It
// fails, as Kafka's handler throws InvalidRequestException, when a named
// list lacks the cursor's topic or the cursor's partition is negative.
func describePartitionsTopics(req *kmsg.DescribeTopicPartitionsRequest, img *image.Image) ([]string, error) {
	from := ""
	if req.Cursor != nil {
		from = req.Cursor.Topic
	}
	var names []string
	if len(req.Topics) == 0 {
		for _, name := range img.TopicNames() {
			if name >= from {
				names = append(names, name)
			}
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic >= from {
				names = append(names, t.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if req.Cursor != nil && !slices.Contains(names, req.Cursor.Topic) {
			return nil, fmt.Errorf("topic list should contain the cursor topic %q", req.Cursor.Topic)
		}
	}
	if req.Cursor != nil && req.Cursor.Partition < 0 {
		return nil, fmt.Errorf("cursor partition %d of %q must be valid", req.Cursor.Partition, req.Cursor.Topic)
	}
	return names, nil
}

// describePartitions fills resp with names, in order, until limit partitions are
// answered. The cursor's topic starts at its partition, the others at 0.
// When the limit ends the answer inside a topic, NextCursor points at the
// first partition left out; when it ends exactly at a topic's end and
// more topics follow, at the next topic's partition 0. Unknown topics are
// left out of an all-topics answer and answered with an error otherwise.
func (s *Server) describePartitions(resp *kmsg.DescribeTopicPartitionsResponse, img *image.Image, names []string, cursor *kmsg.DescribeTopicPartitionsRequestCursor, limit int32, allTopics bool, listener string) {
	remaining := int(limit)
	for _, name := range names {
		if remaining == 0 {
			next := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			next.Topic, next.Partition = name, 0
			resp.NextCursor = &next
			break
		}
		t, ok := img.Topic(name)
		if !ok {
			if !allTopics {
				resp.Topics = append(resp.Topics, describePartitionsUnknownTopic(name))
			}
			continue
		}
		start := 0
		if cursor != nil && name == cursor.Topic {
			start = int(cursor.Partition)
		}
		end := min(len(t.Partitions), start+remaining)
		dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		dt.Topic = &t.Name
		dt.TopicID = t.ID
		dt.IsInternal = isInternalTopic(t.Name)
		// As Metadata answers it: no authorizer, nothing computed.
		dt.AuthorizedOperations = authorizedOpsNotRequested
		dt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		for i := start; i < end; i++ {
			dt.Partitions = append(dt.Partitions, describePartition(img, &t.Partitions[i], int32(i), listener))
		}
		resp.Topics = append(resp.Topics, dt)
		if end < len(t.Partitions) {
			next := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			next.Topic, next.Partition = name, int32(end)
			resp.NextCursor = &next
			break
		}
		remaining -= len(dt.Partitions)
	}
}

// describePartition is one partition as KRaftMetadataCache describes it:
// never an error; the leader only if it is registered with the client's
// listener (-1 otherwise); replicas and ISR unfiltered; offline replicas
// those not registered, fenced or without the listener.
func describePartition(img *image.Image, pi *image.PartitionImage, index int32, listener string) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition = index
	dp.LeaderID = -1
	if b, ok := img.Broker(pi.Leader); ok {
		if _, ok := b.Listener(listener); ok {
			dp.LeaderID = pi.Leader
		}
	}
	dp.LeaderEpoch = pi.LeaderEpoch
	dp.Replicas = slices.Clone(pi.Replicas)
	dp.ISR = slices.Clone(pi.ISR)
	dp.EligibleLeaderReplicas = []int32{}
	dp.LastKnownELR = []int32{}
	dp.OfflineReplicas = []int32{}
	for _, id := range pi.Replicas {
		b, ok := img.Broker(id)
		if !ok || b.Fenced {
			dp.OfflineReplicas = append(dp.OfflineReplicas, id)
			continue
		}
		if _, ok := b.Listener(listener); !ok {
			dp.OfflineReplicas = append(dp.OfflineReplicas, id)
		}
	}
	return dp
}

// describePartitionsUnknownTopic answers a named topic the image lacks.
func describePartitionsUnknownTopic(name string) kmsg.DescribeTopicPartitionsResponseTopic {
	dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	dt.Topic = &name
	dt.IsInternal = isInternalTopic(name)
	dt.AuthorizedOperations = authorizedOpsNotRequested
	dt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	dt.ErrorCode = kerr.UnknownTopicOrPartition.Code
	if image.ValidateTopicName(name) != nil {
		dt.ErrorCode = kerr.InvalidTopicException.Code
	}
	return dt
}

// describePartitionsErrorResponse is DescribeTopicPartitionsRequest.
// getErrorResponse: each named topic with the error, nothing else.
func describePartitionsErrorResponse(req *kmsg.DescribeTopicPartitionsRequest, ke *kerr.Error) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, t := range req.Topics {
		dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := t.Topic
		dt.Topic = &name
		dt.ErrorCode = ke.Code
		dt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		resp.Topics = append(resp.Topics, dt)
	}
	return resp
}
