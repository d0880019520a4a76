package controller

import (
	"context"
	"math"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// apiAlterClientQuotas is AlterClientQuotas' API key.
const apiAlterClientQuotas byte = 49

// quotaKeyType is how Kafka's QuotaConfig types a quota key's value.
type quotaKeyType int

const (
	quotaLong quotaKeyType = iota
	quotaInt
	quotaDouble
)

// userClientQuotaKeys and ipQuotaKeys are Kafka's quota keys by entity
// kind (QuotaConfig.userAndClientQuotaConfigs, ipConfigs).
var (
	userClientQuotaKeys = map[string]quotaKeyType{
		"producer_byte_rate":       quotaLong,
		"consumer_byte_rate":       quotaLong,
		"request_percentage":       quotaDouble,
		"controller_mutation_rate": quotaDouble,
	}
	ipQuotaKeys = map[string]quotaKeyType{"connection_creation_rate": quotaInt}
)

// EnforcedQuotaKeys are the quota keys Gregor's brokers enforce. The
// others Kafka has are refused rather than stored, so that no one takes
// a quota for enforced when it is not.
var EnforcedQuotaKeys = map[string]bool{"producer_byte_rate": true, "consumer_byte_rate": true, "controller_mutation_rate": true, "request_percentage": true, "connection_creation_rate": true}

// quotaAlteration is one entry of an AlterClientQuotas request as
// Kafka's AlterClientQuotasRequest.entries reads it: the entity's types
// to names, a later part of a type replacing an earlier one, and each
// key's new value (nil to remove), in the order the keys came.
type quotaAlteration struct {
	parts     []image.QuotaEntityData
	keys      []string
	values    map[string]*float64
	duplicate bool // a key given twice
}

func readQuotaAlteration(e kmsg.AlterClientQuotasRequestEntry) quotaAlteration {
	var a quotaAlteration
	for _, p := range e.Entity {
		d := image.QuotaEntityData{Type: p.Type, Name: p.Name}
		replaced := false
		for i := range a.parts {
			if a.parts[i].Type == p.Type {
				a.parts[i], replaced = d, true
			}
		}
		if !replaced {
			a.parts = append(a.parts, d)
		}
	}
	a.values = map[string]*float64{}
	for _, op := range e.Ops {
		if _, ok := a.values[op.Key]; ok {
			a.duplicate = true
			continue
		}
		var v *float64
		if !op.Remove {
			v = new(op.Value)
		}
		a.keys = append(a.keys, op.Key)
		a.values[op.Key] = v
	}
	return a
}

// AlterClientQuotas decides Kafka's AlterClientQuotas as its
// ClientQuotaControlManager does, with its error messages: an entity
// named twice, or with a key given twice, is refused ("Ignoring duplicate
// entity"); an empty entity, an unknown entity type, an empty name, an IP
// with a user or client id, an unknown key, a value not above 0 and a
// fraction for an integral key are INVALID_REQUEST. A key Kafka knows but
// Gregor does not enforce (EnforcedQuotaKeys) is INVALID_REQUEST too. The
// accepted changes commit as one log entry; validateOnly commits none.
func (c *Controller) AlterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	var resp *kmsg.AlterClientQuotasResponse
	if err := c.do(ctx, func() { resp = c.alterClientQuotas(req) }); err != nil {
		return failedQuotaResponse(req, err)
	}
	return resp
}

