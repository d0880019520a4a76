package broker

// leaderPartition is the partition if this node hosts it and leads it:
// produce, consumer fetches, ListOffsets and the other client requests go
// to leaders only. A hosted partition led elsewhere is nil here, and
// partitionMissingCode answers NOT_LEADER_OR_FOLLOWER for it.
func (s *Server) leaderPartition(topic string, index int32) *partition {
	p := s.parts.get(topic, index)
	if p == nil || !p.isLeader(s.cfg.NodeID) {
		return nil
	}
	return p
}
