package broker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security"
	"github.com/gregorbroker/gregor/security/authz"
)

// The broker's side of authorization: the StandardAuthorizer of
// security/authz, fed the ACLs of the metadata image, asked by each
// handler what Kafka's KafkaApis asks for that request. Without
// authorizer.class.name the server has no authorizer and every question
// answers yes, as a Kafka broker without one.

// aclState is the server's authorizer and the image ACL set it last
// loaded.
type aclState struct {
	a *authz.Authorizer
	// loaded is the image ACL set the authorizer holds; a request whose
	// image has the same set (nearly all) reads it without a lock.
	loaded atomic.Pointer[image.ACLs]
	// mu orders reloads, so that an older ACL set never replaces a newer
	// one.
	mu sync.Mutex
}

// newACLState returns the authorizer cfg asks for, or nil for none.
func newACLState(cfg config.Authorizer) (*aclState, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if cfg.ClassName != authz.ClassName {
		return nil, fmt.Errorf("authorizer.class.name=%s is not served", cfg.ClassName)
	}
	return &aclState{a: authz.New(authz.ParseSuperUsers(cfg.SuperUsers), cfg.AllowEveryoneIfNoACLFound)}, nil
}

// logAuthorizer says at start which authorizer runs and, in a cluster,
// who this broker is to the others' authorizers: User:ANONYMOUS over a
// PLAINTEXT inter-broker listener (a warning, as that principal needs
// CLUSTER_ACTION), else its SASL user or certificate subject, so that a
// replication refused for want of CLUSTER_ACTION is not a surprise.
func (s *Server) logAuthorizer() {
	if s.acls == nil {
		return
	}
	s.log.Info("authorizer", "class", authz.ClassName, "super.users", s.cfg.Authorizer.SuperUsers,
		"allow.everyone.if.no.acl.found", s.cfg.Authorizer.AllowEveryoneIfNoACLFound)
	cluster := len(s.cfg.ControllerQuorumVoters) > 1 || len(s.cfg.ControllerQuorumBootstrapServers) > 0
	if !cluster {
		return
	}
	var mapper *security.PrincipalMapper
	if ls := s.security[s.cfg.InterBrokerListenerName]; ls != nil {
		mapper = ls.mapper
	}
	p := s.interBroker.principal(mapper)
	switch {
	case s.acls.a.IsSuperUser(p):
	case p == security.Anonymous.String():
		s.log.Warn("authorizer: brokers connect to each other as User:ANONYMOUS (the inter-broker listener is PLAINTEXT, or SSL without a client certificate), which needs CLUSTER_ACTION on the cluster (an ACL, or super.users) for replica fetches and transaction markers",
			"inter.broker.listener.name", s.cfg.InterBrokerListenerName, "security.protocol", s.interBroker.cfg.Protocol)
	default:
		s.log.Info("authorizer: this broker connects to the others as a principal that is not in super.users: it needs CLUSTER_ACTION on the cluster (an ACL) for replica fetches and transaction markers",
			"principal", p, "inter.broker.listener.name", s.cfg.InterBrokerListenerName)
	}
}

// authorizer returns the server's authorizer with the current image's
// ACLs, or nil when none is configured. Reading the image here, rather
// than from the metadata watcher, means a request that follows a
// CreateAcls on the same node sees its ACLs.
func (s *Server) authorizer() *authz.Authorizer {
	st := s.acls
	if st == nil {
		return nil
	}
	if st.loaded.Load() == s.meta.Image().ACLs() {
		return st.a
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// Images only move forward: read the newest under the lock so that a
	// caller holding an older image cannot load it over a newer one.
	cur := s.meta.Image().ACLs()
	if st.loaded.Load() != cur {
		all := cur.All()
		acls := make([]authz.ACL, 0, len(all))
		for _, a := range all {
			acls = append(acls, controller.ACLOf(a))
		}
		st.a.SetACLs(acls)
		st.loaded.Store(cur)
	}
	return st.a
}

// authzRequest is who the request comes from, as the authorizer sees it.
func (r *request) authzRequest() authz.Request {
	return authz.Request{Principal: r.conn.principal.String(), Host: remoteHost(r.conn.nc.RemoteAddr())}
}

// remoteHost is the client's IP address as Kafka compares it with ACL
// hosts; an address that is not IP (a pipe in tests) is "".
func remoteHost(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return authz.HostOf(ip)
		}
	}
	return ""
}