func (c *Controller) alterClientQuotas(req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	if !c.node.IsLeader() {
		return failedQuotaResponse(req, notController())
	}
	img := c.node.Image()
	type outcome struct {
		parts []image.QuotaEntityData
		err   error
	}
	// Results by entity, in the order entities first appear; an entity
	// that does not parse is keyed by its position.
	var order []any
	results := map[any]*outcome{}
	var recs []image.Record
	for i, e := range req.Entries {
		a := readQuotaAlteration(e)
		ent, entErr := image.QuotaEntityOf(a.parts)
		var key any = ent
		if entErr != nil {
			key = i
		}
		prev, seen := results[key]
		if !seen {
			prev = &outcome{parts: a.parts}
			results[key] = prev
			order = append(order, key)
		}
		if seen || a.duplicate {
			prev.err = apiError(kerr.InvalidRequest, "Ignoring duplicate entity %s", quotaEntityString(a.parts))
			continue
		}
		entRecs, err := c.quotaRecords(img, a, ent, entErr)
		if err != nil {
			prev.err = err
			continue
		}
		recs = append(recs, entRecs...)
	}
	if len(recs) > 0 && !req.ValidateOnly {
		if err := c.propose(recs); err != nil {
			return failedQuotaResponse(req, err)
		}
	}
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	for _, k := range order {
		o := results[k]
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = kafkaErr(o.err)
		re.Entity = responseEntity(o.parts)
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// quotaEntityString shows an entity as Kafka's ClientQuotaEntity does,
// even one that does not parse.
func quotaEntityString(parts []image.QuotaEntityData) string {
	s := "ClientQuotaEntity(entries={"
	for i, p := range parts {
		if i > 0 {
			s += ", "
		}
		name := "null"
		if p.Name != nil {
			name = *p.Name
		}
		s += p.Type + "=" + name
	}
	return s + "})"
}

func responseEntity(parts []image.QuotaEntityData) []kmsg.AlterClientQuotasResponseEntryEntity {
	var out []kmsg.AlterClientQuotasResponseEntryEntity
	for _, p := range parts {
		e := kmsg.NewAlterClientQuotasResponseEntryEntity()
		e.Type, e.Name = p.Type, p.Name
		out = append(out, e)
	}
	return out
}

// quotaRecords checks one entity's alteration and returns its records.
func (c *Controller) quotaRecords(img *image.Image, a quotaAlteration, ent image.QuotaEntity, entErr error) ([]image.Record, error) {
	if entErr != nil {
		// validateEntity's messages, in its order of checks.
		if len(a.parts) == 0 {
			return nil, apiError(kerr.InvalidRequest, "Invalid empty client quota entity")
		}
		for _, p := range a.parts {
			switch p.Type {
			case image.QuotaUser, image.QuotaClientID, image.QuotaIP:
			default:
				return nil, apiError(kerr.InvalidRequest, "Unhandled client quota entity type: %s", p.Type)
			}
			if p.Name != nil && *p.Name == "" {
				return nil, apiError(kerr.InvalidRequest, "Empty %s not supported", p.Type)
			}
		}
		return nil, apiError(kerr.InvalidRequest, "%v", entErr)
	}
	keys := userClientQuotaKeys
	if ent.IP.Present {
		if ent.User.Present || ent.ClientID.Present {
			return nil, apiError(kerr.InvalidRequest, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
		}
		if !ent.IP.Default {
			// Kafka also resolves host names; Gregor takes addresses only.
			if _, err := netip.ParseAddr(ent.IP.Name); err != nil {
				return nil, apiError(kerr.InvalidRequest, "%s is not a valid IP or resolvable host.", ent.IP.Name)
			}
		}
		keys = ipQuotaKeys
	}
	current := img.ClientQuotas(ent)
	var recs []image.Record
	for _, k := range a.keys {
		v := a.values[k]
		if v == nil {
			if _, ok := current[k]; ok {
				recs = append(recs, &image.ClientQuotaRecord{Entity: ent.Parts(), Key: k, Remove: true})
			}
			continue
		}
		if err := validateQuotaValue(keys, k, *v); err != nil {
			return nil, err
		}
		if old, ok := current[k]; !ok || old != *v {
			recs = append(recs, &image.ClientQuotaRecord{Entity: ent.Parts(), Key: k, Value: *v})
		}
	}
	return recs, nil
}

// validateQuotaValue is Kafka's validateQuotaKeyValue, then Gregor's
// refusal of keys it does not enforce.
func validateQuotaValue(keys map[string]quotaKeyType, key string, v float64) error {
	typ, ok := keys[key]
	if !ok {
		return apiError(kerr.InvalidRequest, "Invalid configuration key %s", key)
	}
	if v <= 0 {
		return apiError(kerr.InvalidRequest, "Quota %s must be greater than 0", key)
	}
	switch typ {
	case quotaInt:
		if v > math.MaxInt32 {
			return apiError(kerr.InvalidRequest, "Proposed value for %s is too large for an INT.", key)
		}
	case quotaLong:
		if v > math.MaxInt64 {
			return apiError(kerr.InvalidRequest, "Proposed value for %s is too large for a LONG.", key)
		}
	}
	if typ != quotaDouble && math.Abs(math.Mod(v, 1)) > 1e-6 {
		return apiError(kerr.InvalidRequest, "%s cannot be a fractional value.", key)
	}
	if !EnforcedQuotaKeys[key] {
		return apiError(kerr.InvalidRequest, "Quota %s is not enforced by Gregor yet; only producer_byte_rate, consumer_byte_rate, controller_mutation_rate and request_percentage are", key)
	}
	return nil
}

// failedQuotaResponse answers err for every entry of the request.
func failedQuotaResponse(req *kmsg.AlterClientQuotasRequest, err error) *kmsg.AlterClientQuotasResponse {
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	code, msg := kafkaErr(err)
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = code, msg
		re.Entity = responseEntity(readQuotaAlteration(e).parts)
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// alterClientQuotasRPC carries Kafka's own request and answer at v1.
var alterClientQuotasRPC = &rpc[*kmsg.AlterClientQuotasRequest, *kmsg.AlterClientQuotasResponse]{
	api: apiAlterClientQuotas,
	serve: func(ctx context.Context, c *Controller, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
		return c.AlterClientQuotas(ctx, req)
	},
	notController: func(resp *kmsg.AlterClientQuotasResponse) bool {
		for _, e := range resp.Entries {
			if e.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
		return false
	},
	failed: failedQuotaResponse,
	codec: kafkaCodec[*kmsg.AlterClientQuotasRequest, *kmsg.AlterClientQuotasResponse,
		*kmsg.AlterClientQuotasRequest, *kmsg.AlterClientQuotasResponse]{
		version:  1,
		newReq:   kmsg.NewPtrAlterClientQuotasRequest,
		newResp:  kmsg.NewPtrAlterClientQuotasResponse,
		toReq:    func(r *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasRequest { return r },
		fromReq:  func(r *kmsg.AlterClientQuotasRequest) (*kmsg.AlterClientQuotasRequest, error) { return r, nil },
		toResp:   func(r *kmsg.AlterClientQuotasResponse) *kmsg.AlterClientQuotasResponse { return r },
		fromResp: func(r *kmsg.AlterClientQuotasResponse) (*kmsg.AlterClientQuotasResponse, error) { return r, nil },
	},
}

// AlterClientQuotas implements API.
func (c *Client) AlterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	return invoke(ctx, c, alterClientQuotasRPC, req)
}
