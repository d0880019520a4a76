package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeProducers (key 61), version 0: the active producers of each
// partition, from its producer state (loaded on first use, as a produce
// would). An illegal topic name answers INVALID_TOPIC_EXCEPTION for each
// of its partitions, as KafkaApis.handleDescribeProducersRequest does.
func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	ac := s.auth(r)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		nameErr := image.ValidateTopicName(rt.Topic)
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = part
			if nameErr != nil {
				// KafkaApis.checkValidTopic, before the topic is
				// looked up.
				msg := nameErr.Error()
				sp.ErrorCode, sp.ErrorMessage = kerr.InvalidTopicException.Code, &msg
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !ac.topic(authz.OpRead, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				msg := kerr.TopicAuthorizationFailed.Description
				sp.ErrorMessage = &msg
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p := s.leaderPartition(rt.Topic, part)
			if p == nil {
				sp.ErrorCode = s.partitionMissingCode(rt.Topic, part)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p.Mu.Lock()
			ps, err := p.ProducerStateLocked()
			var infos []producerstate.ProducerInfo
			if err == nil {
				infos = ps.Producers()
			}
			p.Mu.Unlock()
			if err != nil {
				s.log.Error("describe producers", "topic", rt.Topic, "partition", part, "err", err)
				sp.ErrorCode = kerr.KafkaStorageError.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, in := range infos {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = in.ProducerID, int32(in.Epoch)
				ap.LastSequence, ap.LastTimestamp = in.LastSequence, in.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = in.CoordinatorEpoch, in.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return respond(resp)
}
