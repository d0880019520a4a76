package image

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// ACL records, as Kafka keeps its StandardAuthorizer's ACLs in the
// metadata log: AccessControlEntryRecord adds one ACL under an ID the
// controller chose, RemoveAccessControlEntryRecord removes it by that ID.
// The codes (resource type, pattern type, operation, permission) are
// Kafka's wire codes; the image checks only what it needs to stay
// consistent, the controller validates the rest.
const (
	TypeAccessControlEntry       RecordType = 18
	TypeRemoveAccessControlEntry RecordType = 19
)

// AccessControlEntryRecord adds an ACL (Kafka's record of the same name).
type AccessControlEntryRecord struct {
	ID             [16]byte
	ResourceType   int8
	ResourceName   string
	PatternType    int8
	Principal      string
	Host           string
	Operation      int8
	PermissionType int8
}

// RemoveAccessControlEntryRecord removes the ACL with ID.
type RemoveAccessControlEntryRecord struct {
	ID [16]byte
}

// ACL is one ACL of the image: the fields of the record that added it.
type ACL = AccessControlEntryRecord

// Type implements Record.
func (*AccessControlEntryRecord) Type() RecordType { return TypeAccessControlEntry }

// Type implements Record.
func (*RemoveAccessControlEntryRecord) Type() RecordType { return TypeRemoveAccessControlEntry }

func (r *AccessControlEntryRecord) encode(e *compact.Encoder) {
	e.UUID(r.ID)
	e.Int8(r.ResourceType)
	e.Str(r.ResourceName)
	e.Int8(r.PatternType)
	e.Str(r.Principal)
	e.Str(r.Host)
	e.Int8(r.Operation)
	e.Int8(r.PermissionType)
}

func (r *AccessControlEntryRecord) decode(d *compact.Decoder) {
	r.ID = d.UUID()
	r.ResourceType = d.Int8()
	r.ResourceName = d.Str()
	r.PatternType = d.Int8()
	r.Principal = d.Str()
	r.Host = d.Str()
	r.Operation = d.Int8()
	r.PermissionType = d.Int8()
}

func (r *RemoveAccessControlEntryRecord) encode(e *compact.Encoder) { e.UUID(r.ID) }
func (r *RemoveAccessControlEntryRecord) decode(d *compact.Decoder) { r.ID = d.UUID() }

// ACLs is the image's set of ACLs by ID. It is replaced, never changed,
// when a record adds or removes one, so a reader can tell a change by
// pointer inequality of Image.ACLs.
type ACLs struct {
	byID map[[16]byte]ACL
}

// ACLs returns the image's ACLs (never nil).
func (img *Image) ACLs() *ACLs {
	if img.acls == nil {
		return emptyACLs
	}
	return img.acls
}

var emptyACLs = &ACLs{}

// Len returns the number of ACLs.
func (a *ACLs) Len() int { return len(a.byID) }

// Get returns the ACL with id.
func (a *ACLs) Get(id [16]byte) (ACL, bool) {
	acl, ok := a.byID[id]
	return acl, ok
}

// All returns every ACL, sorted by ID.
func (a *ACLs) All() []ACL {
	out := make([]ACL, 0, len(a.byID))
	for _, id := range slices.SortedFunc(maps.Keys(a.byID), compareUUID) {
		out = append(out, a.byID[id])
	}
	return out
}

func compareUUID(x, y [16]byte) int {
	return slices.Compare(x[:], y[:])
}

// aclsW makes the builder's ACL set its own to change.
func (b *imageBuilder) aclsW() map[[16]byte]ACL {
	if !b.ownACLs {
		b.next.acls = &ACLs{byID: maps.Clone(b.next.ACLs().byID)}
		if b.next.acls.byID == nil {
			b.next.acls.byID = map[[16]byte]ACL{}
		}
		b.ownACLs = true
	}
	return b.next.acls.byID
}

// applyACL adds an ACL. As Kafka's AclsDelta, an ID already present is an
// error, and so is an ACL identical to another (the controller never
// writes one).
func (b *imageBuilder) applyACL(r *AccessControlEntryRecord) error {
	if r.ID == ([16]byte{}) {
		return fmt.Errorf("ACL with the zero ID")
	}
	if r.ResourceName == "" || r.Principal == "" || r.Host == "" {
		return fmt.Errorf("ACL %s has an empty resource name, principal or host", UUIDString(r.ID))
	}
	m := b.aclsW()
	if _, ok := m[r.ID]; ok {
		return fmt.Errorf("ACL %s already exists", UUIDString(r.ID))
	}
	m[r.ID] = *r
	return nil
}

// applyRemoveACL removes an ACL, which must exist.
func (b *imageBuilder) applyRemoveACL(r *RemoveAccessControlEntryRecord) error {
	if _, ok := b.next.ACLs().byID[r.ID]; !ok {
		return fmt.Errorf("no ACL with ID %s to remove", UUIDString(r.ID))
	}
	delete(b.aclsW(), r.ID)
	return nil
}

// appendACLRecords adds the records that rebuild the ACLs to a snapshot.
func (img *Image) appendACLRecords(recs []Record) []Record {
	for _, acl := range img.ACLs().All() {
		recs = append(recs, &acl)
	}
	return recs
}
