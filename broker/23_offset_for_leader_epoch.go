package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/security/authz"
)

// OffsetForLeaderEpoch (key 23), versions 2-4 (Kafka 4's range).
//
// For each partition: the largest leader epoch at or below the requested
// one and the offset where it ended, from the partition's
// leader-epoch-checkpoint (KIP-101/279); an epoch older than every
// recorded one answers itself and where the first recorded one began
// (endOffsetForEpoch). Consumers use it to detect log
// truncation after a leader change (KIP-320); followers to truncate a
// divergent tail. The current leader epoch is checked as in Fetch.
func init() { register(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// KafkaApis: CLUSTER_ACTION (a follower) may ask of any topic, others
	// need DESCRIBE on it.
	ac := s.auth(r)
	follower := ac.cluster(authz.OpClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := s.leaderPartition(rt.Topic, rp.Partition)
			switch {
			case !follower && !ac.topic(authz.OpDescribe, rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				sp.ErrorCode = s.partitionMissingCode(rt.Topic, rp.Partition)
			default:
				if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch.Load()); code != 0 {
					sp.ErrorCode = code
					break
				}
				p.Mu.Lock()
				entries, err := p.EpochsLocked()
				end := p.Log.LogEndOffset()
				p.Mu.Unlock()
				if err != nil {
					s.log.Error("offset for leader epoch", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					sp.ErrorCode = kerr.KafkaStorageError.Code
					break
				}
				sp.LeaderEpoch, sp.EndOffset = partition.EndOffsetForEpoch(entries, rp.LeaderEpoch, end)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return respond(resp)
}
