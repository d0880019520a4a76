package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster (key 60), versions 0-2.
//
// Lists the registered brokers with the address of the listener the client
// connected through, the cluster id and the active controller. v1's
// endpoint type 2 (controllers) is refused with UNSUPPORTED_ENDPOINT_TYPE:
// Gregor's controllers are reached through the brokers. v2 can include
// fenced brokers.
func init() { register(60, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return respond(resp)
	}
	img := s.meta.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = s.controllerID(img)
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	for _, b := range img.Brokers() {
		if b.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		l, ok := b.Listener(r.conn.listener)
		if !ok {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack, db.IsFenced = b.ID, l.Host, l.Port, b.Rack, b.Fenced
		resp.Brokers = append(resp.Brokers, db)
	}
	return respond(resp)
}
