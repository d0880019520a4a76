// Package txn is Kafka's transaction coordinator: InitProducerId for
// transactional ids, AddPartitionsToTxn (including the KIP-890 verification
// and broker-side forms), AddOffsetsToTxn, EndTxn (with the epoch bump of
// transaction version 2), DescribeTransactions and ListTransactions,
// transaction timeouts and transactional id expiration. State lives in
// __transaction_state records with Kafka's TxnMetadataKey/Value schemas.
//
// Layout, as broker/group:
//
//   - coordinator.go, api.go: the public API the broker's handlers call. Each call
//     blocks its caller until the answer is ready and never blocks a shard.
//   - shard.go: the coordinator runtime's shards (broker/coord): one
//     goroutine per shard owns the transactional ids of the
//     __transaction_state partitions mapped to it (partition % shards). Log
//     appends, marker writes and producer id allocations run on their own
//     goroutines and hand their completion back through the shard's inbox,
//     as do timers; shard.go adds the marker writes and allocations.
//   - machine.go, init.go, add.go, end.go, markers.go, admin.go: the state
//     machine. It does no I/O: it reads the clock and asks for effects.
//   - metadata.go: one transactional id's state and its transitions, as
//     Kafka's TransactionMetadata.
//   - records.go, load.go: the record schemas and the replay of a partition.
//
// Behaviour follows Apache Kafka 4's TransactionCoordinator,
// TransactionStateManager, TransactionMetadata and
// TransactionMarkerChannelManager.
package txn
