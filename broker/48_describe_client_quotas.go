package broker

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeClientQuotas (key 48), versions 0-1: the quotas of the entities
// a filter matches, from this broker's metadata image, as Kafka's
// ClientQuotasImage.describe: each component names an entity type (user,
// client-id, ip) and matches one name (EXACT), the type's default
// (DEFAULT) or any (SPECIFIED); strict leaves out entities with types
// the filter does not name. A malformed filter answers INVALID_REQUEST
// and an unknown type UNSUPPORTED_VERSION, with Kafka's messages.
func init() { register(48, 0, 1, handleDescribeClientQuotas) }

// Kafka's ClientQuotaFilterComponent match types.
const (
	quotaMatchExact     = 0
	quotaMatchDefault   = 1
	quotaMatchSpecified = 2
)

func handleDescribeClientQuotas(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeClientQuotasRequest)
	if denied := s.clusterDenied(r, authz.OpDescribeConfigs); denied != nil {
		return respond(denied)
	}
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	exact := map[string]*string{} // entity type -> name, nil for the default
	typed := map[string]bool{}
	fail := func(code *kerr.Error, msg string) (result, error) {
		resp.ErrorCode, resp.ErrorMessage = code.Code, new(msg)
		return respond(resp)
	}
	for _, c := range req.Components {
		_, isExact := exact[c.EntityType]
		switch {
		case c.EntityType == "":
			return fail(kerr.InvalidRequest, "Invalid empty entity type.")
		case isExact || typed[c.EntityType]:
			return fail(kerr.InvalidRequest, "Entity type "+c.EntityType+" cannot appear more than once in the filter.")
		case c.EntityType != image.QuotaIP && c.EntityType != image.QuotaUser && c.EntityType != image.QuotaClientID:
			return fail(kerr.UnsupportedVersion, "Unsupported entity type "+c.EntityType)
		}
		switch c.MatchType {
		case quotaMatchExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[c.EntityType] = c.Match
		case quotaMatchDefault:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[c.EntityType] = nil
		case quotaMatchSpecified:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			typed[c.EntityType] = true
		default:
			return fail(kerr.InvalidRequest, "Unknown match type "+strconv.Itoa(int(c.MatchType)))
		}
	}
	_, ipExact := exact[image.QuotaIP]
	_, userExact := exact[image.QuotaUser]
	_, clientExact := exact[image.QuotaClientID]
	if (ipExact || typed[image.QuotaIP]) && (userExact || typed[image.QuotaUser] || clientExact || typed[image.QuotaClientID]) {
		return fail(kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	img := s.meta.Image()
	// Null is the error answer's: a successful one with no entity is an
	// empty array, which Kafka's Admin client reads without a null check.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range img.QuotaEntities() {
		parts := e.Parts()
		if !quotaFilterMatches(parts, exact, typed, req.Strict) {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range parts {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ee)
		}
		q := img.ClientQuotas(e)
		for _, k := range slices.Sorted(maps.Keys(q)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return respond(resp)
}

// quotaFilterMatches is Kafka's ClientQuotasImage.matches.
func quotaFilterMatches(parts []image.QuotaEntityData, exact map[string]*string, typed map[string]bool, strict bool) bool {
	if strict && len(parts) != len(exact)+len(typed) {
		return false
	}
	find := func(typ string) (image.QuotaEntityData, bool) {
		for _, p := range parts {
			if p.Type == typ {
				return p, true
			}
		}
		return image.QuotaEntityData{}, false
	}
	for typ, name := range exact {
		p, ok := find(typ)
		if !ok || (p.Name == nil) != (name == nil) || (name != nil && *p.Name != *name) {
			return false
		}
	}
	for typ := range typed {
		if _, ok := find(typ); !ok {
			return false
		}
	}
	return true
}
