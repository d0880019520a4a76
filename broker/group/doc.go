// Package group is Kafka's group coordinator: the classic group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit) and group
// administration (ListGroups, DescribeGroups, DeleteGroups), persisted as
// records in __consumer_offsets with Kafka's key and value schemas.
//
// Layout:
//
//   - coordinator.go: the public API the broker's handlers call. Each call
//     blocks its caller until the answer is ready and never blocks a shard.
//   - shard.go: the coordinator runtime's shards (broker/coord): one
//     goroutine per shard owns the state of the __consumer_offsets
//     partitions mapped to it (partition % shards). Timers and finished
//     appends hand their work back through the shard's inbox. shard.go adds
//     the transactional writes (TxnStore) ordered with the appends.
//   - machine.go, classic.go, offsets.go, admin.go: the state machine. It does
//     no I/O: it reads the clock, schedules timers and queues appends through
//     the effects interface, and answers through reply callbacks.
//   - classic_group.go: a classic group and its members.
//   - records.go, load.go: the record schemas and the replay of a partition.
//   - txn.go, txn_state.go: transactional offset commits (TxnOffsetCommit)
//     and the markers that end them (CompleteTransaction), after Kafka's
//     OffsetMetadataManager: offsets written in a transactional batch stay
//     pending per producer, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT
//     with RequireStable), until the producer's COMMIT marker makes them
//     the committed offsets (unless a later commit of the partition exists)
//     or its ABORT marker drops them. The coordinator writes the markers of
//     its partitions itself, behind its own appends, as Kafka 4's does.
//   - consumer*.go, assignor_*.go: KIP-848 consumer groups
//     (ConsumerGroupHeartbeat, ConsumerGroupDescribe): member and group
//     epochs, server-side assignors (uniform, range), incremental
//     reconciliation (revoke before assign), regex subscriptions, and their
//     records (key versions 3-8 and 16); consumer_classic.go the online
//     migration between classic and consumer groups.
//   - streams*.go: KIP-1071 streams groups (StreamsGroupHeartbeat,
//     StreamsGroupDescribe): the topology the first member brings, resolved
//     against the topics (internal topics to create, partition counts,
//     copartitioning, status codes), the sticky task assignor (active and
//     standby tasks), task reconciliation (revoke before assign), and their
//     records (key versions 17 and 19-23).
//
// Behaviour follows Apache Kafka 4's GroupMetadataManager,
// OffsetMetadataManager, ConsumerGroup and CurrentAssignmentBuilder. A group
// id is either a classic or a consumer group: a ConsumerGroupHeartbeat takes
// over an empty classic group (keeping its offsets) and a JoinGroup an empty
// consumer group. A live classic group of the consumer protocol is upgraded
// to a consumer group when a KIP-848 member joins it, its members kept as
// classic members that the consumer group serves through JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup (consumer_classic.go); when the last
// KIP-848 member leaves such a group, it is downgraded back to a classic
// group, as group.consumer.migration.policy allows (bidirectional by
// default). A static classic member replacing the last KIP-848 member does
// not downgrade the group. Consumer groups assign the topics of
// Config.Topics; the broker calls Coordinator.TopicsChanged when they change.
package group
