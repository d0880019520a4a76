package broker

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeQuorum (key 55), versions 0-2: the metadata quorum as Kafka's
// kafka-metadata-quorum tool reads it — the partition __cluster_metadata-0
// with the active controller, the raft term as leader epoch, the commit
// index as high watermark, and each voter's and observer's progress (only
// the leader knows it; forwarded there from any node). v2 lists the
// controllers' listeners from controller.quorum.voters. A request that
// names anything but that one partition answers UNKNOWN_TOPIC_OR_PARTITION
// for each partition it names (KafkaRaftClient.handleDescribeQuorumRequest).
func init() { register(55, 0, 2, handleDescribeQuorum) }

func handleDescribeQuorum(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeQuorumRequest)
	if denied := s.clusterDenied(r, authz.OpDescribe); denied != nil {
		return respond(denied)
	}
	if !quorumPartitionAsked(req) {
		return respond(quorumPartitionError(req, kerr.UnknownTopicOrPartition))
	}
	return result{wait: func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		ctx, cancel := context.WithTimeout(r.conn.ctx, 10*time.Second)
		defer cancel()
		qi, err := s.ctrl.DescribeQuorum(ctx)
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = "__cluster_metadata"
		sp := kmsg.NewDescribeQuorumResponseTopicPartition()
		if err != nil {
			sp.ErrorCode = errCode(err)
		} else {
			sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = qi.LeaderID, qi.LeaderEpoch, qi.HighWatermark
			for _, v := range qi.Voters {
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = v.ID, v.LogEndOffset, v.LastFetchTimestamp, v.LastCaughtUpTimestamp
				sp.CurrentVoters = append(sp.CurrentVoters, rs)
			}
			for _, o := range qi.Observers {
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = o.ID, o.LogEndOffset, o.LastFetchTimestamp, o.LastCaughtUpTimestamp
				sp.Observers = append(sp.Observers, rs)
			}
		}
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		for id, addr := range s.cfg.ControllerQuorumVoters {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				continue
			}
			p, _ := strconv.Atoi(port)
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = id
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			name := "CONTROLLER"
			if len(s.cfg.ControllerListenerNames) > 0 {
				name = s.cfg.ControllerListenerNames[0]
			}
			l.Name, l.Host, l.Port = name, host, uint16(p)
			n.Listeners = append(n.Listeners, l)
			resp.Nodes = append(resp.Nodes, n)
		}
		return resp
	}}, nil
}

// quorumPartitionAsked is RaftUtil.hasValidTopicPartition for
// DescribeQuorum: the request names __cluster_metadata-0 and nothing else.
func quorumPartitionAsked(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == "__cluster_metadata" &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
}

// quorumPartitionError is DescribeQuorumRequest.getPartitionLevelErrorResponse.
func quorumPartitionError(req *kmsg.DescribeQuorumRequest, ke *kerr.Error) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	for _, t := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, ke.Code
			msg := ke.Description
			sp.ErrorMessage = &msg
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
