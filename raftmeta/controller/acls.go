package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// ACLs are decided by the controller, as Kafka's AclControlManager does:
// CreateAcls adds each valid ACL that is not already there under a new ID,
// DeleteAcls removes every ACL a filter matches, and both commit their
// records together. The calls travel as Kafka's CreateAcls and DeleteAcls
// messages.

// maxACLRecordsPerOp is Kafka's MAX_RECORDS_PER_USER_OP: one DeleteAcls
// may remove at most this many ACLs.
const maxACLRecordsPerOp = 10000

// DeleteACLsResult is the outcome of one DeleteAcls filter: the ACLs it
// removed, or why it failed.
type DeleteACLsResult struct {
	Err     error
	Deleted []authz.ACL
}

// ACLOf converts an image ACL to the authorizer's form.
func ACLOf(a image.ACL) authz.ACL {
	return authz.ACL{
		ResourceType: authz.ResourceType(a.ResourceType),
		ResourceName: a.ResourceName,
		PatternType:  authz.PatternType(a.PatternType),
		Principal:    a.Principal,
		Host:         a.Host,
		Operation:    authz.Operation(a.Operation),
		Permission:   authz.Permission(a.PermissionType),
	}
}

// CreateACLs adds acls and answers, for each in order, nil or why it was
// refused (INVALID_REQUEST). An ACL identical to an existing one succeeds
// without a record.
func (c *Controller) CreateACLs(ctx context.Context, acls []authz.ACL) []error {
	in := slices.Clone(acls)
	var out []error
	if err := c.do(ctx, func() { out = c.createACLs(in) }); err != nil {
		out = make([]error, len(acls))
		for i := range out {
			out[i] = err
		}
	}
	return out
}

func (c *Controller) createACLs(acls []authz.ACL) []error {
	out := make([]error, len(acls))
	if !c.node.IsLeader() {
		for i := range out {
			out[i] = notController()
		}
		return out
	}
	existing := map[authz.ACL]bool{}
	ids := map[[16]byte]bool{}
	for _, a := range c.node.Image().ACLs().All() {
		existing[ACLOf(a)] = true
		ids[a.ID] = true
	}
	var recs []image.Record
	for i, a := range acls {
		if err := a.Validate(); err != nil {
			out[i] = apiError(kerr.InvalidRequest, "%v", err)
			continue
		}
		if existing[a] {
			continue
		}
		existing[a] = true
		id := image.NewUUID()
		for ids[id] {
			id = image.NewUUID()
		}
		ids[id] = true
		recs = append(recs, &image.AccessControlEntryRecord{
			ID: id, ResourceType: int8(a.ResourceType), ResourceName: a.ResourceName,
			PatternType: int8(a.PatternType), Principal: a.Principal, Host: a.Host,
			Operation: int8(a.Operation), PermissionType: int8(a.Permission),
		})
	}
	if len(recs) == 0 {
		return out
	}
	if err := c.propose(recs); err != nil {
		for i := range out {
			if out[i] == nil {
				out[i] = err
			}
		}
	}
	return out
}

