package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets (key 2), versions 1-11 (Kafka 4 removed v0).
//
// Special timestamps: -2 earliest (the log start offset), -1 latest (the
// high watermark, or the last stable offset for read_committed), -3 the
// record with the largest timestamp (v7+), -4 earliest local (v8+; no
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

func handleListOffsets(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			p := s.leaderPartition(rt.Topic, rp.Partition)
			if p == nil {
				sp.ErrorCode = s.partitionMissingCode(rt.Topic, rp.Partition)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			epoch := p.leaderEpoch.Load()
			if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, epoch); code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.ErrorCode = s.listOffset(p, rp.Timestamp, req.IsolationLevel == 1, &sp)
			if sp.Offset >= 0 {
				sp.LeaderEpoch = epoch
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return respond(resp)
}

func (s *Server) listOffset(p *partition, ts int64, readCommitted bool, sp *kmsg.ListOffsetsResponseTopicPartition) int16 {
	hw := p.highWatermark()
	if readCommitted {
		lso, err := s.lastStableOffset(p)
		if err != nil {
			s.log.Error("list offsets: transactions", "topic", p.topic, "partition", p.index, "err", err)
			return kerr.KafkaStorageError.Code
		}
		hw = lso
	}
	switch ts {
	case listLatest:
		sp.Offset = hw
	case listEarliest, listEarliestLocal:
		sp.Offset = p.log.LogStartOffset()
	case listLatestTiered, listEarliestUpload:
	case listMaxTimestamp:
		t, off := p.log.MaxTimestamp()
		if off >= 0 && off < hw {
			sp.Timestamp, sp.Offset = t, off
		}
	default:
		if ts < 0 {
			return kerr.InvalidRequest.Code
		}
		off, t, found, err := p.log.FindOffsetByTimestamp(ts)
		if err != nil {
			s.log.Error("list offsets", "topic", p.topic, "partition", p.index, "err", err)
			return kerr.KafkaStorageError.Code
		}
		if found && off < hw {
			sp.Timestamp, sp.Offset = t, off
		}
	}
	return 0
}
