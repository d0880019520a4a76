package image

import (
	"fmt"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// RecordType tags a metadata record. The values are Kafka's metadata record
// API keys (metadata/src/main/resources/common/metadata/*.json) so that a
// record dump reads the same as Kafka's.
type RecordType uint16

// The metadata record types Gregor writes.
const (
	TypeRegisterBroker           RecordType = 0
	TypeTopic                    RecordType = 2
	TypePartition                RecordType = 3
	TypeConfig                   RecordType = 4
	TypePartitionChange          RecordType = 5
	TypeRemoveTopic              RecordType = 9
	TypeFeatureLevel             RecordType = 12
	TypeProducerIDs              RecordType = 15
	TypeBrokerRegistrationChange RecordType = 17
)

// String returns the record's Kafka name.
func (t RecordType) String() string {
	switch t {
	case TypeRegisterBroker:
		return "RegisterBrokerRecord"
	case TypeTopic:
		return "TopicRecord"
	case TypePartition:
		return "PartitionRecord"
	case TypeConfig:
		return "ConfigRecord"
	case TypePartitionChange:
		return "PartitionChangeRecord"
	case TypeRemoveTopic:
		return "RemoveTopicRecord"
	case TypeFeatureLevel:
		return "FeatureLevelRecord"
	case TypeProducerIDs:
		return "ProducerIdsRecord"
	case TypeBrokerRegistrationChange:
		return "BrokerRegistrationChangeRecord"
	case TypeUserScramCredential:
		return "UserScramCredentialRecord"
	case TypeRemoveUserScramCredential:
		return "RemoveUserScramCredentialRecord"
	case TypeClientQuota:
		return "ClientQuotaRecord"
	case TypeAccessControlEntry:
		return "AccessControlEntryRecord"
	case TypeRemoveAccessControlEntry:
		return "RemoveAccessControlEntryRecord"
	default:
		return fmt.Sprintf("RecordType(%d)", uint16(t))
	}
}

// Kafka's ConfigResource types that ConfigRecord uses.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
	ResourceGroup  int8 = 32
)

// NoLeader is the leader of a partition without one; NoLeaderChange in a
// PartitionChangeRecord keeps the current leader (Kafka's constants).
const (
	NoLeader       int32 = -1
	NoLeaderChange int32 = -2
)

// latestVersion is the version written for records of type t. Decode reads
// every version up to it and rejects a higher one rather than misreading
// fields it does not know. Version 1 of PartitionRecord and
// PartitionChangeRecord added the adding and removing replicas of a
// reassignment (Kafka's fields of the same names).
func latestVersion(t RecordType) uint64 {
	switch t {
	case TypePartition, TypePartitionChange:
		return 1
	default:
		return 0
	}
}

// Record is one metadata record. The set is closed: only the types in this
// package implement it.
type Record interface {
	// Type returns the record's type tag.
	Type() RecordType
	encode(e *compact.Encoder)
	decode(d *compact.Decoder)
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name string
	ID   [16]byte
}