// DeleteACLs removes the ACLs each filter matches and answers, per
// filter, the ACLs it removed. An ACL two filters match is removed once
// and listed by both, as Kafka does.
func (c *Controller) DeleteACLs(ctx context.Context, filters []authz.Filter) []DeleteACLsResult {
	in := slices.Clone(filters)
	var out []DeleteACLsResult
	if err := c.do(ctx, func() { out = c.deleteACLs(in) }); err != nil {
		out = make([]DeleteACLsResult, len(filters))
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}

func (c *Controller) deleteACLs(filters []authz.Filter) []DeleteACLsResult {
	out := make([]DeleteACLsResult, len(filters))
	if !c.node.IsLeader() {
		for i := range out {
			out[i].Err = notController()
		}
		return out
	}
	all := c.node.Image().ACLs().All()
	removed := map[[16]byte]bool{}
	var recs []image.Record
	for i, f := range filters {
		if f.HasUnknown() {
			out[i].Err = apiError(kerr.InvalidRequest, "Unknown patternFilter or entryFilter.")
			continue
		}
		for _, a := range all {
			acl := ACLOf(a)
			if !f.Matches(acl) {
				continue
			}
			out[i].Deleted = append(out[i].Deleted, acl)
			if !removed[a.ID] {
				removed[a.ID] = true
				recs = append(recs, &image.RemoveAccessControlEntryRecord{ID: a.ID})
			}
		}
	}
	if len(recs) > maxACLRecordsPerOp {
		for i := range out {
			out[i] = DeleteACLsResult{Err: apiError(kerr.InvalidRequest, "Cannot remove more than %d acls in a single delete operation.", maxACLRecordsPerOp)}
		}
		return out
	}
	if len(recs) == 0 {
		return out
	}
	if err := c.propose(recs); err != nil {
		for i := range out {
			out[i] = DeleteACLsResult{Err: err}
		}
	}
	return out
}

// CreateACLs implements API.
func (c *Client) CreateACLs(ctx context.Context, acls []authz.ACL) []error {
	return invoke(ctx, c, createACLsRPC, acls)
}

// DeleteACLs implements API.
func (c *Client) DeleteACLs(ctx context.Context, filters []authz.Filter) []DeleteACLsResult {
	return invoke(ctx, c, deleteACLsRPC, filters)
}

var createACLsRPC = &rpc[[]authz.ACL, []error]{
	api: apiCreateACLs,
	serve: func(ctx context.Context, c *Controller, acls []authz.ACL) []error {
		return c.CreateACLs(ctx, acls)
	},
	notController: anyNotController(func(err error) error { return err }),
	failed: func(acls []authz.ACL, err error) []error {
		out := make([]error, len(acls))
		for i := range out {
			out[i] = err
		}
		return out
	},
	codec: createACLsCodec,
}

var deleteACLsRPC = &rpc[[]authz.Filter, []DeleteACLsResult]{
	api: apiDeleteACLs,
	serve: func(ctx context.Context, c *Controller, filters []authz.Filter) []DeleteACLsResult {
		return c.DeleteACLs(ctx, filters)
	},
	notController: anyNotController(func(r DeleteACLsResult) error { return r.Err }),
	failed: func(filters []authz.Filter, err error) []DeleteACLsResult {
		out := make([]DeleteACLsResult, len(filters))
		for i := range out {
			out[i].Err = err
		}
		return out
	},
	codec: deleteACLsCodec,
}

var createACLsCodec = kafkaCodec[[]authz.ACL, []error, *kmsg.CreateACLsRequest, *kmsg.CreateACLsResponse]{
	version: 3,
	newReq:  kmsg.NewPtrCreateACLsRequest,
	newResp: kmsg.NewPtrCreateACLsResponse,
	toReq: func(acls []authz.ACL) *kmsg.CreateACLsRequest {
		m := kmsg.NewPtrCreateACLsRequest()
		for _, a := range acls {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType = kmsg.ACLResourceType(a.ResourceType)
			c.ResourceName = a.ResourceName
			c.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			c.Principal, c.Host = a.Principal, a.Host
			c.Operation = kmsg.ACLOperation(a.Operation)
			c.PermissionType = kmsg.ACLPermissionType(a.Permission)
			m.Creations = append(m.Creations, c)
		}
		return m
	},
	fromReq: func(m *kmsg.CreateACLsRequest) ([]authz.ACL, error) {
		out := make([]authz.ACL, 0, len(m.Creations))
		for _, c := range m.Creations {
			out = append(out, authz.ACL{
				ResourceType: authz.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
				PatternType: authz.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
				Operation: authz.Operation(c.Operation), Permission: authz.Permission(c.PermissionType),
			})
		}
		return out, nil
	},
	toResp: func(errs []error) *kmsg.CreateACLsResponse {
		m := kmsg.NewPtrCreateACLsResponse()
		for _, err := range errs {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = kafkaErr(err)
			m.Results = append(m.Results, r)
		}
		return m
	},
	fromResp: func(m *kmsg.CreateACLsResponse) ([]error, error) {
		out := make([]error, 0, len(m.Results))
		for _, r := range m.Results {
			out = append(out, fromKafkaErr(r.ErrorCode, r.ErrorMessage))
		}
		return out, nil
	},
}

var deleteACLsCodec = kafkaCodec[[]authz.Filter, []DeleteACLsResult, *kmsg.DeleteACLsRequest, *kmsg.DeleteACLsResponse]{
	version: 3,
	newReq:  kmsg.NewPtrDeleteACLsRequest,
	newResp: kmsg.NewPtrDeleteACLsResponse,
	toReq: func(filters []authz.Filter) *kmsg.DeleteACLsRequest {
		m := kmsg.NewPtrDeleteACLsRequest()
		for _, f := range filters {
			kf := kmsg.NewDeleteACLsRequestFilter()
			kf.ResourceType = kmsg.ACLResourceType(f.ResourceType)
			kf.ResourceName = f.ResourceName
			kf.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
			kf.Principal, kf.Host = f.Principal, f.Host
			kf.Operation = kmsg.ACLOperation(f.Operation)
			kf.PermissionType = kmsg.ACLPermissionType(f.Permission)
			m.Filters = append(m.Filters, kf)
		}
		return m
	},
	fromReq: func(m *kmsg.DeleteACLsRequest) ([]authz.Filter, error) {
		out := make([]authz.Filter, 0, len(m.Filters))
		for _, f := range m.Filters {
			out = append(out, authz.Filter{
				ResourceType: authz.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
				PatternType: authz.PatternType(f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
				Operation: authz.Operation(f.Operation), Permission: authz.Permission(f.PermissionType),
			})
		}
		return out, nil
	},
	toResp: func(res []DeleteACLsResult) *kmsg.DeleteACLsResponse {
		m := kmsg.NewPtrDeleteACLsResponse()
		for _, r := range res {
			kr := kmsg.NewDeleteACLsResponseResult()
			kr.ErrorCode, kr.ErrorMessage = kafkaErr(r.Err)
			for _, a := range r.Deleted {
				ma := kmsg.NewDeleteACLsResponseResultMatchingACL()
				ma.ResourceType = kmsg.ACLResourceType(a.ResourceType)
				ma.ResourceName = a.ResourceName
				ma.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
				ma.Principal, ma.Host = a.Principal, a.Host
				ma.Operation = kmsg.ACLOperation(a.Operation)
				ma.PermissionType = kmsg.ACLPermissionType(a.Permission)
				kr.MatchingACLs = append(kr.MatchingACLs, ma)
			}
			m.Results = append(m.Results, kr)
		}
		return m
	},
	fromResp: func(m *kmsg.DeleteACLsResponse) ([]DeleteACLsResult, error) {
		out := make([]DeleteACLsResult, 0, len(m.Results))
		for _, kr := range m.Results {
			r := DeleteACLsResult{Err: fromKafkaErr(kr.ErrorCode, kr.ErrorMessage)}
			for _, ma := range kr.MatchingACLs {
				r.Deleted = append(r.Deleted, authz.ACL{
					ResourceType: authz.ResourceType(ma.ResourceType), ResourceName: ma.ResourceName,
					PatternType: authz.PatternType(ma.ResourcePatternType), Principal: ma.Principal, Host: ma.Host,
					Operation: authz.Operation(ma.Operation), Permission: authz.Permission(ma.PermissionType),
				})
			}
			out = append(out, r)
		}
		return out, nil
	},
}
