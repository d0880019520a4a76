package group

import (
	"context"
	"encoding/binary"
	"math"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one __consumer_offsets record: a key and a value in Kafka's
// coordinator schemas, each prefixed by its int16 version. A nil Value is a
// tombstone.
//
// The records the coordinator hands to a Store carry only Key and Value.
// The records a Load replays also say which batch they came from, so that
// transactional offset commits are rebuilt exactly: the zero values mean a
// record of an ordinary (non-transactional, non-control) batch.
type Record struct {
	Key   []byte
	Value []byte

	// Transactional is set for a record of a transactional data batch:
	// an offset commit in it stays pending until a marker of ProducerID
	// commits or aborts it.
	Transactional bool
	// Control is set for a record of a control batch: Key and Value are
	// the control record's (kmsg.ControlRecordKey, then for markers
	// kmsg.EndTxnMarker). COMMIT and ABORT markers end ProducerID's
	// transaction; other control types are skipped.
	Control bool
	// ProducerID and ProducerEpoch are the batch header's; they matter
	// only when Transactional or Control is set.
	ProducerID    int64
	ProducerEpoch int16
}

// Store appends records to a __consumer_offsets partition. Append returns
// once the records are durable (acks=all in Kafka's terms) or have failed;
// errors that wrap a *kerr.Error are mapped to the client error Kafka
// answers (NOT_LEADER_OR_FOLLOWER becomes NOT_COORDINATOR, and so on).
// Appends to one partition are issued one at a time, in order. A Store
// that also implements TxnStore serves transactional offset commits.
type Store interface {
	Append(ctx context.Context, partition int32, records []Record) error
}

// Key versions double as record types in Kafka's coordinator serde. Kafka 4
// writes offset commits with key version 1 and group metadata with 2; 0 is
// an older offset commit key. Versions 3 and up are KIP-848 and share groups.
const (
	offsetCommitKeyV0       = 0
	offsetCommitKeyVersion  = 1
	groupMetadataKeyVersion = 2

	// Kafka 4 writes OffsetCommitValue v3 (leader epoch, no expire
	// timestamp) unless the client asked for a retention time (OffsetCommit
	// v2-v4), which only v1 can carry.
	offsetCommitValueVersion       = 3
	offsetCommitValueVersionExpire = 1
	// GroupMetadataValue v3 carries group.instance.id.
	groupMetadataValueVersion = 3
)

// PartitionFor returns the __consumer_offsets partition of a group, exactly
// as Kafka: Utils.abs(groupId.hashCode()) % partitions, where hashCode is
// Java's String.hashCode over UTF-16 code units and Utils.abs maps
// Integer.MIN_VALUE to 0. It returns 0 when partitions is not positive.
func PartitionFor(groupID string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	h := javaStringHash(groupID)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}

// javaStringHash is String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over the
// UTF-16 encoding, wrapping at 32 bits.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// tp names one topic partition.
type tp struct {
	topic     string
	partition int32
}

// offsetValue is a committed offset as kept in memory and in
// OffsetCommitValue.
type offsetValue struct {
	offset          int64
	leaderEpoch     int32
	metadata        string
	commitTimestamp int64
	expireTimestamp int64 // -1 when the commit carried no retention time
	// order is the record's place in the partition's log: its index in the
	// replay, or a counter continuing it for records appended since. A
	// committed transaction's offset replaces a committed offset only if
	// it was written after it, as Kafka compares record offsets.
	order int64
}

func offsetCommitKey(group string, t tp) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: t.topic, Partition: t.partition}
	return k.AppendTo(nil)
}

func offsetCommitRecord(group string, t tp, o offsetValue) Record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	if o.expireTimestamp >= 0 {
		v.Version = offsetCommitValueVersionExpire
	}
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitTimestamp
	v.ExpireTimestamp = o.expireTimestamp
	return Record{Key: offsetCommitKey(group, t), Value: v.AppendTo(nil)}
}

func offsetTombstone(group string, t tp) Record {
	return Record{Key: offsetCommitKey(group, t)}
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func groupTombstone(group string) Record {
	return Record{Key: groupMetadataKey(group)}
}

// groupMetadataRecord writes the group with the given assignment, as
// Kafka's newGroupMetadataRecord: every member's subscription is its
// metadata for the selected protocol.
func groupMetadataRecord(g *classicGroup, assignment map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = g.protocolName
	if g.leader != "" {
		leader := g.leader
		v.Leader = &leader
	}
	v.CurrentStateTimestamp = g.stateTimestamp
	for _, id := range g.order {
		m := g.members[id]
		mm := kmsg.NewGroupMetadataValueMember()
		mm.MemberID = m.id
		mm.InstanceID = m.instanceID
		mm.ClientID = m.clientID
		mm.ClientHost = m.clientHost
		mm.RebalanceTimeoutMillis = m.rebalanceTimeoutMs
		mm.SessionTimeoutMillis = m.sessionTimeoutMs
		if g.protocolName != nil {
			mm.Subscription = m.metadata(*g.protocolName)
		}
		if mm.Subscription == nil {
			mm.Subscription = []byte{}
		}
		mm.Assignment = assignment[m.id]
		if mm.Assignment == nil {
			mm.Assignment = []byte{}
		}
		v.Members = append(v.Members, mm)
	}
	return Record{Key: groupMetadataKey(g.id), Value: v.AppendTo(nil)}
}

// keyVersion reads a record key's version prefix.
func keyVersion(key []byte) (int16, bool) {
	if len(key) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key)), true
}

func recordsSize(recs []Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
	}
	return n
}