// PartitionRecord creates a partition or replaces all of its state.
// AddingReplicas and RemovingReplicas (version 1) describe a reassignment
// in progress: both are subsets of Replicas, and empty when none is.
type PartitionRecord struct {
	TopicID          [16]byte
	Partition        int32
	Replicas         []int32
	ISR              []int32
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// PartitionChangeRecord changes a partition's leader, ISR, replicas or
// reassignment. A nil slice keeps the current value (an empty one clears
// AddingReplicas or RemovingReplicas); Leader NoLeaderChange keeps the
// leader. Applying it bumps the partition epoch, and the leader epoch
// whenever Leader is set, even to the current leader, as Kafka's
// PartitionRegistration.merge does: a reassignment that drops replicas
// sets it so that the removed replicas are fenced.
type PartitionChangeRecord struct {
	TopicID          [16]byte
	Partition        int32
	Leader           int32
	ISR              []int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	TopicID [16]byte
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config of a
// topic or broker. A broker config with an empty ResourceName is the
// cluster-wide default.
type ConfigRecord struct {
	ResourceType int8
	ResourceName string
	Name         string
	Value        *string
}

// Listener is one endpoint of a registered broker.
type Listener struct {
	Name             string
	Host             string
	Port             int32
	SecurityProtocol int16
}

// RegisterBrokerRecord registers a broker, replacing any earlier
// registration of the same ID.
type RegisterBrokerRecord struct {
	BrokerID      int32
	IncarnationID [16]byte
	Epoch         int64
	Listeners     []Listener
	Rack          *string
	Fenced        bool
}

// BrokerRegistrationChangeRecord fences or unfences a registered broker.
type BrokerRegistrationChangeRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	Fenced      bool
}

// ProducerIDsRecord records that producer IDs below NextProducerID have been
// handed out (to BrokerID, in blocks).
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// FeatureLevelRecord sets a feature's finalized level; level 0 removes it.
type FeatureLevelRecord struct {
	Name  string
	Level int16
}

// Type implements Record.
func (*TopicRecord) Type() RecordType { return TypeTopic }

// Type implements Record.
func (*PartitionRecord) Type() RecordType { return TypePartition }

// Type implements Record.
func (*PartitionChangeRecord) Type() RecordType { return TypePartitionChange }

// Type implements Record.
func (*RemoveTopicRecord) Type() RecordType { return TypeRemoveTopic }

// Type implements Record.
func (*ConfigRecord) Type() RecordType { return TypeConfig }

// Type implements Record.
func (*RegisterBrokerRecord) Type() RecordType { return TypeRegisterBroker }

// Type implements Record.
func (*BrokerRegistrationChangeRecord) Type() RecordType { return TypeBrokerRegistrationChange }

// Type implements Record.
func (*ProducerIDsRecord) Type() RecordType { return TypeProducerIDs }

// Type implements Record.
func (*FeatureLevelRecord) Type() RecordType { return TypeFeatureLevel }

func (r *TopicRecord) encode(e *compact.Encoder) {
	e.Str(r.Name)
	e.UUID(r.ID)
}

func (r *TopicRecord) decode(d *compact.Decoder) {
	r.Name = d.Str()
	r.ID = d.UUID()
}

func (r *PartitionRecord) encode(e *compact.Encoder) {
	e.UUID(r.TopicID)
	e.Int32(r.Partition)
	e.Int32s(r.Replicas)
	e.Int32s(r.ISR)
	e.Int32(r.Leader)
	e.Int32(r.LeaderEpoch)
	e.Int32(r.PartitionEpoch)
	e.Int32s(r.AddingReplicas)
	e.Int32s(r.RemovingReplicas)
}

func (r *PartitionRecord) decode(d *compact.Decoder) {
	r.TopicID = d.UUID()
	r.Partition = d.Int32()
	r.Replicas = d.Int32s()
	r.ISR = d.Int32s()
	r.Leader = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.PartitionEpoch = d.Int32()
	if d.Version >= 1 {
		r.AddingReplicas = d.Int32s()
		r.RemovingReplicas = d.Int32s()
	}
}

func (r *PartitionChangeRecord) encode(e *compact.Encoder) {
	e.UUID(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.Leader)
	e.Int32s(r.ISR)
	e.Int32s(r.Replicas)
	e.Int32s(r.AddingReplicas)
	e.Int32s(r.RemovingReplicas)
}

func (r *PartitionChangeRecord) decode(d *compact.Decoder) {
	r.TopicID = d.UUID()
	r.Partition = d.Int32()
	r.Leader = d.Int32()
	r.ISR = d.Int32s()
	r.Replicas = d.Int32s()
	if d.Version >= 1 {
		r.AddingReplicas = d.Int32s()
		r.RemovingReplicas = d.Int32s()
	}
}

func (r *RemoveTopicRecord) encode(e *compact.Encoder) { e.UUID(r.TopicID) }
func (r *RemoveTopicRecord) decode(d *compact.Decoder) { r.TopicID = d.UUID() }

func (r *ConfigRecord) encode(e *compact.Encoder) {
	e.Int8(r.ResourceType)
	e.Str(r.ResourceName)
	e.Str(r.Name)
	e.NullableString(r.Value)
}

func (r *ConfigRecord) decode(d *compact.Decoder) {
	r.ResourceType = d.Int8()
	r.ResourceName = d.Str()
	r.Name = d.Str()
	r.Value = d.NullableString()
}

func (r *RegisterBrokerRecord) encode(e *compact.Encoder) {
	e.Int32(r.BrokerID)
	e.UUID(r.IncarnationID)
	e.Int64(r.Epoch)
	e.Uvarint(uint64(len(r.Listeners)))
	for _, l := range r.Listeners {
		e.Str(l.Name)
		e.Str(l.Host)
		e.Int32(l.Port)
		e.Int16(l.SecurityProtocol)
	}
	e.NullableString(r.Rack)
	e.Bool(r.Fenced)
}

func (r *RegisterBrokerRecord) decode(d *compact.Decoder) {
	r.BrokerID = d.Int32()
	r.IncarnationID = d.UUID()
	r.Epoch = d.Int64()
	// A listener takes at least four bytes: two empty strings and two varints.
	if n := d.Count(4); n > 0 {
		r.Listeners = make([]Listener, n)
		for i := range r.Listeners {
			l := &r.Listeners[i]
			l.Name = d.Str()
			l.Host = d.Str()
			l.Port = d.Int32()
			l.SecurityProtocol = d.Int16()
		}
	}
	r.Rack = d.NullableString()
	r.Fenced = d.Bool()
}

func (r *BrokerRegistrationChangeRecord) encode(e *compact.Encoder) {
	e.Int32(r.BrokerID)
	e.Int64(r.BrokerEpoch)
	e.Bool(r.Fenced)
}

func (r *BrokerRegistrationChangeRecord) decode(d *compact.Decoder) {
	r.BrokerID = d.Int32()
	r.BrokerEpoch = d.Int64()
	r.Fenced = d.Bool()
}

func (r *ProducerIDsRecord) encode(e *compact.Encoder) {
	e.Int32(r.BrokerID)
	e.Int64(r.BrokerEpoch)
	e.Int64(r.NextProducerID)
}

func (r *ProducerIDsRecord) decode(d *compact.Decoder) {
	r.BrokerID = d.Int32()
	r.BrokerEpoch = d.Int64()
	r.NextProducerID = d.Int64()
}

func (r *FeatureLevelRecord) encode(e *compact.Encoder) {
	e.Str(r.Name)
	e.Int16(r.Level)
}

func (r *FeatureLevelRecord) decode(d *compact.Decoder) {
	r.Name = d.Str()
	r.Level = d.Int16()
}

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t RecordType) Record {
	switch t {
	case TypeRegisterBroker:
		return new(RegisterBrokerRecord)
	case TypeTopic:
		return new(TopicRecord)
	case TypePartition:
		return new(PartitionRecord)
	case TypeConfig:
		return new(ConfigRecord)
	case TypePartitionChange:
		return new(PartitionChangeRecord)
	case TypeRemoveTopic:
		return new(RemoveTopicRecord)
	case TypeFeatureLevel:
		return new(FeatureLevelRecord)
	case TypeProducerIDs:
		return new(ProducerIDsRecord)
	case TypeBrokerRegistrationChange:
		return new(BrokerRegistrationChangeRecord)
	case TypeUserScramCredential:
		return new(UserScramCredentialRecord)
	case TypeRemoveUserScramCredential:
		return new(RemoveUserScramCredentialRecord)
	case TypeClientQuota:
		return new(ClientQuotaRecord)
	case TypeAccessControlEntry:
		return new(AccessControlEntryRecord)
	case TypeRemoveAccessControlEntry:
		return new(RemoveAccessControlEntryRecord)
	default:
		return nil
	}
}

