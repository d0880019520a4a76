// Package coord is the runtime Kafka's coordinators share: the group
// coordinator (broker/group), the transaction coordinator (broker/txn) and
// any later one (share groups) run on it. It knows nothing of groups or
// transactions; a coordinator brings its state machine and timer keys.
//
// Layout:
//
//   - shard.go: a Shard is one goroutine that owns a coordinator's state
//     machine for the partitions of its internal topic mapped to it
//     (partition % shards). Work reaches it through its inbox; timers fire
//     and appends complete back through the same inbox, so the machine is
//     only ever touched by the shard goroutine and never blocks on I/O.
//     Appends to one partition are queued, merged (group commit) and
//     completed in the order they were issued.
//   - runtime.go: a Runtime is a coordinator's set of shards over the
//     partitions of its internal topic. Submit queues an operation on a
//     shard and returns its Pending answer (pending.go); Load and Unload
//     move a partition in and out of a shard; Each reaches every shard.
//   - clock.go: Clock and Timer, injected so tests control time.
//   - record.go: Record, the key/value record of an internal topic, and the
//     partitioner every internal topic uses.
//   - errors.go: the client error a failed append answers; log.go the
//     coordinators' logger.
//
// The name is the coordinators' own: package runtime would shadow Go's,
// and a coordinator's code reads coord.Shard, coord.Pending and
// coord.Record as what they are. Test support (a fake clock, an in-memory
// store, the datadriven script runner) is in coord/coordtest.
package coord
