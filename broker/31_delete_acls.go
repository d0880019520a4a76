package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DeleteAcls (key 31), versions 1-3 (Kafka 4 dropped v0, KIP-896).
//
// Each filter (Kafka's AclBindingFilter, ANY and MATCH included) removes
// the ACLs it matches; the controller commits the removals together
// before the answer, which lists, per filter, the ACLs it removed. It
// needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
// filter); without an authorizer every filter answers SECURITY_DISABLED.
// A filter with an UNKNOWN field closes the connection, as in Kafka.
func init() { register(31, 1, 3, handleDeleteACLs) }

func handleDeleteACLs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]authz.Filter, 0, len(req.Filters))
	for _, kf := range req.Filters {
		f := authz.Filter{
			ResourceType: authz.ResourceType(kf.ResourceType), ResourceName: kf.ResourceName,
			PatternType: authz.PatternType(kf.ResourcePatternType), Principal: kf.Principal, Host: kf.Host,
			Operation: authz.Operation(kf.Operation), Permission: authz.Permission(kf.PermissionType),
		}
		if f.HasUnknown() {
			return result{}, fmt.Errorf("DeleteAcls: filter with UNKNOWN elements: %+v", f)
		}
		filters = append(filters, f)
	}
	answerAll := func(code int16, msg string) (result, error) {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, &msg
			resp.Results = append(resp.Results, res)
		}
		return respond(resp)
	}
	ac := s.auth(r)
	if !ac.enabled() {
		return answerAll(kerr.SecurityDisabled.Code, errNoAuthorizer)
	}
	if !ac.cluster(authz.OpAlter) {
		return answerAll(kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Description)
	}
	if len(filters) == 0 {
		return respond(resp)
	}
	ctx, cancel := context.WithTimeout(s.ctx, aclTimeout)
	results := s.ctrl.DeleteACLs(ctx, filters)
	cancel()
	removed := 0
	for _, res := range results {
		kr := kmsg.NewDeleteACLsResponseResult()
		if res.Err != nil {
			msg := res.Err.Error()
			kr.ErrorCode, kr.ErrorMessage = errCode(res.Err), &msg
		}
		for _, a := range res.Deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType = kmsg.ACLResourceType(a.ResourceType)
			m.ResourceName = a.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation = kmsg.ACLOperation(a.Operation)
			m.PermissionType = kmsg.ACLPermissionType(a.Permission)
			kr.MatchingACLs = append(kr.MatchingACLs, m)
			removed++
		}
		resp.Results = append(resp.Results, kr)
	}
	s.log.Info("deleted ACLs", "principal", r.conn.principal.String(), "matched", removed)
	return respond(resp)
}
