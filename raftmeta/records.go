package raftmeta

import (
	"errors"
	"fmt"
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
	default:
		return fmt.Sprintf("RecordType(%d)", uint16(t))
	}
}

// Kafka's ConfigResource types that ConfigRecord uses.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
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
	encode(e *encoder)
	decode(d *decoder)
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

func (r *TopicRecord) encode(e *encoder) {
	e.string(r.Name)
	e.uuid(r.ID)
}

func (r *TopicRecord) decode(d *decoder) {
	r.Name = d.string()
	r.ID = d.uuid()
}

func (r *PartitionRecord) encode(e *encoder) {
	e.uuid(r.TopicID)
	e.int32(r.Partition)
	e.int32s(r.Replicas)
	e.int32s(r.ISR)
	e.int32(r.Leader)
	e.int32(r.LeaderEpoch)
	e.int32(r.PartitionEpoch)
	e.int32s(r.AddingReplicas)
	e.int32s(r.RemovingReplicas)
}

func (r *PartitionRecord) decode(d *decoder) {
	r.TopicID = d.uuid()
	r.Partition = d.int32()
	r.Replicas = d.int32s()
	r.ISR = d.int32s()
	r.Leader = d.int32()
	r.LeaderEpoch = d.int32()
	r.PartitionEpoch = d.int32()
	if d.version >= 1 {
		r.AddingReplicas = d.int32s()
		r.RemovingReplicas = d.int32s()
	}
}

func (r *PartitionChangeRecord) encode(e *encoder) {
	e.uuid(r.TopicID)
	e.int32(r.Partition)
	e.int32(r.Leader)
	e.int32s(r.ISR)
	e.int32s(r.Replicas)
	e.int32s(r.AddingReplicas)
	e.int32s(r.RemovingReplicas)
}

func (r *PartitionChangeRecord) decode(d *decoder) {
	r.TopicID = d.uuid()
	r.Partition = d.int32()
	r.Leader = d.int32()
	r.ISR = d.int32s()
	r.Replicas = d.int32s()
	if d.version >= 1 {
		r.AddingReplicas = d.int32s()
		r.RemovingReplicas = d.int32s()
	}
}

func (r *RemoveTopicRecord) encode(e *encoder) { e.uuid(r.TopicID) }
func (r *RemoveTopicRecord) decode(d *decoder) { r.TopicID = d.uuid() }

func (r *ConfigRecord) encode(e *encoder) {
	e.int8(r.ResourceType)
	e.string(r.ResourceName)
	e.string(r.Name)
	e.nullableString(r.Value)
}

func (r *ConfigRecord) decode(d *decoder) {
	r.ResourceType = d.int8()
	r.ResourceName = d.string()
	r.Name = d.string()
	r.Value = d.nullableString()
}

func (r *RegisterBrokerRecord) encode(e *encoder) {
	e.int32(r.BrokerID)
	e.uuid(r.IncarnationID)
	e.int64(r.Epoch)
	e.uvarint(uint64(len(r.Listeners)))
	for _, l := range r.Listeners {
		e.string(l.Name)
		e.string(l.Host)
		e.int32(l.Port)
		e.int16(l.SecurityProtocol)
	}
	e.nullableString(r.Rack)
	e.bool(r.Fenced)
}

func (r *RegisterBrokerRecord) decode(d *decoder) {
	r.BrokerID = d.int32()
	r.IncarnationID = d.uuid()
	r.Epoch = d.int64()
	// A listener takes at least four bytes: two empty strings and two varints.
	if n := d.count(4); n > 0 {
		r.Listeners = make([]Listener, n)
		for i := range r.Listeners {
			l := &r.Listeners[i]
			l.Name = d.string()
			l.Host = d.string()
			l.Port = d.int32()
			l.SecurityProtocol = d.int16()
		}
	}
	r.Rack = d.nullableString()
	r.Fenced = d.bool()
}

func (r *BrokerRegistrationChangeRecord) encode(e *encoder) {
	e.int32(r.BrokerID)
	e.int64(r.BrokerEpoch)
	e.bool(r.Fenced)
}

func (r *BrokerRegistrationChangeRecord) decode(d *decoder) {
	r.BrokerID = d.int32()
	r.BrokerEpoch = d.int64()
	r.Fenced = d.bool()
}

func (r *ProducerIDsRecord) encode(e *encoder) {
	e.int32(r.BrokerID)
	e.int64(r.BrokerEpoch)
	e.int64(r.NextProducerID)
}

func (r *ProducerIDsRecord) decode(d *decoder) {
	r.BrokerID = d.int32()
	r.BrokerEpoch = d.int64()
	r.NextProducerID = d.int64()
}

func (r *FeatureLevelRecord) encode(e *encoder) {
	e.string(r.Name)
	e.int16(r.Level)
}

func (r *FeatureLevelRecord) decode(d *decoder) {
	r.Name = d.string()
	r.Level = d.int16()
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
	default:
		return nil
	}
}

// AppendRecord appends the encoding of r to b: its type, its version, then
// its fields.
func AppendRecord(b []byte, r Record) []byte {
	e := encoder{buf: b}
	e.uvarint(uint64(r.Type()))
	e.uvarint(latestVersion(r.Type()))
	r.encode(&e)
	return e.buf
}

// EncodeRecord returns the encoding of r.
func EncodeRecord(r Record) []byte { return AppendRecord(nil, r) }

// DecodeRecord decodes one record that fills b exactly. It returns an error,
// never panics, for any input that EncodeRecord could not have produced in
// structure: an unknown type or version, a truncated field, an out of range
// integer or trailing bytes.
func DecodeRecord(b []byte) (Record, error) {
	d := decoder{buf: b}
	typ := d.uvarint()
	ver := d.uvarint()
	if d.err != nil {
		return nil, fmt.Errorf("decode record header: %w", d.err)
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
	d.version = ver
	r.decode(&d)
	if d.err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.Type(), d.err)
	}
	if len(d.buf) != 0 {
		return nil, fmt.Errorf("decode %s: %d trailing bytes", r.Type(), len(d.buf))
	}
	return r, nil
}

// appendRecords appends a count and then each record with its length, the
// body of both a log entry and an image snapshot.
func appendRecords(b []byte, recs []Record) []byte {
	e := encoder{buf: b}
	e.uvarint(uint64(len(recs)))
	var scratch []byte
	for _, r := range recs {
		scratch = AppendRecord(scratch[:0], r)
		e.uvarint(uint64(len(scratch)))
		e.buf = append(e.buf, scratch...)
	}
	return e.buf
}

// decodeRecords reads what appendRecords wrote, which must fill d.
func decodeRecords(d *decoder) ([]Record, error) {
	// The smallest record is a length byte plus a type, a version and a
	// one-byte field.
	n := d.count(3)
	if d.err != nil {
		return nil, d.err
	}
	recs := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		b := d.bytesOf(d.uvarint())
		if d.err != nil {
			return nil, fmt.Errorf("record %d: %w", i, d.err)
		}
		r, err := DecodeRecord(b)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		recs = append(recs, r)
	}
	if len(d.buf) != 0 {
		return nil, fmt.Errorf("%d trailing bytes after %d records", len(d.buf), n)
	}
	return recs, nil
}

// errBadEntry marks a log entry whose payload cannot be decoded.
var errBadEntry = errors.New("bad metadata log entry")
