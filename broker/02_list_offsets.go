package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/security/authz"
	"github.com/gregorbroker/gregor/storage"
)

// ListOffsets (key 2), versions 1-11 (Kafka 4 removed v0).
//
// Special timestamps: -2 earliest (the log start offset), -1 latest (the
// high watermark, or the last stable offset for read_committed), -3 the
// first record holding the largest timestamp (v7+, Kafka 3.8+; under
// LogAppendTime the first record of its batch), -4 earliest local (v8+; no
// tiered storage, so the log start offset), -5 latest tiered (v9+) and -6
// earliest pending upload (v11): nothing is tiered, so no offset (-1).
// Any other timestamp finds the first record whose timestamp is at or
// after it through the time index; an offset at or past the high
// watermark is not visible and answers -1, as Kafka does.
func init() { register(2, 1, 11, handleListOffsets) }

const (
	listLatest         = -1
	listEarliest       = -2
	listMaxTimestamp   = -3
	listEarliestLocal  = -4
	listLatestTiered   = -5
	listEarliestUpload = -6
)

// minTimestampVersion is the first ListOffsets version that may ask for
// each special timestamp (ReplicaManager.timestampMinSupportedVersion);
// any other negative timestamp answers UNSUPPORTED_VERSION.
var minTimestampVersion = map[int64]int16{
	listEarliest: 1, listLatest: 1, listMaxTimestamp: 7, listEarliestLocal: 8,
	listLatestTiered: 9, listEarliestUpload: 11,
}

// handleListOffsets answers each distinct partition once, grouped by
// topic, as ReplicaManager.fetchOffset does: a partition named twice
// answers INVALID_REQUEST, a timestamp the version cannot ask for
// UNSUPPORTED_VERSION, before the partition is looked up. An isolation
// level other than 0 or 1 fails the whole request with
// UNKNOWN_SERVER_ERROR, Kafka's answer to the IllegalArgumentException
// IsolationLevel.forId throws.
func handleListOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	count := make(map[storage.TopicPartition]int)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			count[storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]++
		}
	}
	badIsolation := req.IsolationLevel != 0 && req.IsolationLevel != 1
	topicIdx := make(map[string]int)
	answered := make(map[storage.TopicPartition]bool)
	ac := s.auth(r)
	for _, rt := range req.Topics {
		i, ok := topicIdx[rt.Topic]
		if !ok {
			i = len(resp.Topics)
			topicIdx[rt.Topic] = i
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			resp.Topics = append(resp.Topics, st)
		}
		for _, rp := range rt.Partitions {
			key := storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if answered[key] {
				continue
			}
			answered[key] = true
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			switch {
			case badIsolation:
				sp.ErrorCode = kerr.UnknownServerError.Code
			case !ac.topic(authz.OpDescribe, rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case count[key] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case !timestampSupported(rp.Timestamp, req.Version):
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				s.listPartitionOffset(rt.Topic, &rp, req.IsolationLevel == 1, &sp)
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
		}
	}
	return respond(resp)
}

// timestampSupported is the negation of
// ReplicaManager.isListOffsetsTimestampUnsupported.
func timestampSupported(ts int64, version int16) bool {
	if ts >= 0 {
		return true
	}
	minVersion, ok := minTimestampVersion[ts]
	return ok && version >= minVersion
}

// listPartitionOffset answers one partition of a ListOffsets request.
func (s *Server) listPartitionOffset(topic string, rp *kmsg.ListOffsetsRequestTopicPartition, readCommitted bool, sp *kmsg.ListOffsetsResponseTopicPartition) {
	p := s.leaderPartition(topic, rp.Partition)
	if p == nil {
		sp.ErrorCode = s.partitionMissingCode(topic, rp.Partition)
		return
	}
	epoch := p.LeaderEpoch.Load()
	if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, epoch); code != 0 {
		sp.ErrorCode = code
		return
	}
	sp.ErrorCode = s.listOffset(p, rp.Timestamp, readCommitted, sp)
	if sp.Offset >= 0 {
		sp.LeaderEpoch = epoch
	}
}

func (s *Server) listOffset(p *partition.Partition, ts int64, readCommitted bool, sp *kmsg.ListOffsetsResponseTopicPartition) int16 {
	hw := p.HighWatermark()
	if readCommitted {
		lso, err := p.LastStableOffset()
		if err != nil {
			s.log.Error("list offsets: transactions", "topic", p.Topic, "partition", p.Index, "err", err)
			return kerr.KafkaStorageError.Code
		}
		hw = lso
	}
	switch ts {
	case listLatest:
		sp.Offset = hw
	case listEarliest, listEarliestLocal:
		sp.Offset = p.Log.LogStartOffset()
	case listLatestTiered, listEarliestUpload:
	case listMaxTimestamp:
		off, t, found, err := p.Log.OffsetOfMaxTimestamp()
		if err != nil {
			s.log.Error("list offsets: max timestamp", "topic", p.Topic, "partition", p.Index, "err", err)
			return kerr.KafkaStorageError.Code
		}
		if found && off < hw {
			sp.Timestamp, sp.Offset = t, off
		}
	default:
		off, t, found, err := p.Log.FindOffsetByTimestamp(ts)
		if err != nil {
			s.log.Error("list offsets", "topic", p.Topic, "partition", p.Index, "err", err)
			return kerr.KafkaStorageError.Code
		}
		if found && off < hw {
			sp.Timestamp, sp.Offset = t, off
		}
	}
	return 0
}
