package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/security/authz"
)

// WriteTxnMarkers (key 27), versions 1-2 (Kafka 4's range): a transaction
// coordinator asks this broker to write commit or abort markers to the
// partitions it leads. The local coordinator uses the same writeMarker
// path, so markers cross brokers the same way once there are several.
func init() { register(27, 1, 2, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.WriteTxnMarkersRequest)
	// KafkaApis: ALTER on the cluster, else CLUSTER_ACTION.
	if s.clusterDenied(r, authz.OpAlter) != nil {
		if denied := s.clusterDenied(r, authz.OpClusterAction); denied != nil {
			return respond(denied)
		}
	}
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		ctx, cancel := context.WithTimeout(r.conn.ctx, 30*time.Second)
		defer cancel()
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			var tv int16
			if req.Version >= 2 {
				tv = int16(m.TransactionVersion)
			}
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, part := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition = part
					err := s.writeMarker(ctx, t.Topic, part, producerstate.Marker{
						ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
						Commit: m.Committed, TransactionVersion: tv,
					})
					rp.ErrorCode = errCode(err)
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	})
}
