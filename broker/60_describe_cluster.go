package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeCluster (key 60), versions 0-2.
//
// Lists the registered brokers with the address of the listener the client
// connected through, the cluster id and the active controller. v1's
// endpoint type 2 (controllers) is refused with MISMATCHED_ENDPOINT_TYPE,
// as a Kafka broker does: Gregor's controllers are reached through the
// brokers. v2 can include fenced brokers.
func init() { register(60, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if code, msg := describeClusterEndpointCheck(req); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return respond(resp)
	}
	resp.EndpointType = req.EndpointType
	img := s.meta.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = s.controllerID(img)
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	if req.IncludeClusterAuthorizedOperations {
		// AuthHelper.computeDescribeClusterResponse: no error, but no
		// operations without DESCRIBE on the cluster.
		resp.ClusterAuthorizedOperations = 0
		if ac := s.auth(r); ac.cluster(authz.OpDescribe) {
			resp.ClusterAuthorizedOperations = ac.operations(authz.ResourceCluster, authz.ClusterName, authz.ClusterOperations)
		}
	}
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

// describeClusterEndpointCheck is AuthHelper.computeDescribeClusterResponse's
// check of the endpoint type a broker is asked for: 1 (brokers) is served;
// 2 (controllers) is the wrong endpoint; anything else is unknown. v0
// answers INVALID_REQUEST for both.
func describeClusterEndpointCheck(req *kmsg.DescribeClusterRequest) (int16, string) {
	switch req.EndpointType {
	case 1:
		return 0, ""
	case 2:
		code := kerr.MismatchedEndpointType.Code
		if req.Version == 0 {
			code = kerr.InvalidRequest.Code
		}
		return code, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
	}
	code := kerr.UnsupportedEndpointType.Code
	if req.Version == 0 {
		code = kerr.InvalidRequest.Code
	}
	return code, fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType)
}
