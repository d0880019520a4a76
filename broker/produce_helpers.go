package broker

import "path/filepath"

// leaderPartition is the partition if this node hosts it and leads it:
// produce, consumer fetches, ListOffsets and the other client requests go
// to leaders only. A hosted partition led elsewhere is nil here, and
// partitionMissingCode answers NOT_LEADER_OR_FOLLOWER for it.
func (s *Server) leaderPartition(topic string, index int32) *partition {
	p := s.parts.get(topic, index)
	if p == nil || !p.isLeader(s.cfg.NodeID) || s.dirOffline(p) {
		return nil
	}
	return p
}

// A log dir whose disk failed a write or an fsync goes offline, as in
// Kafka: every partition in it answers KAFKA_STORAGE_ERROR from then on
// (the log's error is sticky, and nothing more is written there), while
// partitions in the other log dirs keep serving.

// storageFailed takes the log dir of p offline after a disk error.
func (s *Server) storageFailed(p *partition, err error) {
	dir := filepath.Dir(p.log.Dir())
	if _, was := s.offlineDirs.LoadOrStore(dir, true); !was {
		s.log.Error("log dir offline after a disk error: its partitions answer KAFKA_STORAGE_ERROR until restart",
			"dir", dir, "topic", p.topic, "partition", p.index, "err", err)
	}
}

func (s *Server) dirOffline(p *partition) bool {
	_, off := s.offlineDirs.Load(filepath.Dir(p.log.Dir()))
	return off
}
