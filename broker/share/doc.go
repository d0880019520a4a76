// Package share is the share-group coordinator (KIP-932, queues for
// Kafka): share-group membership with the simple server-side assignor,
// share sessions, and the state of every share partition (which records of
// a topic partition a share group has acquired, acknowledged, released or
// archived), kept durable in __share_group_state as Kafka's share
// coordinator keeps it.
//
// It runs on the coordinator runtime (broker/coord) as broker/group and
// broker/txn do: a group id maps to a partition of __share_group_state and
// to a shard, which owns everything of the group this node keeps, so one
// goroutine decides every acquisition and acknowledgement of a group
// without locks.
//
// Layout:
//
//   - coordinator.go: the Coordinator and its API, one method per request
//     the broker hands over; config.go its configuration.
//   - group.go: members, epochs, session timeouts and the simple assignor,
//     kept by the leader of the group's __share_group_state partition.
//   - partition.go: the share-partition state machine (SharePartition in
//     Kafka): the start offset, in-flight records AVAILABLE / ACQUIRED /
//     ACKNOWLEDGED / ARCHIVED, delivery counts, acquisition locks, kept by
//     the topic partition's leader.
//   - session.go: share sessions (ShareSessionCache in Kafka) and the
//     ShareFetch / ShareAcknowledge steps that run on the shard.
//   - state.go: the durable state of share partitions, kept by the
//     group's share coordinator (ShareCoordinatorShard in Kafka) and read
//     and written by the partitions' leaders, directly or through a
//     Persister (the share-state requests 83-87 between brokers).
//   - records.go: the ShareSnapshot and ShareUpdate records of
//     __share_group_state;
//     members.go the membership records (Kafka's ShareGroup* records of
//     the group coordinator); load.go the replay of both when the broker
//     comes to lead a partition.
//   - revert.go: a membership operation whose records cannot be written
//     puts the group back as it was (Kafka reverts its timeline).
//
// Kafka keeps membership with the __consumer_offsets leader and writes
// it there; Gregor keeps it with the __share_group_state leader and
// writes the same records to that partition; docs/share-groups.md says
// what that changes.
package share
