package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Record is one __consumer_offsets record (see coord.Record): a key and a
// value in Kafka's coordinator schemas, each prefixed by its int16 version.
// A nil Value is a tombstone. The records a Load replays also say which
// batch they came from, so that transactional offset commits are rebuilt
// exactly.
type Record = coord.Record

// Store appends records to a __consumer_offsets partition (see
// coord.Store): Append returns once the records are durable or have
// failed, and errors that wrap a *kerr.Error are mapped to the client error
// Kafka answers (NOT_LEADER_OR_FOLLOWER becomes NOT_COORDINATOR, and so
// on). A Store that also implements TxnStore serves transactional offset
// commits.
type Store = coord.Store

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
// as Kafka: Utils.abs(groupId.hashCode()) % partitions (see
// coord.PartitionFor). It returns 0 when partitions is not positive.
func PartitionFor(groupID string, partitions int32) int32 {
	return coord.PartitionFor(groupID, partitions)
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
