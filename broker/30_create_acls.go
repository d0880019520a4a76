package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// CreateAcls (key 30), versions 1-3 (Kafka 4 dropped v0, KIP-896).
//
// Each creation is checked as Kafka's AclApis and AclControlManager do
// (INVALID_REQUEST for a cluster resource not named kafka-cluster, an
// empty name, a principal without a type; a creation with ANY for its
// resource type, operation or permission, or ANY or MATCH for its
// pattern type fails the whole request with UNKNOWN_SERVER_ERROR, as
// Kafka's AclBinding refuses to hold one), and the valid ones are
// committed to the metadata log together by the controller before the
// answer. It needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
// every creation); without an authorizer every creation answers
// SECURITY_DISABLED. A creation with an UNKNOWN field is a malformed
// request and closes the connection, as in Kafka.
func init() { register(30, 1, 3, handleCreateACLs) }

// aclTimeout bounds a controller call of the ACL APIs, which carry no
// timeout of their own.
const aclTimeout = 30 * time.Second

func handleCreateACLs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	acls := make([]authz.ACL, 0, len(req.Creations))
	for _, c := range req.Creations {
		a := authz.ACL{
			ResourceType: authz.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: authz.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: authz.Operation(c.Operation), Permission: authz.Permission(c.PermissionType),
		}
		if a.HasUnknown() {
			return result{}, fmt.Errorf("CreateAcls: creation with UNKNOWN elements: %v", a)
		}
		acls = append(acls, a)
	}
	answerAll := func(code int16, msg string) (result, error) {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
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
	for _, a := range acls {
		// Kafka's AclBinding cannot hold these (its constructors throw
		// IllegalArgumentException), so the whole request fails with
		// UNKNOWN_SERVER_ERROR and no message before any is checked.
		if a.ResourceType == authz.ResourceAny || a.PatternType == authz.PatternAny || a.PatternType == authz.PatternMatch ||
			a.Operation == authz.OpAny || a.Permission == authz.PermissionAny {
			for range req.Creations {
				res := kmsg.NewCreateACLsResponseResult()
				res.ErrorCode = kerr.UnknownServerError.Code
				resp.Results = append(resp.Results, res)
			}
			return respond(resp)
		}
	}
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(acls))
	var valid []authz.ACL
	var at []int
	for i, a := range acls {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		// Kafka's ErrorMessage defaults to "", not null.
		resp.Results[i].ErrorMessage = new(string)
		if err := a.Validate(); err != nil {
			msg := err.Error()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		valid = append(valid, a)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return respond(resp)
	}
	ctx, cancel := context.WithTimeout(s.ctx, aclTimeout)
	errs := s.ctrl.CreateACLs(ctx, valid)
	cancel()
	for j, err := range errs {
		if err != nil {
			msg := err.Error()
			resp.Results[at[j]].ErrorCode, resp.Results[at[j]].ErrorMessage = errCode(err), &msg
		}
	}
	s.log.Info("created ACLs", "principal", r.conn.principal.String(), "count", len(valid))
	return respond(resp)
}
