package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeAcls (key 29), versions 1-3 (Kafka 4 dropped v0, KIP-896).
//
// Answers the ACLs of the metadata log that the filter matches (Kafka's
// AclBindingFilter: ANY and MATCH pattern types, null fields matching
// anything), grouped by resource pattern as Kafka's
// DescribeAclsResponse.aclsResources. It needs DESCRIBE on the cluster;
// without an authorizer it answers SECURITY_DISABLED, as Kafka's AclApis.
// A filter with an UNKNOWN field is a malformed request to Kafka, which
// closes the connection: so does Gregor.
func init() { register(29, 1, 3, handleDescribeACLs) }

// errNoAuthorizer is Kafka's message for the ACL APIs without an
// authorizer.
const errNoAuthorizer = "No Authorizer is configured."

func handleDescribeACLs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := authz.Filter{
		ResourceType: authz.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: authz.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: authz.Operation(req.Operation), Permission: authz.Permission(req.PermissionType),
	}
	if f.HasUnknown() {
		return result{}, fmt.Errorf("DescribeAcls: filter with UNKNOWN elements: %+v", f)
	}
	ac := s.auth(r)
	if !ac.enabled() {
		msg := "No Authorizer is configured on the broker"
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, &msg
		return respond(resp)
	}
	if !ac.cluster(authz.OpDescribe) {
		msg := kerr.ClusterAuthorizationFailed.Description
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		return respond(resp)
	}
	resp.ErrorMessage = new(string) // Kafka's default, not null
	type pattern struct {
		rt   authz.ResourceType
		name string
		pt   authz.PatternType
	}
	index := map[pattern]int{}
	for _, a := range ac.a.ACLs() {
		if !f.Matches(a) {
			continue
		}
		p := pattern{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := index[p]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType = kmsg.ACLResourceType(p.rt)
			res.ResourceName = p.name
			res.ResourcePatternType = kmsg.ACLResourcePatternType(p.pt)
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			index[p] = i
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation = kmsg.ACLOperation(a.Operation)
		e.PermissionType = kmsg.ACLPermissionType(a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return respond(resp)
}
