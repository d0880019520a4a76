package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// InitProducerId (key 22), versions 0-5.
//
// Idempotent producers (no transactional id) get a new producer id with
// epoch 0 from blocks of ids recorded in the metadata log, as Kafka does
// for them, including when they ask to bump an epoch (KIP-360): without a
// transactional id there is no state to bump. Transactional ids go to the
// transaction coordinator, which fences the id's previous epoch and aborts
// its open transaction.
func init() { register(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.InitProducerIDRequest)
	// KafkaApis: WRITE on the transactional id, else (idempotence alone)
	// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
	ac := s.auth(r)
	denied := kerr.Error{}
	switch {
	case req.TransactionalID != nil && !ac.txnID(authz.OpWrite, *req.TransactionalID):
		denied = *kerr.TransactionalIDAuthorizationFailed
	case req.TransactionalID == nil && !ac.cluster(authz.OpIdempotentWrite) && !ac.byResourceType(authz.OpWrite, authz.ResourceTopic):
		denied = *kerr.ClusterAuthorizationFailed
	}
	if denied.Code != 0 {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = -1, -1, denied.Code
		return respond(resp)
	}
	return r.inOrder(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		ctx, cancel := context.WithTimeout(r.conn.ctx, 30*time.Second)
		defer cancel()
		if req.TransactionalID != nil {
			return s.txns.coord.InitProducerID(ctx, req)()
		}
		if (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
			// KafkaApis.handleInitProducerIdRequest: a producer id and
			// epoch come together or not at all.
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		id, epoch, err := s.producerIDs.Next(ctx)
		if err != nil {
			s.log.Warn("allocate producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
		return resp
	})
}
