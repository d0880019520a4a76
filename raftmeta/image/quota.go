package image

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// TypeClientQuota is Kafka's ClientQuotaRecord.
const TypeClientQuota RecordType = 14

// Kafka's client quota entity types.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// QuotaEntityData is one part of a quota entity: its type and name, nil
// for the type's default entity.
type QuotaEntityData struct {
	Type string
	Name *string
}

// ClientQuotaRecord sets (Remove false) or removes one quota of an entity,
// as Kafka's record of the same name.
type ClientQuotaRecord struct {
	Entity []QuotaEntityData
	Key    string
	Value  float64
	Remove bool
}

// Type implements Record.
func (*ClientQuotaRecord) Type() RecordType { return TypeClientQuota }

func (r *ClientQuotaRecord) encode(e *compact.Encoder) {
	e.Uvarint(uint64(len(r.Entity)))
	for _, d := range r.Entity {
		e.Str(d.Type)
		e.NullableString(d.Name)
	}
	e.Str(r.Key)
	e.Buf = binary.BigEndian.AppendUint64(e.Buf, math.Float64bits(r.Value))
	e.Bool(r.Remove)
}

func (r *ClientQuotaRecord) decode(d *compact.Decoder) {
	// An entity part takes at least two bytes: an empty type and a null
	// name.
	if n := d.Count(2); n > 0 {
		r.Entity = make([]QuotaEntityData, n)
		for i := range r.Entity {
			r.Entity[i].Type = d.Str()
			r.Entity[i].Name = d.NullableString()
		}
	}
	r.Key = d.Str()
	if b := d.BytesOf(8); len(b) == 8 {
		r.Value = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	r.Remove = d.Bool()
}

// QuotaName is one entity type's part of a quota entity: absent, the
// default entity, or a named one.
type QuotaName struct {
	Present bool
	Default bool
	Name    string
}

// String is the name, "<default>" for the default entity.
func (n QuotaName) String() string {
	if n.Default {
		return "<default>"
	}
	return n.Name
}

// QuotaEntity is a client quota entity: a user, a client id, both, or an
// IP address.
type QuotaEntity struct {
	User, ClientID, IP QuotaName
}

// QuotaEntityOf builds an entity from its parts. It fails for an unknown
// type, a type given twice, an empty name or no parts at all.
func QuotaEntityOf(parts []QuotaEntityData) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("empty client quota entity")
	}
	for _, p := range parts {
		var n *QuotaName
		switch p.Type {
		case QuotaUser:
			n = &e.User
		case QuotaClientID:
			n = &e.ClientID
		case QuotaIP:
			n = &e.IP
		default:
			return e, fmt.Errorf("unknown client quota entity type %q", p.Type)
		}
		if n.Present {
			return e, fmt.Errorf("client quota entity type %s given twice", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return e, fmt.Errorf("empty %s", p.Type)
		}
		n.Present = true
		if p.Name == nil {
			n.Default = true
		} else {
			n.Name = *p.Name
		}
	}
	return e, nil
}

// Parts returns the entity's parts in Kafka's order of types: user,
// client-id, ip.
func (e QuotaEntity) Parts() []QuotaEntityData {
	var out []QuotaEntityData
	for _, p := range []struct {
		typ string
		n   QuotaName
	}{{QuotaUser, e.User}, {QuotaClientID, e.ClientID}, {QuotaIP, e.IP}} {
		if !p.n.Present {
			continue
		}
		d := QuotaEntityData{Type: p.typ}
		if !p.n.Default {
			d.Name = new(p.n.Name)
		}
		out = append(out, d)
	}
	return out
}

// String is Kafka's ClientQuotaEntity form, as its error messages show
// an entity: ClientQuotaEntity(entries={user=alice, client-id=null}).
func (e QuotaEntity) String() string {
	var parts []string
	for _, d := range e.Parts() {
		name := "null"
		if d.Name != nil {
			name = *d.Name
		}
		parts = append(parts, d.Type+"="+name)
	}
	return "ClientQuotaEntity(entries={" + strings.Join(parts, ", ") + "})"
}

func compareQuotaName(a, b QuotaName) int {
	switch {
	case a.Present != b.Present:
		if a.Present {
			return 1
		}
		return -1
	case a.Default != b.Default:
		if a.Default {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

func compareQuotaEntity(a, b QuotaEntity) int {
	return cmp.Or(compareQuotaName(a.User, b.User), compareQuotaName(a.ClientID, b.ClientID), compareQuotaName(a.IP, b.IP))
}

// ClientQuotas returns the quotas of one entity, nil for none. The map
// is the image's and must not be modified.
func (img *Image) ClientQuotas(e QuotaEntity) map[string]float64 {
	return img.quotas[e]
}

// QuotaEntities returns every entity with a quota, in a fixed order.
func (img *Image) QuotaEntities() []QuotaEntity {
	es := slices.Collect(maps.Keys(img.quotas))
	slices.SortFunc(es, compareQuotaEntity)
	return es
}

// HasClientQuotas reports whether any user or client-id entity has a
// quota, which is when the broker measures its clients at all.
func (img *Image) HasClientQuotas() bool { return len(img.quotas) > 0 }

func (b *imageBuilder) applyClientQuota(r *ClientQuotaRecord) error {
	e, err := QuotaEntityOf(r.Entity)
	if err != nil {
		return err
	}
	if r.Key == "" {
		return fmt.Errorf("client quota of %s with an empty key", e)
	}
	if !b.ownQuotas {
		b.next.quotas = maps.Clone(b.next.quotas)
		if b.next.quotas == nil {
			b.next.quotas = map[QuotaEntity]map[string]float64{}
		}
		b.ownQuotas = true
	}
	q := maps.Clone(b.next.quotas[e])
	if q == nil {
		q = map[string]float64{}
	}
	if r.Remove {
		delete(q, r.Key)
	} else {
		q[r.Key] = r.Value
	}
	if len(q) == 0 {
		delete(b.next.quotas, e)
	} else {
		b.next.quotas[e] = q
	}
	return nil
}

// quotaRecords returns the records that rebuild the image's client
// quotas.
func (img *Image) quotaRecords() []Record {
	var recs []Record
	for _, e := range img.QuotaEntities() {
		q := img.quotas[e]
		for _, k := range slices.Sorted(maps.Keys(q)) {
			recs = append(recs, &ClientQuotaRecord{Entity: e.Parts(), Key: k, Value: q[k]})
		}
	}
	return recs
}
