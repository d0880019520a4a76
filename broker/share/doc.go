// Package share is the share-group coordinator (KIP-932, queues for
// Kafka): share-group membership with the simple server-side assignor,
// share sessions, and the state of every share partition (which records of
// a topic partition a share group has acquired, acknowledged, released or
// archived), kept durable in __share_group_state as Kafka's share
// coordinator keeps it.
//
// It runs on the coordinator runtime (broker/coord) as broker/group and
// broker/txn do: a group id maps to a partition of __share_group_state and
// that partition to a shard, which owns the group's members, its share
// sessions and its share partitions, so one goroutine decides every
// acquisition and acknowledgement of a group without locks.
//
// Layout:
//
//   - coordinator.go: the Coordinator and its API, one method per request
//     the broker hands over; config.go its configuration.
//   - group.go: members, epochs, session timeouts and the simple assignor.
//   - partition.go: the share-partition state machine (SharePartition in
//     Kafka): the start offset, in-flight records AVAILABLE / ACQUIRED /
//     ACKNOWLEDGED / ARCHIVED, delivery counts, acquisition locks.
//   - session.go: share sessions (ShareSessionCache in Kafka) and the
//     ShareFetch / ShareAcknowledge steps that run on the shard.
//   - records.go: the ShareSnapshot records of __share_group_state;
//     load.go their replay when the broker comes to lead a partition.
//
// Where Kafka splits this over three components (the group coordinator
// for membership, SharePartitionManager on each partition leader, the
// share coordinator for durability), Gregor keeps one coordinator per
// group; docs/share-groups.md says what that changes.
package share
