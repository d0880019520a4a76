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
//   - shard.go: one goroutine per shard owns the state of the
//     __consumer_offsets partitions mapped to it (partition % shards). Timers
//     and finished appends hand their work back through the shard's inbox.
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
//     records (key versions 3-8 and 16).
//
// Behaviour follows Apache Kafka 4's GroupMetadataManager,
// OffsetMetadataManager, ConsumerGroup and CurrentAssignmentBuilder. A group
// id is either a classic or a consumer group: a ConsumerGroupHeartbeat takes
// over an empty classic group (keeping its offsets) and a JoinGroup an empty
// consumer group; live groups of the other kind answer GROUP_ID_NOT_FOUND
// and INCONSISTENT_GROUP_PROTOCOL. Kafka's online upgrade of a live classic
// group, and classic protocol members inside a consumer group, are not
// implemented. Consumer groups assign the topics of Config.Topics; the
// broker calls Coordinator.TopicsChanged when they change.
package group
