package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
	"github.com/gregorbroker/gregor/storage"
)

// DeleteRecords (key 21), versions 0-2.
//
// Moves a partition's log start offset up to the requested offset (-1
// means the high watermark) and answers the new low watermark; records
// below it are never served again, and ListOffsets earliest follows it.
// An offset above the high watermark answers OFFSET_OUT_OF_RANGE. The new
// start offset is checkpointed before the answer, so a crash does not bring
// deleted records back. Whole segments below it are removed by retention
// (the storage issue), not here.
//
// The checks are Kafka's (KafkaApis.handleDeleteRecordsRequest,
// ReplicaManager.deleteRecordsOnLocalLog, Partition.deleteRecordsOnLeader):
// an unknown partition, then an internal topic (INVALID_TOPIC_EXCEPTION),
// then leadership, then a cleanup.policy without delete
// (POLICY_VIOLATION), then the offset. A partition named twice is
// answered once, for the last offset asked, as Kafka's map of partitions
// keeps it.
func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	last := make(map[storage.TopicPartition]int64)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			last[storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.Offset
		}
	}
	img := s.meta.Image()
	ac := s.auth(r)
	topicIdx := make(map[string]int)
	moved := false
	for _, rt := range req.Topics {
		i, ok := topicIdx[rt.Topic]
		if !ok {
			i = len(resp.Topics)
			topicIdx[rt.Topic] = i
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			resp.Topics = append(resp.Topics, st)
		}
		for _, rp := range rt.Partitions {
			key := storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			offset, pending := last[key]
			if !pending {
				continue // answered already
			}
			delete(last, key)
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			switch {
			case !ac.topic(authz.OpDelete, rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !partitionExists(img, rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case isInternalTopic(rt.Topic):
				sp.ErrorCode = kerr.InvalidTopicException.Code
			default:
				moved = s.deletePartitionRecords(rt.Topic, rp.Partition, offset, &sp) || moved
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
		}
	}
	if moved {
		if err := s.logs.Checkpoint(); err != nil {
			s.log.Error("checkpoint after delete records", "err", err)
		}
	}
	return respond(resp)
}

// deletePartitionRecords moves one partition's log start offset up to
// offset and reports whether it moved.
func (s *Server) deletePartitionRecords(topic string, partition int32, offset int64, sp *kmsg.DeleteRecordsResponseTopicPartition) bool {
	p := s.leaderPartition(topic, partition)
	if p == nil {
		sp.ErrorCode = s.partitionMissingCode(topic, partition)
		return false
	}
	if !p.Cfg.Load().Delete() {
		sp.ErrorCode = kerr.PolicyViolation.Code
		return false
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return false
	}
	err := p.Log.IncrementLogStartOffset(offset)
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return false
	case err != nil:
		s.log.Error("delete records", "topic", topic, "partition", partition, "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return false
	}
	sp.LowWatermark = p.Log.LogStartOffset()
	return true
}