// authCheck asks the authorizer about one request; the zero value (no
// authorizer) allows everything.
type authCheck struct {
	a   *authz.Authorizer
	req authz.Request
	// audit is the component=authorizer logger (Kafka's
	// kafka.authorizer.logger) and api the request's name for its lines.
	audit *slog.Logger
	api   string
	// quietDeny is Kafka's logIfDenied=false: a denial that only filters
	// (the topics of an all-topics Metadata) is not an attempt on a
	// resource the client named, so it is not logged at INFO.
	quietDeny bool
}

// auth returns the check for r.
func (s *Server) auth(r *request) authCheck {
	a := s.authorizer()
	if a == nil {
		return authCheck{}
	}
	return authCheck{a: a, req: r.authzRequest(), audit: s.auditLog, api: kmsg.NameForKey(r.req.Key())}
}

// quiet is c with denials logged below INFO, as Kafka's checks with
// logIfDenied=false.
func (c authCheck) quiet() authCheck {
	c.quietDeny = true
	return c
}

// levelTrace is below slog's DEBUG, where Kafka's audit log writes the
// decisions of checks that ask not to be logged (TRACE).
const levelTrace = slog.LevelDebug - 4

// logDecision writes the audit line of one decision as Kafka's
// StandardAuthorizerData.logAuditMessage does: a denial at INFO (when
// logIfDenied), an allowance at DEBUG (when logIfAllowed), the others at
// TRACE. refCount is Kafka's resourceRefCount: 1 for one resource.
func (c authCheck) logDecision(d authz.Decision, op authz.Operation, rt authz.ResourceType, name string, logIfAllowed, logIfDenied bool) {
	if c.audit == nil {
		return
	}
	level := levelTrace
	switch {
	case d.Allowed && logIfAllowed:
		level = slog.LevelDebug
	case !d.Allowed && logIfDenied:
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !c.audit.Enabled(ctx, level) {
		return
	}
	verdict := "Denied"
	if d.Allowed {
		verdict = "Allowed"
	}
	c.audit.Log(ctx, level, fmt.Sprintf("Principal = %s is %s operation = %s from host = %s on resource = %s:LITERAL:%s for request = %s with resourceRefCount = 1 based on rule %s",
		c.req.Principal, verdict, op, c.req.Host, authz.ResourceTypeName(rt), name, c.api, d.Rule))
}

// enabled reports whether an authorizer is configured.
func (c authCheck) enabled() bool { return c.a != nil }

// allowed reports whether the principal may perform op on the resource.
func (c authCheck) allowed(op authz.Operation, rt authz.ResourceType, name string) bool {
	if c.a == nil {
		return true
	}
	d := c.a.Decide(c.req, op, rt, name)
	c.logDecision(d, op, rt, name, true, !c.quietDeny)
	return d.Allowed
}

// topic reports whether the principal may perform op on the topic.
func (c authCheck) topic(op authz.Operation, name string) bool {
	return c.allowed(op, authz.ResourceTopic, name)
}

// group reports whether the principal may perform op on the group.
func (c authCheck) group(op authz.Operation, id string) bool {
	return c.allowed(op, authz.ResourceGroup, id)
}

// txnID reports whether the principal may perform op on the
// transactional id.
func (c authCheck) txnID(op authz.Operation, id string) bool {
	return c.allowed(op, authz.ResourceTransactionalID, id)
}

// cluster reports whether the principal may perform op on the cluster.
func (c authCheck) cluster(op authz.Operation) bool {
	return c.allowed(op, authz.ResourceCluster, authz.ClusterName)
}

// byResourceType is Kafka's authorizeByResourceType.
func (c authCheck) byResourceType(op authz.Operation, rt authz.ResourceType) bool {
	return c.a == nil || c.a.AuthorizeByResourceType(c.req, op, rt)
}

// operations is KIP-430's bit field of the operations of ops the
// principal may perform on the resource. Without an authorizer Kafka
// answers every supported operation.
func (c authCheck) operations(rt authz.ResourceType, name string, ops []authz.Operation) int32 {
	if c.a == nil {
		var bits int32
		for _, op := range ops {
			bits |= 1 << uint(op)
		}
		return bits
	}
	return c.a.Operations(c.req, rt, name, ops)
}

// configsDenied is the error of a config resource the principal may not
// perform op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on, as Kafka's
// AuthHelper: broker, broker logger and client metrics resources are the
// cluster's; topics and groups their own. nil when allowed.
func (c authCheck) configsDenied(rtype kmsg.ConfigResourceType, name string, op authz.Operation) *kerr.Error {
	switch rtype {
	case resourceTopic:
		if !c.topic(op, name) {
			return kerr.TopicAuthorizationFailed
		}
	case resourceGroup:
		if !c.group(op, name) {
			return kerr.GroupAuthorizationFailed
		}
	case resourceBroker, resourceBrokerLogger, resourceClientMetrics:
		if !c.cluster(op) {
			return kerr.ClusterAuthorizationFailed
		}
	}
	return nil
}

// alterConfigsDenied is configsDenied for ALTER_CONFIGS as an error whose
// answer carries no message, as Kafka's ApiError(error, null).
func (c authCheck) alterConfigsDenied(rtype kmsg.ConfigResourceType, name string) error {
	if ke := c.configsDenied(rtype, name, authz.OpAlterConfigs); ke != nil {
		return ke
	}
	return nil
}

// clusterDenied is Kafka's AuthHelper.authorizeClusterOperation for the
// requests that need op on the cluster as a whole: nil when allowed, else
// the request's error answer with CLUSTER_AUTHORIZATION_FAILED (its
// getErrorResponse).
func (s *Server) clusterDenied(r *request, op authz.Operation) kmsg.Response {
	if s.auth(r).cluster(op) {
		return nil
	}
	ke := kerr.ClusterAuthorizationFailed
	msg := ke.Description
	switch req := r.req.(type) {
	case *kmsg.ElectLeadersRequest:
		return electLeadersError(req, ke)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return reassignmentsError(req, ke)
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = ke.Code, &msg
		return resp
	case *kmsg.DescribeQuorumRequest:
		resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode, resp.ErrorMessage = ke.Code, &msg
		return resp
	case *kmsg.DescribeLogDirsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = ke.Code
		return resp
	case *kmsg.WriteTxnMarkersRequest:
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, ke.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	case *kmsg.DescribeClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode, resp.ErrorMessage = ke.Code, &msg
		return resp
	case *kmsg.AlterClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, en := range e.Entity {
				ren := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ren.Type, ren.Name = en.Type, en.Name
				re.Entity = append(re.Entity, ren)
			}
			re.ErrorCode, re.ErrorMessage = ke.Code, &msg
			resp.Entries = append(resp.Entries, re)
		}
		return resp
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		// As Kafka's getErrorResponse: one result per user named, each
		// without its name.
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode, resp.ErrorMessage = ke.Code, &msg
		for range req.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode, res.ErrorMessage = ke.Code, &msg
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		// One result per distinct user, sorted, as Kafka's getErrorResponse.
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		users := map[string]bool{}
		for _, d := range req.Deletions {
			users[d.Name] = true
		}
		for _, u := range req.Upsertions {
			users[u.Name] = true
		}
		for _, u := range slices.Sorted(maps.Keys(users)) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode, res.ErrorMessage = u, ke.Code, &msg
			resp.Results = append(resp.Results, res)
		}
		return resp
	}
	panic("clusterDenied: no answer for " + kmsg.NameForKey(r.req.Key()))
}
