package image

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// The SCRAM records, with Kafka's metadata record API keys.
const (
	TypeUserScramCredential       RecordType = 11
	TypeRemoveUserScramCredential RecordType = 22
)

// Kafka's ScramMechanism types, as UserScramCredentialRecord and the
// *UserScramCredentials requests carry them.
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

// ScramMechanismName returns the SASL name of a mechanism type, or "" for
// one Kafka does not know.
func ScramMechanismName(mechanism int8) string {
	switch mechanism {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// ScramMechanismType returns the type of a SASL mechanism name, 0 (Kafka's
// UNKNOWN) for any other.
func ScramMechanismType(name string) int8 {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256
	case "SCRAM-SHA-512":
		return ScramSHA512
	}
	return 0
}

// UserScramCredentialRecord creates or replaces a user's SCRAM credential
// for one mechanism. As in Kafka it holds what RFC 5802 has a server keep,
// never the password nor the salted password.
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord deletes a user's SCRAM credential for
// one mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

// Type implements Record.
func (*UserScramCredentialRecord) Type() RecordType { return TypeUserScramCredential }

// Type implements Record.
func (*RemoveUserScramCredentialRecord) Type() RecordType { return TypeRemoveUserScramCredential }

func appendBytes(e *compact.Encoder, b []byte) {
	e.Uvarint(uint64(len(b)))
	e.Buf = append(e.Buf, b...)
}

// readBytes copies, so that a decoded record does not alias the log
// entry it came from.
func readBytes(d *compact.Decoder) []byte {
	return bytes.Clone(d.BytesOf(d.Uvarint()))
}

func (r *UserScramCredentialRecord) encode(e *compact.Encoder) {
	e.Str(r.Name)
	e.Int8(r.Mechanism)
	appendBytes(e, r.Salt)
	appendBytes(e, r.StoredKey)
	appendBytes(e, r.ServerKey)
	e.Int32(r.Iterations)
}

func (r *UserScramCredentialRecord) decode(d *compact.Decoder) {
	r.Name = d.Str()
	r.Mechanism = d.Int8()
	r.Salt = readBytes(d)
	r.StoredKey = readBytes(d)
	r.ServerKey = readBytes(d)
	r.Iterations = d.Int32()
}

func (r *RemoveUserScramCredentialRecord) encode(e *compact.Encoder) {
	e.Str(r.Name)
	e.Int8(r.Mechanism)
}

func (r *RemoveUserScramCredentialRecord) decode(d *compact.Decoder) {
	r.Name = d.Str()
	r.Mechanism = d.Int8()
}

// ScramKey names one stored SCRAM credential.
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is a stored SCRAM credential. Its slices are shared
// with the image and must not be modified.
type ScramCredential struct {
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramCredential returns user's credential for mechanism.
func (img *Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	c, ok := img.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramUsers returns the users with at least one SCRAM credential, sorted.
func (img *Image) ScramUsers() []string {
	var users []string
	for k := range img.scram {
		users = append(users, k.User)
	}
	slices.Sort(users)
	return slices.Compact(users)
}

// ScramCredentials returns user's credentials, by mechanism type.
func (img *Image) ScramCredentials(user string) []ScramCredential {
	var out []ScramCredential
	for _, m := range []int8{ScramSHA256, ScramSHA512} {
		if c, ok := img.scram[ScramKey{user, m}]; ok {
			out = append(out, c)
		}
	}
	return out
}

func (b *imageBuilder) scramW() {
	if !b.ownScram {
		b.next.scram = maps.Clone(b.next.scram)
		if b.next.scram == nil {
			b.next.scram = map[ScramKey]ScramCredential{}
		}
		b.ownScram = true
	}
}

func (b *imageBuilder) applyScram(r *UserScramCredentialRecord) error {
	if r.Name == "" {
		return fmt.Errorf("SCRAM credential with an empty user name")
	}
	if ScramMechanismName(r.Mechanism) == "" {
		return fmt.Errorf("SCRAM credential of %s with unknown mechanism %d", r.Name, r.Mechanism)
	}
	b.scramW()
	b.next.scram[ScramKey{r.Name, r.Mechanism}] = ScramCredential{
		Mechanism:  r.Mechanism,
		Salt:       bytes.Clone(r.Salt),
		StoredKey:  bytes.Clone(r.StoredKey),
		ServerKey:  bytes.Clone(r.ServerKey),
		Iterations: r.Iterations,
	}
	return nil
}

// applyRemoveScram fails for a credential that does not exist, as Kafka's
// ScramControlManager.replay does.
func (b *imageBuilder) applyRemoveScram(r *RemoveUserScramCredentialRecord) error {
	k := ScramKey{r.Name, r.Mechanism}
	if _, ok := b.next.scram[k]; !ok {
		return fmt.Errorf("no SCRAM credential of %s for mechanism %d to remove", r.Name, r.Mechanism)
	}
	b.scramW()
	delete(b.next.scram, k)
	return nil
}

// scramRecords returns the records that rebuild the image's SCRAM
// credentials, by user then mechanism.
func (img *Image) scramRecords() []Record {
	keys := slices.Collect(maps.Keys(img.scram))
	slices.SortFunc(keys, func(a, b ScramKey) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	recs := make([]Record, 0, len(keys))
	for _, k := range keys {
		c := img.scram[k]
		recs = append(recs, &UserScramCredentialRecord{
			Name: k.User, Mechanism: k.Mechanism,
			Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations,
		})
	}
	return recs
}
