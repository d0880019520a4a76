// Package group is Kafka's group coordinator: the classic group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete) and group administration
// (ListGroups, DescribeGroups, DeleteGroups), persisted as records in
// __consumer_offsets with Kafka's key and value schemas.
//
// Layout:
//
//   - coordinator.go: the public API the broker's handlers call. Each call
//     blocks its caller until the answer is ready and never blocks a shard.
//   - shard.go: one goroutine per shard owns the state of the
//     __consumer_offsets partitions mapped to it (partition % shards). Timers
//     and finished appends hand their work back through the shard's inbox.
//   - machine.go, classic.go, offsets.go, admin.go: the state machine. It does
//     no I/O: it reads the clock, schedules timers and queues appends through
//     the effects interface, and answers through reply callbacks.
//   - classic_group.go: a classic group and its members.
//   - records.go, load.go: the record schemas and the replay of a partition.
//
// Behaviour follows Apache Kafka 4's GroupMetadataManager and
// OffsetMetadataManager for classic groups. KIP-848 consumer groups
// (ConsumerGroupHeartbeat) are meant to live beside classic groups in the same
// partition state, as a second group kind with its own records (key versions
// 3 and up, skipped by the loader today).
package group
