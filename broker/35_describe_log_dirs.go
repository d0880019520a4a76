package broker

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeLogDirs (key 35), versions 1-4 (Kafka 4's range; v5's cordoned
// dirs are not served).
//
// Lists each configured log dir with the partitions it holds (all, when
// topics are null) and their sizes in bytes; v4+ adds the dir's total and
// usable bytes from the filesystem. A dir that cannot be read, or that a
// disk error took offline, answers KAFKA_STORAGE_ERROR.
func init() { register(35, 1, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeLogDirsRequest)
	if denied := s.clusterDenied(r, authz.OpDescribe); denied != nil {
		return respond(denied)
	}
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	want := func(topic string, partition int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true
			}
		}
		return false
	}
	logs := s.logs.Logs()
	for _, dir := range s.cfg.LogDirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		rd.Dir = abs
		rd.TotalBytes, rd.UsableBytes = -1, -1
		if s.logs.DirOffline(dir) {
			// As Kafka: an offline dir is listed with the error and
			// without its partitions.
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		if total, usable, err := dirSpace(dir); err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
		} else {
			rd.TotalBytes, rd.UsableBytes = total, usable
		}
		byTopic := make(map[string]*kmsg.DescribeLogDirsResponseDirTopic)
		var order []string
		for tp, l := range logs {
			if filepath.Clean(filepath.Dir(l.Dir())) != filepath.Clean(dir) || !want(tp.Topic, tp.Partition) {
				continue
			}
			t := byTopic[tp.Topic]
			if t == nil {
				nt := kmsg.NewDescribeLogDirsResponseDirTopic()
				nt.Topic = tp.Topic
				t = &nt
				byTopic[tp.Topic] = t
				order = append(order, tp.Topic)
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition = tp.Partition
			p.Size = l.Size()
			if part := s.parts.get(tp.Topic, tp.Partition); part != nil {
				p.OffsetLag = max(l.LogEndOffset()-part.HighWatermark(), 0)
			}
			t.Partitions = append(t.Partitions, p)
		}
		slices.Sort(order)
		for _, name := range order {
			t := byTopic[name]
			slices.SortFunc(t.Partitions, func(a, b kmsg.DescribeLogDirsResponseDirTopicPartition) int { return int(a.Partition - b.Partition) })
			rd.Topics = append(rd.Topics, *t)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return respond(resp)
}