// AppendRecord appends the encoding of r to b: its type, its version, then
// its fields.
func AppendRecord(b []byte, r Record) []byte {
	e := compact.Encoder{Buf: b}
	e.Uvarint(uint64(r.Type()))
	e.Uvarint(latestVersion(r.Type()))
	r.encode(&e)
	return e.Buf
}

// EncodeRecord returns the encoding of r.
func EncodeRecord(r Record) []byte { return AppendRecord(nil, r) }

// DecodeRecord decodes one record that fills b exactly. It returns an error,
// never panics, for any input that EncodeRecord could not have produced in
// structure: an unknown type or version, a truncated field, an out of range
// integer or trailing bytes.
func DecodeRecord(b []byte) (Record, error) {
	d := compact.Decoder{Buf: b}
	typ := d.Uvarint()
	ver := d.Uvarint()
	if d.Err != nil {
		return nil, fmt.Errorf("decode record header: %w", d.Err)
	}
	if typ > 0xffff {
		return nil, fmt.Errorf("decode record: unknown type %d", typ)
	}
	r := newRecord(RecordType(typ))
	if r == nil {
		return nil, fmt.Errorf("decode record: unknown type %d", typ)
	}
	if ver > latestVersion(r.Type()) {
		return nil, fmt.Errorf("decode %s: unsupported version %d", r.Type(), ver)
	}
	d.Version = ver
	r.decode(&d)
	if d.Err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.Type(), d.Err)
	}
	if len(d.Buf) != 0 {
		return nil, fmt.Errorf("decode %s: %d trailing bytes", r.Type(), len(d.Buf))
	}
	return r, nil
}

// AppendRecords appends a count and then each record with its length, the
// body of both a metadata log entry and an image snapshot.
func AppendRecords(b []byte, recs []Record) []byte {
	e := compact.Encoder{Buf: b}
	e.Uvarint(uint64(len(recs)))
	var scratch []byte
	for _, r := range recs {
		scratch = AppendRecord(scratch[:0], r)
		e.Uvarint(uint64(len(scratch)))
		e.Buf = append(e.Buf, scratch...)
	}
	return e.Buf
}

// DecodeRecords reads what AppendRecords wrote, which must fill b.
func DecodeRecords(b []byte) ([]Record, error) {
	d := compact.Decoder{Buf: b}
	// The smallest record is a length byte plus a type, a version and a
	// one-byte field.
	n := d.Count(3)
	if d.Err != nil {
		return nil, d.Err
	}
	recs := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		b := d.BytesOf(d.Uvarint())
		if d.Err != nil {
			return nil, fmt.Errorf("record %d: %w", i, d.Err)
		}
		r, err := DecodeRecord(b)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		recs = append(recs, r)
	}
	if len(d.Buf) != 0 {
		return nil, fmt.Errorf("%d trailing bytes after %d records", len(d.Buf), n)
	}
	return recs, nil
}
