package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	moved := false
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p := s.leaderPartition(rt.Topic, rp.Partition)
			if p == nil {
				sp.ErrorCode = s.partitionMissingCode(rt.Topic, rp.Partition)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			offset := rp.Offset
			hw := p.highWatermark()
			if offset == -1 {
				offset = hw
			}
			switch {
			case offset < 0 || offset > hw:
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			default:
				err := p.log.IncrementLogStartOffset(offset)
				switch {
				case errors.Is(err, storage.ErrOffsetOutOfRange):
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				case err != nil:
					s.log.Error("delete records", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					sp.ErrorCode = kerr.KafkaStorageError.Code
				default:
					sp.LowWatermark = p.log.LogStartOffset()
					moved = true
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if moved {
		if err := s.logs.Checkpoint(); err != nil {
			s.log.Error("checkpoint after delete records", "err", err)
		}
	}
	return respond(resp)
}
